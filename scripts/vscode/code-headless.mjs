#!/usr/bin/env node
// Stands in for the `code` executable that @vscode/test-electron launches: it understands
// `--extensionDevelopmentPath=`, `--extensionTestsPath=` and a folder to open, runs the tests in a
// real VS Code (code-server in a headless Chromium), relays their output and exits with their
// status. Other VS Code flags are accepted and ignored.
//
// Time limits (milliseconds, from the environment):
//   VSCODE_HEADLESS_START_TIMEOUT  the workbench must start the extension host (default 120000)
//   VSCODE_HEADLESS_RUN_TIMEOUT    the whole run (default 900000)
// VSCODE_HEADLESS_RESTRICTED=1 opens the folder in Restricted Mode (workspace trust on, never granted).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as util from 'node:util';
import { chromiumArgs, ensureHeadless, freePort, startCodeServer, workbenchUrl } from './headless.mjs';

const MARK = '::test:: ';
const say = (msg) => process.stderr.write(`[headless vscode] ${msg}\n`);

function parseArgs(argv) {
  const opts = { folder: undefined };
  for (const arg of argv) {
    const m = /^--([^=]+)=(.*)$/.exec(arg);
    if (m) opts[m[1]] = m[2];
    else if (!arg.startsWith('--')) opts.folder = path.resolve(arg);
  }
  return opts;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const devPath = opts.extensionDevelopmentPath;
  const testsPath = opts.extensionTestsPath;
  if (!devPath || !testsPath) {
    say('usage: code-headless --extensionDevelopmentPath=DIR --extensionTestsPath=FILE [FOLDER]');
    return 2;
  }
  const startTimeout = Number(process.env.VSCODE_HEADLESS_START_TIMEOUT ?? 120_000);
  const runTimeout = Number(process.env.VSCODE_HEADLESS_RUN_TIMEOUT ?? 900_000);
  const bin = await ensureHeadless();
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'vscode-headless-'));
  const folder = opts.folder ?? home;
  const port = await freePort();
  const serverLog = [];
  const restricted = process.env.VSCODE_HEADLESS_RESTRICTED === '1';
  const server = await startCodeServer({ bin, home, port, smokeTestDriver: true, restricted, log: (l) => serverLog.push(l) });
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({ executablePath: bin.chromium, args: chromiumArgs, headless: true });
  let timer;
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const remote = (p) => `vscode-remote://127.0.0.1:${port}${path.resolve(p)}`;
    let started = false;
    let finish;
    const done = new Promise((resolve) => (finish = resolve));
    await page.exposeFunction('codeAutomationExit', (code) => finish({ code: Number(code) }));
    await page.exposeFunction('codeAutomationLog', (type, args) => {
      started = true;
      const text = util.format(...(Array.isArray(args) ? args : [args]));
      // The test index marks its reporter's lines; the workbench's own console (failed lookups
      // of marketplace and telemetry hosts, and so on) is shown only when asked for.
      if (text.startsWith(MARK)) process.stdout.write(`${text.split('\n').map((l) => (l.startsWith(MARK) ? l.slice(MARK.length) : l)).join('\n')}\n`);
      else if (process.env.VSCODE_HEADLESS_VERBOSE) process.stderr.write(`<${type}> ${text}\n`);
    });
    timer = setTimeout(() => finish({ code: 1, reason: `the run did not finish within ${runTimeout / 1000} s` }), runTimeout);
    setTimeout(() => {
      if (!started) finish({ code: 1, reason: `VS Code did not start the extension host within ${startTimeout / 1000} s` });
    }, startTimeout).unref();
    const payload = [
      ['extensionDevelopmentPath', remote(devPath)],
      ['extensionTestsPath', remote(testsPath)],
      ['skipWelcome', 'true'],
    ];
    await page.goto(workbenchUrl(server.url, folder, payload));
    const result = await done;
    if (result.reason) {
      say(`${result.reason}. Last lines of code-server's log:\n${serverLog.slice(-20).join('\n')}`);
    }
    return result.code;
  } finally {
    clearTimeout(timer);
    await browser.close().catch(() => {});
    await server.stop();
    fs.rmSync(home, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    say(err instanceof Error ? err.message : String(err));
    process.exit(1);
  },
);
