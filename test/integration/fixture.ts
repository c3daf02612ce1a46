/**
 * A static directory with one build in each lock state, made the way real tools make them: the
 * held one by a running `devserver-stage lock`, the legacy one by Python's lockfile.
 */
import { spawn, spawnSync, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { CLI, tempDir, track, waitFor } from '../helpers';

export interface Fixture {
  staticDir: string;
  /** Whether Python's lockfile was there to make the legacy lock. */
  legacy: boolean;
}

export const TAGS = {
  free: 'eve-release/R9-12739.0.0',
  free2: 'eve-release/R10-12871.0.0',
  held: 'eve-release/R120-15662.0.0',
  stale: 'octopus-release/R119-15633.0.0',
  legacy: 'hatch-paladin/R120-15663.0.0-rc1',
};

/** A staged build: an artifact and the `staged.timestamp` that staging leaves (what makes it a build, not a folder). */
export function makeBuild(staticDir: string, tag: string): string {
  const dir = path.join(staticDir, tag);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'autotest.tar'), Buffer.alloc(4096, 1));
  // As the Python devserver marks a staged build.
  fs.writeFileSync(path.join(dir, 'staged.timestamp'), '');
  return dir;
}

/** A lock left by a holder on another machine that stopped refreshing it an hour ago. */
export function makeStaleLock(staticDir: string, tag: string): void {
  const lock = path.join(staticDir, tag, 'devserver.lock');
  fs.mkdirSync(lock);
  const hourAgo = new Date(Date.now() - 3600_000);
  const owner = { pid: 41812, hostname: 'buildbot-7', user: 'chrome-bot', clientId: 'buildbot-7:41812', purpose: 'stage octopus', acquiredAt: hourAgo.toISOString(), token: 'fixture0stale', staleMs: 10000, refreshMs: 2500 };
  fs.writeFileSync(path.join(lock, 'owner.json'), JSON.stringify(owner));
  fs.utimesSync(lock, hourAgo, hourAgo);
}

/** The process group of the command running under `tag`'s lock, from its command record. */
function commandGroup(staticDir: string, tag: string): number | undefined {
  try {
    const lock = path.join(staticDir, tag, 'devserver.lock');
    const { token } = JSON.parse(fs.readFileSync(path.join(lock, 'owner.json'), 'utf8')) as { token: string };
    return (JSON.parse(fs.readFileSync(path.join(lock, `work.${token}`, 'command.json'), 'utf8')) as { pgid: number }).pgid;
  } catch {
    return undefined;
  }
}

/**
 * Takes a lock the way a script would: `devserver-stage lock TAG -- COMMAND`. Resolves once held.
 * The lock lasts as long as its command, even when the tool is killed; so killing the returned
 * process kills the command's process group with it, as a test that kills "the holder" means.
 */
export async function holdWithCli(staticDir: string, tag: string, extra: string[] = []): Promise<ChildProcess> {
  const child = track(
    spawn(process.execPath, [CLI, '--static-dir', staticDir, ...extra, 'lock', '--purpose', 'integration test', tag, '--', process.execPath, '-e', 'setInterval(() => {}, 1 << 30)'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    }),
  );
  await waitFor(() => (commandGroup(staticDir, tag) !== undefined ? true : undefined), 10_000, `the CLI to lock ${tag} and start its command`, 5);
  const group = commandGroup(staticDir, tag)!;
  const kill = child.kill.bind(child);
  child.kill = (signal?: NodeJS.Signals | number): boolean => {
    try {
      process.kill(-group, signal ?? 'SIGTERM');
    } catch {
      /* already gone */
    }
    return kill(signal);
  };
  return child;
}

export async function makeFixture(): Promise<Fixture & { holder: ChildProcess }> {
  const staticDir = tempDir('dss-it-');
  for (const tag of Object.values(TAGS)) makeBuild(staticDir, tag);
  makeStaleLock(staticDir, TAGS.stale);
  // Debian's python3 has python3-lockfile; another python3 first on the PATH may not.
  const python = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
  const py = spawnSync(python, ['-c', 'import lockfile,sys; lockfile.FileLock(sys.argv[1]).acquire(timeout=0)', path.join(staticDir, TAGS.legacy, 'devserver')]);
  const holder = await holdWithCli(staticDir, TAGS.held);
  return { staticDir, legacy: py.status === 0, holder };
}
