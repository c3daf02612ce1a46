#!/usr/bin/env node
// The extension measured inside a real VS Code (see bench/README.md): builds the production
// bundles and reports their size, then runs out/bench/vscode/index.js in VS Code's extension
// host, through @vscode/test-electron's runTests like the integration suites (headless
// code-server on Linux, --vscode=desktop elsewhere).
//
//   node bench/vscode/run.mjs [--runs=N] [--activation-runs=N] [--quick] [--no-build] [--parts=a,b] [--vscode=headless|desktop]
//
// --runs               full runs, each in a fresh VS Code (default 1); figures are summarised over them
// --activation-runs    further fresh VS Codes that only activate the extension (default 3)
// --quick              20 events, 15 s CPU windows: a smoke run, not figures to quote
// --no-build           measure dist/ as it is instead of building the production bundles first
// --parts              which parts of the full runs (default activation,latency,cpu,scale,scan,big,usage,reload;
//                      reload is measured in the browser, on the headless route only)
// --reload-runs=N      reloads of the window in the reload part (default 5)
// --profile=DIR        write the extension host's CPU profile of the scan part to DIR/scan.cpuprofile
import { runTests } from '@vscode/test-electron';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';

const root = path.resolve(fileURLToPath(import.meta.url), '..', '..', '..');
const arg = (name, fallback) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const runs = Number(arg('runs', 1));
const activationRuns = Number(arg('activation-runs', 3));
const quick = process.argv.includes('--quick');
const route = arg('vscode', process.env.DEVSERVER_STAGING_VSCODE ?? (os.platform() === 'linux' ? 'headless' : 'desktop'));
if (route !== 'headless' && route !== 'desktop') {
  console.error(`Unknown VS Code route "${route}": use --vscode=headless or --vscode=desktop.`);
  process.exit(2);
}

const entry = path.join(root, 'out', 'bench', 'vscode', 'index.js');
if (!fs.existsSync(entry)) {
  console.error('Compile first: npm run compile-tests');
  process.exit(2);
}

// Bundle sizes: what a user downloads and what the extension host parses on activation.
if (!process.argv.includes('--no-build')) {
  execFileSync(process.execPath, [path.join(root, 'scripts', 'build.mjs'), '--production'], { cwd: root, stdio: 'inherit' });
}
const production = !fs.existsSync(path.join(root, 'dist', 'extension.js.map'));
console.log(`bundles in dist/ (${production ? 'production build: minified, no source maps' : 'development build: not minified; run without --no-build for the production figures'})`);
for (const f of ['extension.js', 'cli.js', 'core.js']) {
  const data = fs.readFileSync(path.join(root, 'dist', f));
  const gz = zlib.gzipSync(data, { level: 9 }).length;
  console.log(`   ${f.padEnd(13)} ${(data.length / 1024).toFixed(1).padStart(7)} KiB   gzip -9: ${(gz / 1024).toFixed(1).padStart(6)} KiB`);
}
const vsix = fs.readdirSync(root).filter((f) => f.endsWith('.vsix'));
for (const f of vsix) console.log(`   ${f}  ${(fs.statSync(path.join(root, f)).size / 1024).toFixed(1)} KiB`);
if (vsix.length === 0) console.log('   (no .vsix in the working tree)');
console.log();

// A long run is expected: the default limit of the headless route is 15 minutes.
process.env.VSCODE_HEADLESS_RUN_TIMEOUT ??= String(30 * 60_000);

/** One fresh VS Code running the benchmark; its figures, or undefined if it failed. */
async function runOnce(parts) {
  const workspace = fs.mkdtempSync(path.join(os.tmpdir(), 'devserver-staging-bench-'));
  const out = path.join(workspace, '..', `${path.basename(workspace)}.json`);
  try {
    const code = await runTests({
      extensionDevelopmentPath: root,
      extensionTestsPath: entry,
      vscodeExecutablePath: route === 'headless' ? path.join(root, 'scripts', 'vscode', 'code-headless.mjs') : process.env.VSCODE_EXECUTABLE_PATH,
      launchArgs: [workspace, '--disable-extensions'],
      extensionTestsEnv: {
        DEVSERVER_STAGING_BENCH_PARTS: parts,
        DEVSERVER_STAGING_BENCH_OUT: out,
        ...(arg('profile', '') !== '' ? { DEVSERVER_STAGING_BENCH_PROFILE: path.resolve(arg('profile', '')) } : {}),
        ...(quick ? { DEVSERVER_STAGING_BENCH_EVENTS: '20', DEVSERVER_STAGING_BENCH_CPU_SECONDS: '15' } : {}),
      },
    }).catch((err) => {
      if (err && typeof err.code === 'number') return err.code;
      console.error(`Could not run VS Code (${route}): ${err instanceof Error ? err.message : err}`);
      return 1;
    });
    if (code !== 0 || !fs.existsSync(out)) {
      console.error(`The benchmark did not complete in VS Code (exit code ${code}).`);
      return undefined;
    }
    return JSON.parse(fs.readFileSync(out, 'utf8'));
  } finally {
    fs.rmSync(workspace, { recursive: true, force: true });
    fs.rmSync(out, { force: true });
  }
}

const parts = arg('parts', 'activation,latency,cpu,scale,scan,big,usage,reload').split(',').map((p) => p.trim());
const hostParts = parts.filter((p) => p !== 'reload');
const results = [];
let failed = false;
for (let i = 0; i < runs; i++) {
  if (runs > 1) console.log(`run ${i + 1} of ${runs}`);
  const r = hostParts.length > 0 ? await runOnce(hostParts.join(',')) : {};
  if (r === undefined) failed = true;
  else {
    if (parts.includes('reload')) {
      if (route !== 'headless') console.log('reload: measured in the browser, on the headless route only');
      else {
        const { measureReload } = await import('./reload.mjs');
        Object.assign(r, await measureReload({ runs: Number(arg('reload-runs', 5)) }).catch((err) => {
          console.error(`The reload part could not run: ${err instanceof Error ? err.message : err}`);
          failed = true;
          return {};
        }));
      }
      console.log();
    }
    results.push(r);
  }
}
const activations = [];
if (activationRuns > 0) console.log(`activation only, in ${activationRuns} more fresh VS Code${activationRuns === 1 ? '' : 's'}`);
for (let i = 0; i < activationRuns; i++) {
  const r = await runOnce('activation');
  if (r === undefined) failed = true;
  else activations.push(r);
}

// Each figure over every run that measured it: the median and the range.
const names = [...new Set([...results, ...activations].flatMap((r) => Object.keys(r)))];
if (results.length + activations.length > 1) {
  const med = (v) => {
    const s = [...v].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  };
  const fmt = (v) => (Number.isInteger(v) ? String(v) : Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(2));
  console.log('summary over runs: median [min - max] (n)');
  for (const name of names) {
    const v = [...results, ...activations].map((r) => r[name]).filter((x) => typeof x === 'number' && Number.isFinite(x));
    if (v.length === 0) continue;
    console.log(`   ${name.padEnd(56)} ${fmt(med(v)).padStart(8)}  [${fmt(Math.min(...v))} - ${fmt(Math.max(...v))}]  (${v.length})`);
  }
}
process.exit(failed ? 1 : 0);
