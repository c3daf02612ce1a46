/**
 * Shared test helpers: real temporary static directories, real child processes.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { strict as assert } from 'assert';
import Mocha = require('mocha');
import { StagingError } from '../src/core/base/errors';
import { isPidAlive } from '../src/core/base/holder';
import { FENCE_FILE, META_DIR, OWNER_FILE } from '../src/core/base/protocol';

export const ROOT = path.resolve(__dirname, '..', '..');

/** A flag, a command of the command-line tool, or one of its environment variables: what only a terminal user can act on (a theme colour, `--vscode-*`, is none). */
export const CLI_HINT = /(?:^|[\s(`'"])--(?!vscode-)[a-z][\w-]*|\bdevserver-stage (?:[a-z][\w-]*|--)|\bDEVSERVER_[A-Z_]+\b/;
/** The built command-line tool, as users run it. */
export const CLI = path.join(ROOT, 'dist', 'cli.js');
/** The tool under test where a suite takes another bundle: the package's build, or the one DSS_CLI names (an older release, to see a test fail there). */
export const TOOL = process.env.DSS_CLI !== undefined && process.env.DSS_CLI !== '' ? path.resolve(process.env.DSS_CLI) : CLI;
/** Compiled worker scripts (test/workers/*.ts). */
export const WORKERS = path.join(__dirname, 'workers');

/** A fresh directory under the OS temp dir; removed by `cleanup`. */
export function tempDir(prefix = 'dss-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export function cleanup(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to completion and collects its output. */
export function run(command: string, args: readonly string[], options: SpawnOptions & { input?: string } = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', reject);
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
    // A child that exits without reading its input makes this write fail with EPIPE: not our concern.
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.input ?? '');
  });
}

/** Runs the built CLI with a static directory in the environment. */
export function cli(staticDir: string, args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<RunResult> {
  return run(process.execPath, [CLI, ...args], { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir, ...env } });
}

/** Starts a compiled worker script with an IPC channel. */
export function startWorker(name: string, args: readonly string[] = [], options: SpawnOptions = {}): ChildProcess {
  return spawn(process.execPath, [path.join(WORKERS, `${name}.js`), ...args], { stdio: ['ignore', 'pipe', 'pipe', 'ipc'], ...options });
}

/** An IPC message from a worker. */
export interface Msg {
  type: string;
  [key: string]: unknown;
}

const children = new Set<ChildProcess>();
const stderrs = new Map<ChildProcess, string>();

/** Registers a child so `killAll` kills it after the test and its stderr can be shown on failure. */
export function track(child: ChildProcess): ChildProcess {
  children.add(child);
  stderrs.set(child, '');
  child.stderr?.on('data', (d: Buffer) => stderrs.set(child, (stderrs.get(child) ?? '') + d.toString()));
  child.stdout?.resume();
  return child;
}

/** All a tracked child has written to stderr so far. */
export function stderrOf(child: ChildProcess): string {
  return stderrs.get(child) ?? '';
}

export function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

export function exitOf(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (exited(child)) return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

/** Kills every tracked child still running, waits for them to exit, and forgets them all. */
export async function killAll(): Promise<void> {
  const alive = [...children].filter((c) => !exited(c));
  for (const c of alive) c.kill('SIGKILL');
  await Promise.all(alive.map(exitOf));
  children.clear();
  stderrs.clear();
}

/** The first message from `child` matching `pred`; rejects if the child exits first or on timeout. */
export function expectMessage<T extends Msg = Msg>(child: ChildProcess, pred: (m: T) => boolean, timeoutMs: number, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const done = (): void => {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
    };
    const onMessage = (m: unknown): void => {
      if (typeof m === 'object' && m !== null && pred(m as T)) {
        done();
        resolve(m as T);
      }
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null): void => {
      done();
      reject(new Error(`pid ${child.pid} exited (code ${code}, signal ${signal}) before ${what}; stderr:\n${stderrOf(child)}`));
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`no ${what} from pid ${child.pid} within ${timeoutMs} ms; stderr:\n${stderrOf(child)}`));
    }, timeoutMs);
    child.on('message', onMessage);
    child.on('exit', onExit);
    if (exited(child)) onExit(child.exitCode, child.signalCode);
  });
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** `count` builds `<folder>/R0`…, each marked staged (a timestamp and nothing else). */
export function stagedBuilds(folder: string, count: number): void {
  for (let i = 0; i < count; i++) {
    fs.mkdirSync(path.join(folder, `R${i}`), { recursive: true });
    fs.writeFileSync(path.join(folder, `R${i}`, 'staged.timestamp'), '');
  }
}

/** A pid that was just used and is not running any more. */
export async function deadPid(): Promise<number> {
  for (;;) {
    const child = spawn('true');
    const pid = child.pid!;
    await new Promise((r) => child.once('exit', r));
    await sleep(10);
    if (!isPidAlive(pid)) return pid;
  }
}

/** Polls `check` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function waitFor<T>(check: () => T | undefined | Promise<T | undefined>, timeoutMs: number, what: string, intervalMs = 20): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/** Every path below `dir` with its type, size and mtime: to prove nothing changed. */
/** Every entry below `dir` with mode, size and mtime; the area's fencing counter (lock bookkeeping) left out. */
export function snapshot(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string): void => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      if (e.name === FENCE_FILE) continue;
      const p = path.join(d, e.name);
      const st = fs.lstatSync(p);
      out.set(p, `${st.mode}:${st.isDirectory() ? '' : st.size}:${st.isDirectory() ? '' : st.mtimeMs}`);
      if (e.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out;
}

/** `snapshot` of a static directory as lines, without its bookkeeping directory (clock probes, trash and audit log come and go). */
export function staticContents(staticDir: string): string[] {
  return [...snapshot(staticDir)].filter(([p]) => !path.relative(staticDir, p).startsWith(META_DIR)).map(([p, v]) => `${p} ${v}`);
}

/** sha256, mode and mtime of every file below `dir`, and the set of names: what must not change. */
export function fingerprint(dir: string): string {
  const lines: string[] = [];
  for (const [p, meta] of snapshot(dir)) {
    const st = fs.lstatSync(p);
    const hash = st.isFile() ? crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex') : '';
    lines.push(`${p} ${meta} ${hash}`);
  }
  return lines.sort().join('\n');
}

/** mulberry32: small, fast, and the same sequence on every platform for a given seed (numbers in [0, 1)). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

/** Awaits `p`, which must reject with a StagingError of `code` whose message names `part`. */
export async function rejectsWith(p: Promise<unknown>, code: string, part?: string | RegExp): Promise<StagingError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof StagingError, `expected a StagingError, got ${String(err)}`);
    assert.equal(err.code, code, err.message);
    if (typeof part === 'string') assert.ok(err.message.includes(part), `message should name ${part}: ${err.message}`);
    else if (part !== undefined) assert.match(err.message, part);
    return err;
  }
  assert.fail(`expected ${code}`);
}

/** The owner token of the lock directory `lockPath`, as on disk now. */
export function readToken(lockPath: string): string | undefined {
  try {
    return (JSON.parse(fs.readFileSync(path.join(lockPath, OWNER_FILE), 'utf8')) as { token?: string }).token;
  } catch {
    return undefined;
  }
}

/** A line of figures under the current test in mocha's output. */
export function report(line: string): void {
  // Through mocha's console hook, which the integration runner relays out of VS Code.
  Mocha.reporters.Base.consoleLog(`      ${line}`);
}

/**
 * Whether process `pid` has a handler for `signal`, as the kernel says (SigCgt in /proc). Node
 * installs none for SIGHUP by default, so a handler for it shows that a tool has reached the point
 * where it listens (the CLI while it waits for a lock), without guessing a delay.
 */
export function catchesSignal(pid: number, signal: NodeJS.Signals): boolean {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const caught = /^SigCgt:\s*([0-9a-f]+)$/m.exec(status);
  const n = os.constants.signals[signal];
  return caught !== null && ((BigInt(`0x${caught[1]}`) >> BigInt(n - 1)) & 1n) === 1n;
}

/**
 * Runs `run` with function `name` of `target` (a module itself, not an import's namespace, which
 * only reads through to it) counting the calls `counted` picks, and says how many of them at most
 * came in one turn of the event loop: work done all in one piece makes them all come in one.
 */
export async function callsPerTurn<T>(
  target: object,
  name: string,
  counted: (...args: unknown[]) => boolean,
  run: () => Promise<T>,
): Promise<{ result: T; most: number; total: number }> {
  const fns = target as Record<string, (...args: unknown[]) => unknown>;
  const real = fns[name];
  let inTurn = 0;
  let most = 0;
  let total = 0;
  let ticking = true;
  const tick = (): void => {
    inTurn = 0;
    if (ticking) setImmediate(tick);
  };
  fns[name] = (...args: unknown[]) => {
    if (counted(...args)) {
      total++;
      most = Math.max(most, ++inTurn);
    }
    return real(...args);
  };
  try {
    setImmediate(tick);
    return { result: await run(), most, total };
  } finally {
    ticking = false;
    fns[name] = real;
  }
}

/** A script for `node -e` (`watch --exec`) that appends its DSS_* environment as one JSON line to $OUT_FILE. */
export const ENV_RECORDER = `const fs=require('fs');const e={};for(const k of Object.keys(process.env))if(k.startsWith('DSS_'))e[k]=process.env[k];fs.appendFileSync(process.env.OUT_FILE,JSON.stringify(e)+'\\n')`;

/** The environments `ENV_RECORDER` appended to `file`, in order. */
export function recordedEnvs(file: string): Record<string, string>[] {
  if (!fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, string>);
}
