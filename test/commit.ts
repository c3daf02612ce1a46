/**
 * What the tests of cut-off commits share: an old build and an addition that replaces some of its
 * artifacts and adds others (whole new directories, files into directories it has, a link), the
 * area's bytes as old-or-new, and stagers stopped at a named step of their commit
 * (`DEVSERVER_STAGING_PAUSE_AT`, see src/core/base/steps.ts) and then killed or continued.
 */
import { strict as assert } from 'assert';
import { spawn, type ChildProcess } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { procStat } from '../src/core/base/holder';
import { artifactsOnDisk, sha256 } from './attack';
import { writeArchives } from './fixtures';
import { CLI, track, waitFor } from './helpers';

export function writeTree(root: string, files: Record<string, string | Buffer>, links: Record<string, string> = {}): void {
  for (const [name, data] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    fs.writeFileSync(path.join(root, name), data);
  }
  for (const [name, target] of Object.entries(links)) {
    fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    fs.symlinkSync(target, path.join(root, name));
  }
}

/** An old build and an addition staged over it with `--add --overwrite`. */
export interface Builds {
  old: string;
  addition: string;
  /** Every artifact of the old build, and of the build after the addition: name -> content hash or link target. */
  oldBytes: Map<string, string>;
  newBytes: Map<string, string>;
}

/**
 * Writes the two sources under `root`. The addition's commit moves two new directories whole, adds
 * a file to a directory the build has, replaces two files (each set aside first), and replaces the
 * manifest and `staged.timestamp` (set aside too): every kind of step there is.
 */
export function makeBuilds(root: string, extra: { addition?: Record<string, string>; additionLinks?: Record<string, string> } = {}): Builds {
  const old = path.join(root, 'old');
  const addition = path.join(root, 'addition');
  const oldFiles = { 'top.txt': 'top, old\n', 'keep.txt': 'kept as it is\n', 'autotest/control': 'control, old\n', 'autotest/packages/p.tar': crypto.randomBytes(5000) };
  const oldLinks = { 'autotest/link': 'control' };
  const addFiles = {
    'newdir/a/b/c.txt': 'deep\n',
    'newdir/d.txt': 'd\n',
    'autotest/fresh/e.txt': 'e\n',
    'autotest/newfile': 'new\n',
    'autotest/control': 'control, new\n',
    'top.txt': 'top, new\n',
    ...extra.addition,
  };
  const addLinks = { 'newdir/link-to-d': 'd.txt', ...extra.additionLinks };
  writeTree(old, oldFiles, oldLinks);
  writeTree(addition, addFiles, addLinks);
  const bytes = (files: Record<string, string | Buffer>, links: Record<string, string>): Map<string, string> =>
    new Map([...Object.entries(files).map(([n, d]) => [n, sha256(d)] as const), ...Object.entries(links).map(([n, t]) => [n, `-> ${t}`] as const)]);
  const oldBytes = bytes(oldFiles, oldLinks);
  const newBytes = new Map([...oldBytes, ...bytes(addFiles, addLinks)]);
  return { old, addition, oldBytes, newBytes };
}

/**
 * An addition (a tar archive) whose commit is refused by its last check, after every rename: the
 * stager undoes its own commit. `x/y/l -> ..` and `x/y/a -> l/../..` each stay inside the area by
 * their text, but `x/y/a` followed through `x/y/l` leads out of it. (An archive, since a local
 * source's links are followed as it is read.)
 */
export async function writeRefusedAddition(file: string): Promise<void> {
  await writeArchives([
    {
      file,
      kind: 'tar',
      entries: [
        { name: 'top.txt', data: 'top, refused\n' },
        { name: 'autotest/control', data: 'control, refused\n' },
        { name: 'autotest/newfile', data: 'new, refused\n' },
        { name: 'x/y/l', type: 'symlink', linkname: '..' },
        { name: 'x/y/a', type: 'symlink', linkname: 'l/../..' },
      ],
    },
  ]);
}

/** Every artifact of an area on disk (the protocol's names left out): name -> content hash or link target. */
export function areaBytes(area: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const [name, st] of artifactsOnDisk(area)) {
    const p = path.join(area, name);
    out.set(name, st.isSymbolicLink() ? `-> ${fs.readlinkSync(p)}` : sha256(fs.readFileSync(p)));
  }
  return out;
}

/** `old` or `new` when the area holds exactly that build's bytes; else what differs from each. */
export function whichBuild(area: string, builds: Builds): string {
  const now = areaBytes(area);
  const same = (want: Map<string, string>): boolean => now.size === want.size && [...want].every(([n, h]) => now.get(n) === h);
  if (same(builds.oldBytes)) return 'old';
  if (same(builds.newBytes)) return 'new';
  const diff = (want: Map<string, string>): string[] => [
    ...[...want].filter(([n, h]) => now.get(n) !== h).map(([n]) => (now.has(n) ? `changed ${n}` : `missing ${n}`)),
    ...[...now.keys()].filter((n) => !want.has(n)).map((n) => `extra ${n}`),
  ];
  return `mixed: against the old build ${diff(builds.oldBytes).join(', ')}; against the new ${diff(builds.newBytes).join(', ')}`;
}

/** The instants a step log (DEVSERVER_STAGING_STEP_LOG) went through whose name starts with `prefix`, as `name#n` (its n-th passage). */
export function instantsOf(log: string, prefix: string): string[] {
  const seen = new Map<string, number>();
  const out: string[] = [];
  for (const name of fs.readFileSync(log, 'utf8').split('\n')) {
    if (name === '') continue;
    const n = (seen.get(name) ?? 0) + 1;
    seen.set(name, n);
    if (name.startsWith(prefix)) out.push(`${name}#${n}`);
  }
  return out;
}

/** Waits until the kernel shows `child` stopped (state T); fails if it ends first. */
export async function stopped(r: Running, what: string): Promise<void> {
  let ended = false;
  void r.done.then(() => (ended = true));
  await waitFor(
    () => {
      if (ended) throw new Error(`${what}: the process ended instead of stopping at its step:\n${r.stderr}`);
      return procStat(r.child.pid!)?.state === 'T' ? true : undefined;
    },
    60_000,
    `${what} to stop at its step`,
    5,
  );
}

/** A process started by `startCli`: its output is collected from the start. */
export interface Running {
  child: ChildProcess;
  readonly stdout: string;
  readonly stderr: string;
  /** How it ended. */
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Starts the built CLI (`devserver-stage ARGS`), stopping at `pauseAt` if given; `hostname` runs
 * it under `unshare --uts` with that hostname (exec keeps one process, so signals reach node itself).
 */
export function startCli(args: readonly string[], options: { staticDir: string; pauseAt?: string; stepLog?: string; hostname?: string }): Running {
  const env: NodeJS.ProcessEnv = { ...process.env, DEVSERVER_STATIC_DIR: options.staticDir };
  if (options.pauseAt !== undefined) env.DEVSERVER_STAGING_PAUSE_AT = options.pauseAt;
  if (options.stepLog !== undefined) env.DEVSERVER_STAGING_STEP_LOG = options.stepLog;
  const stdio: ['ignore', 'pipe', 'pipe'] = ['ignore', 'pipe', 'pipe'];
  const child =
    options.hostname === undefined
      ? spawn(process.execPath, [CLI, ...args], { env, stdio })
      : spawn('unshare', ['--uts', 'sh', '-c', `hostname ${options.hostname} && exec "$0" "$@"`, process.execPath, CLI, ...args], { env, stdio });
  const running = {
    child,
    stdout: '',
    stderr: '',
    done: new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('close', (code, signal) => resolve({ code, signal }))),
  };
  child.stdout.on('data', (d: Buffer) => (running.stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (running.stderr += d.toString()));
  track(child);
  return running;
}

/** Runs the built CLI to its end. */
export async function runCli(args: readonly string[], options: Parameters<typeof startCli>[1]): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  const r = startCli(args, options);
  const end = await r.done;
  return { ...end, stdout: r.stdout, stderr: r.stderr };
}

/** SIGKILLs a stopped process and checks that the signal is what ended it. */
export async function killStopped(r: Running, what: string): Promise<void> {
  assert.equal(procStat(r.child.pid!)?.state, 'T', `${what}: not stopped when it was to be killed`);
  r.child.kill('SIGKILL');
  const end = await r.done;
  assert.equal(end.signal, 'SIGKILL', `${what}: not ended by the kill`);
}
