/**
 * Shared test helpers: real temporary static directories, real child processes.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

export const ROOT = path.resolve(__dirname, '..', '..');
/** The built command-line tool, as users run it. */
export const CLI = path.join(ROOT, 'dist', 'cli.js');
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
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', reject);
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
    child.stdin!.end(options.input ?? '');
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

/** Resolves with the first IPC message from `child` that satisfies `pred`. */
export function nextMessage<T = unknown>(child: ChildProcess, pred: (m: T) => boolean = () => true, timeoutMs = 30_000): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.off('message', onMessage);
      reject(new Error(`no matching message from pid ${child.pid} within ${timeoutMs} ms`));
    }, timeoutMs);
    const onMessage = (m: unknown): void => {
      if (pred(m as T)) {
        clearTimeout(timer);
        child.off('message', onMessage);
        resolve(m as T);
      }
    };
    child.on('message', onMessage);
  });
}

/** Polls `check` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function waitFor<T>(check: () => T | undefined | Promise<T | undefined>, timeoutMs: number, what: string, intervalMs = 20): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Every path below `dir` with its type, size and mtime: to prove nothing changed. */
export function snapshot(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string): void => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      const st = fs.lstatSync(p);
      out.set(p, `${st.mode}:${st.isDirectory() ? '' : st.size}:${st.isDirectory() ? '' : st.mtimeMs}`);
      if (e.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out;
}

export const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
