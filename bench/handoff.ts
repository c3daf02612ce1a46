/**
 * h) Handoff: from the holder's release to the next holder's start, while that one waits.
 *
 * - in process: a waiter process blocked in `acquire(…, { waitMs })`, timed until `acquire`
 *   resolved there;
 * - command line: `devserver-stage lock --wait 60 TAG -- date +%s%N`, timed until the command
 *   started (its own clock reading);
 * - baseline `flock(1)`: `flock --wait 60 FILE date +%s%N`, the same way, against a holder that
 *   holds the file with flock(2) and reads the clock right before it unlocks.
 *
 * Every time is the wall clock (CLOCK_REALTIME), read in each process. A round starts the waiter,
 * waits until it is waiting (its ticket is in the queue, or a bounded moment for flock and for
 * versions without a queue), holds on 100–300 ms more, then releases.
 */
import { spawn, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { performance } from 'perf_hooks';
import { acquire } from '../src/core/lock/lock';
import { median, p95, type Row } from './stats';

const wallMs = (): number => performance.timeOrigin + performance.now();
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const PYTHON = ['/usr/bin/python3', 'python3'].find((p) => !p.startsWith('/') || fs.existsSync(p))!;
/** Holds FILE with flock(2) until a line on stdin; prints the wall clock in ns right before it unlocks. */
const FLOCK_HOLDER = [
  'import fcntl, os, sys, time',
  'fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)',
  'fcntl.flock(fd, fcntl.LOCK_EX)',
  'print("locked", flush=True)',
  'sys.stdin.readline()',
  't = time.time_ns()',
  'fcntl.flock(fd, fcntl.LOCK_UN)',
  'print(t, flush=True)',
].join('\n');

function message(child: ChildProcess, type: string, timeoutMs = 30_000): Promise<{ type: string; atMs?: number; message?: string }> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no '${type}' from pid ${child.pid} within ${timeoutMs} ms`)), timeoutMs);
    const on = (m: { type: string; message?: string }): void => {
      if (m.type !== type && m.type !== 'error') return;
      clearTimeout(timer);
      child.off('message', on);
      if (m.type === 'error') reject(new Error(m.message));
      else resolve(m);
    };
    child.on('message', on);
  });
}

/** The first line the process writes on stdout. */
function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf('\n');
      if (nl >= 0) resolve(out.slice(0, nl));
    });
    child.once('close', (code) => (out.includes('\n') ? undefined : reject(new Error(`exited ${code} without a line`))));
  });
}

/** Until a ticket is in the static directory's queues (this version), or `maxMs` (flock, versions without a queue). */
async function untilWaiting(staticDir: string, maxMs: number): Promise<void> {
  const queues = path.join(staticDir, '.devserver-staging', 'queue');
  const deadline = Date.now() + maxMs;
  while (Date.now() < deadline) {
    const tickets = fs.existsSync(queues) ? fs.readdirSync(queues).flatMap((k) => fs.readdirSync(path.join(queues, k))) : [];
    if (tickets.length > 0) return;
    await sleep(5);
  }
}

const holdOn = (): Promise<void> => sleep(100 + Math.random() * 200);

export async function benchHandoff(root: string, rows: Row[], quick: boolean, line: (s?: string) => void, cli: string): Promise<void> {
  const ROUNDS = quick ? 5 : 20;
  line(`h) handoff: release → the next holder's start, while it waits (${ROUNDS} rounds each, alternating)`);
  const staticDir = path.join(root, 'handoff', 'static');
  fs.mkdirSync(path.join(staticDir, 'area'), { recursive: true });
  const flockFile = path.join(root, 'handoff', 'flock.lock');
  const worker = spawn(process.execPath, [path.join(__dirname, 'handoff-worker.js')], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const samples = { inProcess: [] as number[], cli: [] as number[], flock: [] as number[] };
  try {
    await message(worker, 'ready');
    const inProcess = async (): Promise<number> => {
      const lease = await acquire(staticDir, 'area', { createOnce: false });
      const acquired = message(worker, 'acquired');
      worker.send({ type: 'wait', staticDir, tag: 'area' });
      await message(worker, 'started');
      await untilWaiting(staticDir, 300);
      await holdOn();
      const t0 = wallMs();
      await lease.release();
      const { atMs } = await acquired;
      await message(worker, 'released');
      return atMs! - t0;
    };
    const viaCli = async (): Promise<number> => {
      const lease = await acquire(staticDir, 'area', { createOnce: false });
      const child = spawn(process.execPath, [cli, 'lock', '--wait', '60', 'area', '--', 'date', '+%s%N'], {
        env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const started = firstLine(child);
      const exited = new Promise((r) => child.once('exit', r));
      await untilWaiting(staticDir, 1_500);
      await holdOn();
      const t0 = wallMs();
      await lease.release();
      const ns = await started;
      await exited;
      return Number(BigInt(ns) / 1000n) / 1000 - t0;
    };
    const viaFlock = async (): Promise<number> => {
      const holder = spawn(PYTHON, ['-c', FLOCK_HOLDER, flockFile], { stdio: ['pipe', 'pipe', 'inherit'] });
      const holderExited = new Promise((r) => holder.once('exit', r));
      let text = '';
      holder.stdout.on('data', (d: Buffer) => (text += d.toString()));
      const lines = (): string[] => text.split('\n').slice(0, -1);
      while (!lines().includes('locked')) await sleep(2);
      const child = spawn('flock', ['--wait', '60', flockFile, 'date', '+%s%N'], { stdio: ['ignore', 'pipe', 'inherit'] });
      const started = firstLine(child);
      // flock(1) starts and blocks within a few milliseconds; give it the same head start as the others.
      await sleep(300);
      await holdOn();
      holder.stdin.end('\n');
      const ns = await started;
      await holderExited;
      const t0 = Number(lines().find((l) => /^\d+$/.test(l))) / 1e6;
      return Number(BigInt(ns) / 1000n) / 1000 - t0;
    };
    for (let round = 0; round < ROUNDS; round++) {
      const order = [
        ['inProcess', inProcess],
        ['cli', viaCli],
        ['flock', viaFlock],
      ] as const;
      for (let k = 0; k < order.length; k++) {
        const [name, run] = order[(round + k) % order.length];
        samples[name].push(await run());
      }
    }
  } finally {
    worker.disconnect();
  }
  const f = (v: number[]): string => `median ${median(v).toFixed(1).padStart(6)} ms   p95 ${p95(v).toFixed(1).padStart(6)} ms   max ${Math.max(...v).toFixed(1)} ms`;
  line(`   in process       ${f(samples.inProcess)}`);
  line(`   lock --wait      ${f(samples.cli)}   (until its command started)`);
  line(`   flock --wait     ${f(samples.flock)}   (the same)`);
  const inRow: Row = { name: 'handoff, in process', unit: 'ms', median: median(samples.inProcess), p95: p95(samples.inProcess), aim: 'median < 50 ms' };
  inRow.met = inRow.median < 50;
  const cliRow: Row = {
    name: 'handoff, lock --wait -- cmd',
    unit: 'ms',
    median: median(samples.cli),
    p95: p95(samples.cli),
    baseline: 'flock --wait',
    baselineMedian: median(samples.flock),
    aim: 'median < 150 ms',
  };
  cliRow.met = cliRow.median < 150;
  rows.push(inRow, cliRow);
  line();
}
