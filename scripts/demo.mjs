// Creates a demo static directory and keeps one of its builds locked by a background
// `devserver-stage lock` process until Ctrl-C. `node scripts/demo.mjs [DIR]`
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeDemoHistory } from './demoHistory.mjs';

const root = path.resolve(fileURLToPath(import.meta.url), '..', '..');
const cli = path.join(root, 'dist', 'cli.js');

/** Builds the demo tree; returns the static directory. Safe to call again: starts from scratch. */
export function createDemo(staticDir) {
  fs.rmSync(staticDir, { recursive: true, force: true });
  const builds = {
    'eve-release': ['R118-15474.0.0', 'R119-15633.0.0', 'R120-15662.0.0', 'R9-12739.0.0', 'R10-12871.0.0'],
    'octopus-release': ['R119-15633.0.0', 'R120-15662.0.0'],
    'hatch-paladin': ['R120-15663.0.0-rc1'],
  };
  for (const [board, versions] of Object.entries(builds)) {
    for (const v of versions) {
      const dir = path.join(staticDir, board, v);
      fs.mkdirSync(dir, { recursive: true });
      // An xz file starts with its magic number, NUL included: the view knows it is not text.
      fs.writeFileSync(path.join(dir, 'chromiumos_test_image.tar.xz'), Buffer.concat([Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]), Buffer.alloc(64 * 1024 - 6, 7)]));
      fs.writeFileSync(path.join(dir, 'autotest.tar'), Buffer.alloc(16 * 1024, 3));
      fs.writeFileSync(path.join(dir, 'staged.timestamp'), '');
    }
  }
  // A stale lock: its holder on another machine stopped refreshing it an hour ago.
  const stale = path.join(staticDir, 'octopus-release', 'R119-15633.0.0', 'devserver.lock');
  fs.mkdirSync(stale);
  const hourAgo = new Date(Date.now() - 3600_000);
  fs.writeFileSync(
    path.join(stale, 'owner.json'),
    JSON.stringify({ pid: 41812, hostname: 'buildbot-7', user: 'chrome-bot', clientId: 'buildbot-7:41812', purpose: 'stage octopus R119', acquiredAt: hourAgo.toISOString(), token: 'demo0stale0token', staleMs: 10000, refreshMs: 2500 }, null, 2),
  );
  fs.utimesSync(stale, hourAgo, hourAgo);
  writeDemoHistory(staticDir);
  // A legacy lock left by the Python devserver, when Debian's python3-lockfile is there to make one.
  const legacyArea = path.join(staticDir, 'hatch-paladin', 'R120-15663.0.0-rc1');
  const py = spawnSync('/usr/bin/python3', ['-c', 'import lockfile,sys; lockfile.FileLock(sys.argv[1]).acquire(timeout=0)', path.join(legacyArea, 'devserver')]);
  const legacy = py.status === 0;
  return { staticDir, legacy };
}

/** Starts a background holder of one build's lock; resolves once it holds it. */
export function holdLock(staticDir, tag, purpose) {
  const child = spawn(process.execPath, [cli, '--static-dir', staticDir, 'lock', '--purpose', purpose, tag, '--', process.execPath, '-e', 'setInterval(() => {}, 1 << 30)'], { stdio: 'ignore', detached: false });
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + 10_000;
    const poll = () => {
      if (fs.existsSync(path.join(staticDir, tag, 'devserver.lock', 'owner.json'))) return resolve(child);
      if (child.exitCode !== null || Date.now() > deadline) return reject(new Error(`the background lock on ${tag} did not start`));
      setTimeout(poll, 50);
    };
    poll();
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const staticDir = path.resolve(process.argv[2] ?? path.join(root, '.cache', 'demo', 'static'));
  const { legacy } = createDemo(staticDir);
  const holder = await holdLock(staticDir, 'eve-release/R120-15662.0.0', 'demo: staging R120');
  const stop = () => {
    holder.kill('SIGTERM');
    process.exit(0);
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  console.log(`Demo static directory: ${staticDir}`);
  if (!legacy) console.log('(No legacy lock: Debian\'s python3-lockfile is not installed.)');
  for (const board of ['eve-release', 'octopus-release', 'hatch-paladin']) {
    console.log(`\n$ devserver-stage list ${board}`);
    spawnSync(process.execPath, [cli, '--static-dir', staticDir, 'list', board], { stdio: 'inherit' });
  }
  console.log(`\nTry it yourself in another terminal:\n  export DEVSERVER_STATIC_DIR=${staticDir}\n  node ${path.relative(process.cwd(), cli) || cli} status eve-release/R120-15662.0.0\n\nThe lock on eve-release/R120-15662.0.0 is held by pid ${holder.pid} until you press Ctrl-C.`);
  if (os.platform() !== 'linux') console.log('(Demo tested on Linux.)');
}
