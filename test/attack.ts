/**
 * Shared pieces of the adversarial suites (test/unit/attack-*.test.ts): canary trees outside the
 * static directory hashed before and after, commands run under a deadline, and checks of an area
 * against its manifest. They only rely on the documented on-disk protocol (docs/protocol.md).
 */
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import type { LockInfo } from '../src/core/base/types';
import { CLI, WORKERS, track } from './helpers';

/** Every entry below `dir` (and `dir` itself): type, mode, owner, size, mtime, content hash or link target. */
export function fingerprint(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const visit = (p: string, rel: string): void => {
    let st: fs.Stats;
    try {
      st = fs.lstatSync(p);
    } catch {
      return;
    }
    let what: string;
    if (st.isSymbolicLink()) what = `link->${fs.readlinkSync(p)}`;
    else if (st.isFile()) what = `file sha256=${crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex').slice(0, 16)}`;
    else if (st.isDirectory()) what = 'dir';
    else what = `special mode=${st.mode.toString(8)}`;
    out.set(rel || '.', `${what} mode=${(st.mode & 0o7777).toString(8)} uid=${st.uid} size=${st.isDirectory() ? '-' : st.size} mtime=${st.mtimeMs}`);
    if (st.isDirectory() && !st.isSymbolicLink()) for (const name of fs.readdirSync(p).sort()) visit(path.join(p, name), rel ? `${rel}/${name}` : name);
  };
  visit(dir, '');
  return out;
}

/** Human-readable differences between two fingerprints of `root`; empty when nothing changed. */
export function changes(root: string, before: Map<string, string>, after: Map<string, string>): string[] {
  const out: string[] = [];
  for (const [k, v] of before) {
    const w = after.get(k);
    if (w === undefined) out.push(`removed ${path.join(root, k)} (was ${v})`);
    else if (w !== v) out.push(`changed ${path.join(root, k)}: ${v}  =>  ${w}`);
  }
  for (const [k, w] of after) if (!before.has(k)) out.push(`created ${path.join(root, k)} (${w})`);
  return out;
}

/** A few files and directories outside the static directory that no command may ever touch. */
export function plantCanaries(dir: string, extra: Record<string, string> = {}): void {
  fs.mkdirSync(dir, { recursive: true });
  const files: Record<string, string> = {
    'victim.txt': 'victim: must never change\n',
    'precious/data.bin': crypto.randomBytes(4096).toString('hex'),
    'precious/deeper/notes.txt': 'deep canary\n',
    ...extra,
  };
  for (const [name, data] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), data);
  }
}

export interface Timed {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
  /** It had not ended by the deadline. */
  hung: boolean;
  /** When hung or sent SIGTERM: it ended within `termGraceMs` of SIGTERM (undefined when not sent). */
  stoppedOnTerm?: boolean;
  /** SIGTERM was sent while it ran (by `termAfterMs`, `termOn` or the deadline). */
  termSent: boolean;
}

export interface TimedOptions extends SpawnOptions {
  timeoutMs: number;
  /** After the deadline: SIGTERM, then this long to stop, then SIGKILL. Default 3 s. */
  termGraceMs?: number;
  /** Send SIGTERM this long after the start (to prove it stops when asked). */
  termAfterMs?: number;
  /** Send SIGTERM, then SIGCONT (it may have been stopped meanwhile), once this resolves. */
  termOn?: Promise<unknown>;
  /** Called with the pid as soon as it runs. */
  onSpawn?: (pid: number) => void;
}

/** Runs a command; at the deadline sends SIGTERM, then SIGKILL after a grace, and says which. */
export function runTimed(command: string, args: readonly string[], options: TimedOptions): Promise<Timed> {
  const { timeoutMs, termGraceMs = 3_000, termAfterMs, termOn, onSpawn, ...spawnOptions } = options;
  return new Promise((resolve, reject) => {
    const start = Date.now();
    const child = spawn(command, args, { ...spawnOptions, stdio: ['ignore', 'pipe', 'pipe'] });
    if (child.pid !== undefined) onSpawn?.(child.pid);
    let closed = false;
    let stdout = '';
    let stderr = '';
    let hung = false;
    let termSentAt: number | undefined;
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timers: NodeJS.Timeout[] = [];
    const term = (): void => {
      if (closed || termSentAt !== undefined) return;
      termSentAt = Date.now();
      child.kill('SIGTERM');
      child.kill('SIGCONT');
      timers.push(setTimeout(() => child.kill('SIGKILL'), termGraceMs));
    };
    if (termAfterMs !== undefined) timers.push(setTimeout(term, termAfterMs));
    void termOn?.then(term);
    timers.push(
      setTimeout(() => {
        hung = true;
        if (termSentAt === undefined) term();
      }, timeoutMs),
    );
    child.once('error', reject);
    // Ended: a signal sent from now on would not be sent to it.
    child.once('exit', () => (closed = true));
    child.once('close', (code, signal) => {
      for (const t of timers) clearTimeout(t);
      const end = Date.now();
      const stoppedOnTerm = termSentAt === undefined ? undefined : signal !== 'SIGKILL' && end - termSentAt < termGraceMs;
      resolve({ code, signal, stdout, stderr, ms: end - start, hung, stoppedOnTerm, termSent: termSentAt !== undefined });
    });
  });
}

/** The built CLI under a deadline, optionally as another user (`runuser -u USER`). */
export function cliTimed(staticDir: string, args: readonly string[], options: Omit<TimedOptions, 'env'> & { env?: NodeJS.ProcessEnv; user?: string; umask?: string } = { timeoutMs: 20_000 }): Promise<Timed> {
  const { env, user, umask, ...rest } = options;
  const fullEnv = { ...process.env, DEVSERVER_STATIC_DIR: staticDir, ...env };
  if (user === undefined && umask === undefined) return runTimed(process.execPath, [CLI, ...args], { ...rest, env: fullEnv });
  // `exec` keeps one process, so signals reach the CLI itself.
  const script = `umask ${umask ?? '022'}; exec "$@"`;
  const inner = ['sh', '-c', script, 'sh', process.execPath, CLI, ...args];
  const argv = user === undefined ? inner : ['runuser', '-u', user, '--', ...inner];
  return runTimed(argv[0], argv.slice(1), { ...rest, env: fullEnv });
}

/** One line describing a finished command, for failure messages. */
export function describeRun(what: string, r: Timed): string {
  const status = r.hung ? `HUNG (no exit within the deadline; ${r.stoppedOnTerm ? 'stopped on SIGTERM' : 'IGNORED SIGTERM, SIGKILLed'})` : `exit ${r.code ?? r.signal}`;
  const err = r.stderr.trim().split('\n').slice(-2).join(' | ');
  return `${what}: ${status} after ${r.ms} ms${err ? `; stderr: ${err.slice(0, 300)}` : ''}`;
}

/** `devserver-stage --json status TAG`, as a user (or root) runs it, checked to have succeeded. */
export async function statusJson(staticDir: string, tag: string, options: { env?: NodeJS.ProcessEnv; user?: string } = {}): Promise<LockInfo> {
  const r = await cliTimed(staticDir, ['--json', 'status', tag], { timeoutMs: 20_000, ...options });
  if (r.code !== 0) throw new Error(describeRun('status', r));
  return JSON.parse(r.stdout) as LockInfo;
}

export const hasTool = (name: string): boolean => spawnSync('sh', ['-c', `command -v ${name}`]).status === 0;

/** The loop of test/workers/exchange.ts in C, for where koffi cannot be loaded: same arguments, same output. */
const EXCHANGE_C = `
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
static volatile sig_atomic_t stop = 0;
static void on_term(int s) { (void)s; stop = 1; }
int main(int argc, char **argv) {
  if (argc < 3) return 2;
  long limit = argc > 3 ? atol(argv[3]) : -1;
  unsigned long n = 0;
  signal(SIGTERM, on_term);
  while (!stop && (limit < 0 || (long)n < limit))
    if (syscall(SYS_renameat2, AT_FDCWD, argv[1], AT_FDCWD, argv[2], 2 /* RENAME_EXCHANGE */) == 0) n++;
  /* Stopped: leave both names as they were. */
  if (stop && n % 2) syscall(SYS_renameat2, AT_FDCWD, argv[1], AT_FDCWD, argv[2], 2);
  printf("%lu\\n", n);
  return 0;
}
`;

/**
 * A small helper process of an attack, as a command to run with its own arguments after it: the
 * compiled test/workers/NAME.js, which calls libc through koffi (an npm package that ships prebuilt
 * binaries, so that no compiler is needed), where koffi loads; else `cSource`, the same program in
 * C, built with `cc` into `dir`; else a sentence saying why neither can be had, for the skip.
 * DSS_HELPERS=koffi or =cc takes only that way.
 */
export function helperCommand(name: string, cSource: string, dir: string): string[] | string {
  const only = process.env.DSS_HELPERS;
  if (process.platform !== 'linux') return `the ${name} helper calls Linux system calls`;
  const worker = path.join(WORKERS, `${name}.js`);
  let koffiError = 'not tried';
  if (only !== 'cc') {
    const check = spawnSync(process.execPath, [worker, '--check'], { encoding: 'utf8' });
    if (check.status === 0) return [process.execPath, worker];
    koffiError = check.stderr.trim().split('\n').find((l) => /Error/.test(l)) ?? `exit ${check.status}`;
  }
  if (only !== 'koffi' && hasTool('cc')) {
    const bin = path.join(dir, name);
    fs.writeFileSync(`${bin}.c`, cSource);
    const cc = spawnSync('cc', ['-O2', '-o', bin, `${bin}.c`], { encoding: 'utf8' });
    if (cc.status === 0) return [bin];
    return `cc could not build the ${name} helper: ${cc.stderr.trim().slice(0, 300)}`;
  }
  const noKoffi = `koffi did not load (${koffiError}; \`npm install\` brings it)`;
  if (only === 'koffi') return `no ${name} helper here: ${noKoffi}`;
  if (only === 'cc') return `no ${name} helper here: no C compiler (cc)`;
  return `no ${name} helper here: ${noKoffi} and there is no C compiler (cc)`;
}

/**
 * A command that exchanges two names with renameat2(RENAME_EXCHANGE) in a tight loop, to be run
 * as `[...command, A, B]` (and an optional count to stop after); SIGTERM stops it with both names
 * as they were, and it prints how many exchanges it made (test/workers/exchange.ts).
 */
export function exchanger(dir: string): string[] | string {
  return helperCommand('exchange', EXCHANGE_C, dir);
}

/** Stops an exchanger (SIGTERM: it leaves both names as they were); how many exchanges it made. */
export async function stopExchanger(s: ChildProcess | undefined): Promise<number> {
  if (s === undefined || s.exitCode !== null) return 0;
  let out = '';
  s.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const done = new Promise<void>((r) => s.once('close', () => r()));
  s.kill('SIGTERM');
  await done;
  return Number(out.trim()) || 0;
}

export const MANIFEST = '.devserver-staging.manifest.json';
export const TIMESTAMP = 'staged.timestamp';

/** Names of the protocol, never artifacts: `.devserver-staging*`, `devserver.lock*`, and the top-level `staged.timestamp`. */
export function isProtocol(rel: string): boolean {
  const base = rel.split('/').pop()!;
  return rel === TIMESTAMP || rel === 'devserver' || base.startsWith('.devserver-staging') || base.startsWith('devserver.lock');
}

/** Files and links below an area, relative and '/'-separated, without protocol names. */
export function artifactsOnDisk(area: string): Map<string, fs.Stats> {
  const out = new Map<string, fs.Stats>();
  const walk = (d: string, rel: string): void => {
    for (const name of fs.readdirSync(d)) {
      const r = rel ? `${rel}/${name}` : name;
      if (isProtocol(r)) continue;
      const st = fs.lstatSync(path.join(d, name));
      if (st.isDirectory()) walk(path.join(d, name), r);
      else out.set(r, st);
    }
  };
  walk(area, '');
  return out;
}

export const sha256 = (data: Buffer | string): string => crypto.createHash('sha256').update(data).digest('hex');

/**
 * Checks an area file by file: the manifest lists exactly the artifacts on disk, each with the
 * right hash, and every file of `expected` (name -> content hash) is there with that content.
 * Returns the problems found, empty when the area is consistent.
 */
export function checkArea(area: string, expected: Map<string, string> = new Map()): string[] {
  const problems: string[] = [];
  let manifest: { artifacts?: Record<string, { type: string; sha256: string; linkTarget?: string } | null> };
  try {
    manifest = JSON.parse(fs.readFileSync(path.join(area, MANIFEST), 'utf8')) as typeof manifest;
  } catch (err) {
    return [`manifest ${path.join(area, MANIFEST)} unreadable: ${(err as Error).message}`];
  }
  const listed = manifest.artifacts ?? {};
  const disk = artifactsOnDisk(area);
  for (const [name, entry] of Object.entries(listed)) {
    const p = path.join(area, name);
    const st = disk.get(name);
    if (entry === null) problems.push(`manifest entry ${name} is null`);
    else if (st === undefined) problems.push(`listed but missing: ${p}`);
    else if (entry.type === 'symlink') {
      if (!st.isSymbolicLink() || fs.readlinkSync(p) !== entry.linkTarget) problems.push(`listed link differs: ${p}`);
    } else if (!st.isFile()) problems.push(`listed as a file but not one: ${p}`);
    else {
      const h = sha256(fs.readFileSync(p));
      if (h !== entry.sha256) problems.push(`hash mismatch: ${p} is ${h.slice(0, 12)}, manifest says ${entry.sha256.slice(0, 12)}`);
    }
  }
  for (const name of disk.keys()) if (!(name in listed)) problems.push(`unlisted file on disk: ${path.join(area, name)}`);
  for (const [name, hash] of expected) {
    const p = path.join(area, name);
    let h: string | undefined;
    try {
      h = sha256(fs.readFileSync(p));
    } catch {
      h = undefined;
    }
    if (h === undefined) problems.push(`second stager's file missing: ${p}`);
    else if (h !== hash) problems.push(`second stager's file has other content: ${p}`);
  }
  return problems;
}

/** Leftovers a dead holder may leave in an area: partial files and lock siblings (claims, trash, probes). */
export function areaJunk(area: string): string[] {
  let names: string[];
  try {
    names = fs.readdirSync(area);
  } catch {
    return [];
  }
  return names.filter((n) => n.startsWith('.devserver-staging.part') || n.startsWith('devserver.lock.') || n.startsWith('.devserver-staging.trash')).map((n) => path.join(area, n));
}

export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Clock probes under `<static>/.devserver-staging/` whose writer (a pid in the name) is gone. */
export function deadProbes(staticDir: string): string[] {
  const meta = path.join(staticDir, '.devserver-staging');
  let names: string[];
  try {
    names = fs.readdirSync(meta);
  } catch {
    return [];
  }
  return names
    .filter((n) => n.startsWith('clock'))
    .filter((n) => {
      const pids = (n.match(/\d+/g) ?? []).map(Number).filter((p) => p > 1 && p < 4_194_305);
      return !pids.some(pidAlive);
    })
    .map((n) => path.join(meta, n));
}

/** The next pids the kernel will hand out (for planting names a process will use as `<name>.<pid>`). */
export function nextPids(count: number): number[] {
  let last = process.pid;
  try {
    last = Number(fs.readFileSync('/proc/sys/kernel/ns_last_pid', 'utf8').trim());
  } catch {
    // Not Linux: guess from our own pid.
  }
  let max = 4_194_304;
  try {
    max = Number(fs.readFileSync('/proc/sys/kernel/pid_max', 'utf8').trim());
  } catch {
    // Keep the default.
  }
  const out: number[] = [];
  for (let i = 1; i <= count; i++) out.push(((last + i - 300) % max) + 300);
  return out;
}

/** A small file of random bytes of `size`, written at `p`; returns its SHA-256. */
export function writeRandom(p: string, size: number): string {
  const data = crypto.randomBytes(size);
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, data);
  return sha256(data);
}

export async function pool<T>(items: readonly T[], concurrency: number, fn: (item: T, i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        await fn(items[i], i);
      }
    }),
  );
}

/** Python: reads inotify events from `fd` until stdin ends, as (watch, mask, name); for the watchers below. */
const INOTIFY_EVENTS_PY = `
import ctypes, os, re, select, signal, struct, sys
def events(fd):
    done = False
    while True:
        r, _, _ = select.select([fd] if done else [fd, sys.stdin], [], [], 0 if done else None)
        if not done and sys.stdin in r and not sys.stdin.readline():
            # The caller is done: what the kernel queued before that is still read, then the end.
            done = True
            continue
        if fd not in r:
            if done:
                return
            continue
        buf = os.read(fd, 65536)
        i = 0
        while i < len(buf):
            wd, mask, _, n = struct.unpack_from('iIII', buf, i)
            yield wd, mask, buf[i + 16:i + 16 + n].rstrip(b'\\0').decode('utf8', 'replace')
            i += 16 + n
`;

/** Python through the kernel's inotify: prints every create, delete and move of `name` in the directory argv[1] ('ready' first). */
const WATCH_NAME_PY = `${INOTIFY_EVENTS_PY}
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init()
if libc.inotify_add_watch(fd, sys.argv[1].encode(), 0x40 | 0x80 | 0x100 | 0x200) < 0:
    sys.exit('inotify_add_watch failed: %d' % ctypes.get_errno())
print('ready', flush=True)
kinds = {0x40: 'moved from', 0x80: 'moved to', 0x100: 'created', 0x200: 'deleted'}
for _, mask, name in events(fd):
    if name == sys.argv[2]:
        print(' '.join(v for k, v in kinds.items() if mask & k), flush=True)
`;

/**
 * Watches, with the kernel's inotify, every time `name` in `dir` is created, deleted or moved, from
 * the moment the promise resolves until `stop()`, which gives what happened. (Node's fs.watch tells
 * a directory's new attributes, a heartbeat, as a "rename" too.)
 */
export async function watchName(dir: string, name: string): Promise<{ stop(): Promise<string[]> }> {
  const child = spawn('python3', ['-c', WATCH_NAME_PY, dir, name], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.startsWith('ready\n')) resolve();
    });
    child.once('exit', () => reject(new Error(`the inotify watcher of ${dir} ended: ${err}`)));
  });
  return {
    stop: () =>
      new Promise((resolve) => {
        child.once('exit', () => resolve(out.split('\n').slice(1).filter((l) => l !== '')));
        child.stdin.end();
      }),
  };
}

/**
 * Python through the kernel's inotify: reports every time a process reaches one of the things
 * planted (argv: `file:PATH`, a file itself and its name in its directory; `names:DIR:REGEX`,
 * names in DIR that match): opens, reads, writes, attribute changes, removal, renames. The first
 * line of stdin is a pid to stop (SIGSTOP) at the first such event, 0 for none; each event is
 * printed as `reached WHAT`, and `stopped` follows when the pid was stopped. Ends when stdin ends.
 */
const WATCH_REACH_PY = `${INOTIFY_EVENTS_PY}
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init()
ON_FILE = 0x1 | 0x2 | 0x4 | 0x8 | 0x10 | 0x20 | 0x400 | 0x800
IN_DIR = 0x40 | 0x80 | 0x100 | 0x200
kinds = {0x1: 'read', 0x2: 'written', 0x4: 'attributes changed', 0x8: 'closed', 0x10: 'closed', 0x20: 'opened', 0x40: 'moved away', 0x80: 'replaced', 0x100: 'created', 0x200: 'removed', 0x400: 'removed', 0x800: 'moved'}
files, dirs = {}, {}
def watch(p, mask):
    wd = libc.inotify_add_watch(fd, p.encode(), mask | 0x20000000)
    if wd < 0:
        sys.exit('inotify_add_watch %s failed: %d' % (p, ctypes.get_errno()))
    return wd
for spec in sys.argv[1:]:
    kind, rest = spec.split(':', 1)
    if kind == 'file':
        files[watch(rest, ON_FILE)] = rest
        d, n = os.path.split(rest)
        dirs.setdefault(watch(d, IN_DIR), (d, []))[1].append(re.compile(re.escape(n) + '$'))
    else:
        d, rx = rest.split(':', 1)
        dirs.setdefault(watch(d, IN_DIR), (d, []))[1].append(re.compile(rx))
print('ready', flush=True)
pid = int(sys.stdin.readline() or '0')
stopped = False
for wd, mask, name in events(fd):
    what = ' '.join(sorted(set(v for k, v in kinds.items() if mask & k)))
    if wd in files:
        hit = '%s %s' % (files[wd], what)
    elif wd in dirs and any(x.match(name) for x in dirs[wd][1]):
        hit = '%s %s' % (os.path.join(dirs[wd][0], name), what)
    else:
        continue
    if pid and not stopped:
        try:
            os.kill(pid, signal.SIGSTOP)
            stopped = True
        except ProcessLookupError:
            pass
    print('reached ' + hit, flush=True)
    if stopped:
        print('stopped', flush=True)
        pid = 0
`;

export interface ReachWatch {
  /** Starts watching for `pid` (stopped at the first event), or for no one (0). */
  start(pid: number): void;
  /** Resolves once `pid` was stopped at the first event. */
  stopped: Promise<void>;
  /** Ends the watch: every event seen (`PATH what`). */
  end(): Promise<string[]>;
}

/**
 * Watches, with the kernel's inotify, for a process reaching the things planted (see
 * WATCH_REACH_PY): `files` each watched itself and by its name; `names` as [dir, regex].
 */
export async function watchReach(files: readonly string[], names: readonly [string, string][] = []): Promise<ReachWatch> {
  const args = [...files.map((f) => `file:${f}`), ...names.map(([d, rx]) => `names:${d}:${rx}`)];
  const child = spawn('python3', ['-c', WATCH_REACH_PY, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  let onStopped: () => void = () => undefined;
  const stopped = new Promise<void>((resolve) => (onStopped = resolve));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    if (out.includes('\nstopped\n')) onStopped();
  });
  await new Promise<void>((resolve, reject) => {
    const check = (): void => {
      if (out.startsWith('ready\n')) resolve();
    };
    child.stdout.on('data', check);
    child.once('exit', () => reject(new Error(`the inotify watcher ended: ${err}`)));
  });
  return {
    start: (pid) => child.stdin.write(`${pid}\n`),
    stopped,
    end: () =>
      new Promise((resolve) => {
        child.once('close', () =>
          resolve(
            out
              .split('\n')
              .filter((l) => l.startsWith('reached '))
              .map((l) => l.slice('reached '.length)),
          ),
        );
        child.stdin.end();
      }),
  };
}

/** The state letter of process `pid` in /proc (`T` stopped, `Z` ended but not reaped), or undefined once it is gone. */
export function processState(pid: number): string | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
  } catch {
    return undefined;
  }
}

/** What test/workers/pauser.ts printed on its last line. */
export interface PauserResult {
  ok: boolean;
  code?: string;
  fence?: number;
  clash?: boolean;
  message?: string;
}

/** One operation of the protocol in a process of its own (test/workers/pauser.ts), with `env` added (a step to stop at). */
export function runPauser(args: Record<string, unknown>, env: NodeJS.ProcessEnv): ChildProcess {
  return track(spawn(process.execPath, [path.join(WORKERS, 'pauser.js'), JSON.stringify(args)], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } }));
}

/** What a pauser printed, once it has ended. */
export function pauserResult(child: ChildProcess): Promise<PauserResult> {
  return new Promise((resolve) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.once('close', () => {
      try {
        resolve(JSON.parse(out.trim().split('\n').pop() ?? '{}') as PauserResult);
      } catch {
        resolve({ ok: false, code: 'NO-OUTPUT', message: out });
      }
    });
  });
}
