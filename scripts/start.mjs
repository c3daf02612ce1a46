// `npm start`: the extension, built, in a real VS Code, on a demo static directory made afresh
// (.cache/demo/static) with one build held by a background `devserver-stage lock`, one stale and
// one legacy lock. A desktop `code` on the PATH is used if there is one; otherwise the headless
// VS Code (code-server) is started and its URL printed. Ctrl-C stops everything it started.
//
//   node scripts/start.mjs [--headless] [--port N]
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createDemo, holdLock } from './demo.mjs';
import { ensureHeadless, freePort, killGroup, root, startCodeServer, workbenchUrl } from './vscode/headless.mjs';

export const HELD_TAG = 'eve-release/R120-15662.0.0';

/** The demo static directory and a workspace whose settings point the extension at it. */
export async function prepareDemo(base = path.join(root, '.cache', 'demo')) {
  const staticDir = path.join(base, 'static');
  const workspace = path.join(base, 'workspace');
  const { legacy } = createDemo(staticDir);
  fs.mkdirSync(path.join(workspace, '.vscode'), { recursive: true });
  fs.writeFileSync(path.join(workspace, '.vscode', 'settings.json'), `${JSON.stringify({ 'devserverStaging.staticDirs': [staticDir] }, null, 2)}\n`);
  fs.writeFileSync(path.join(workspace, 'README.md'), `Demo workspace for Devserver Staging.\nIts static directory: ${staticDir}\n`);
  const holder = await holdLock(staticDir, HELD_TAG, 'demo: staging R120');
  return { staticDir, workspace, legacy, holder };
}

/** Starts code-server with the extension installed from this working tree. */
export async function startHeadless({ workspace, port, home = path.join(root, '.cache', 'demo', 'vscode'), log }) {
  const bin = await ensureHeadless();
  const server = await startCodeServer({ bin, home, port: port ?? (await freePort()), extensionDir: root, log });
  return { ...server, bin, url: workbenchUrl(server.url, workspace) };
}

function onPath(cmd) {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

async function main() {
  const args = process.argv.slice(2);
  const portArg = args.indexOf('--port');
  const port = portArg >= 0 ? Number(args[portArg + 1]) : undefined;
  const headless = args.includes('--headless') || !onPath('code');
  const demo = await prepareDemo();
  const stops = [() => demo.holder.kill('SIGTERM')];
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    console.log('\nStopping…');
    for (const s of stops.reverse()) await s();
    process.exit(0);
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);

  console.log(`Demo static directory: ${demo.staticDir}`);
  console.log(`  ${HELD_TAG} is held by a background devserver-stage lock (pid ${demo.holder.pid}),`);
  console.log('  octopus-release/R119-15633.0.0 has a stale lock,');
  console.log(demo.legacy ? '  hatch-paladin/R120-15663.0.0-rc1 has a legacy Python devserver lock.' : "  (no legacy lock: Debian's python3-lockfile is not installed).");

  if (!headless) {
    const code = spawn('code', ['--new-window', `--extensionDevelopmentPath=${root}`, demo.workspace], { stdio: 'inherit' });
    stops.push(() => killGroup(code).catch(() => undefined));
    console.log('\nOpened in VS Code. Press Ctrl-C here to stop the background lock holder.');
  } else {
    const server = await startHeadless({ workspace: demo.workspace, port });
    stops.push(() => server.stop());
    console.log(`\nVS Code (headless, code-server) is running. Open this in a browser:\n\n  ${server.url}\n`);
    console.log('Press Ctrl-C to stop it and the background lock holder.');
  }
  console.log(`\nTry the command line in another terminal:\n  node dist/cli.js -d ${path.relative(process.cwd(), demo.staticDir) || demo.staticDir} lock eve-release/R9-12739.0.0 -- sleep 30`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(1);
  });
}
