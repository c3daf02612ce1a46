/**
 * Benchmarks of the lock core against bare baselines measured in the same process and run.
 * Prints figures; never asserts timings. See bench/README.md.
 *
 *   node out/bench/index.js [--no-race] [--no-stage] [--no-sources] [--no-verify] [--no-history] [--no-handoff] [--no-cli] [--no-manifest] [--no-du] [--quick]
 */
import { spawn, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { performance } from 'perf_hooks';
import * as lockfile from 'proper-lockfile';
import { openDir } from '../src/core/fs/anchored';
import { lookAtCounter, proposeToken, settleToken } from '../src/core/lock/fence';
import { HistorySegment, flushHistory, recordHistory } from '../src/core/log/history';
import { makeHolder } from '../src/core/base/holder';
import { clearLitter } from '../src/core/lock/litter';
import { acquire } from '../src/core/lock/lock';
import { closeLockFd, makeLockFs, rememberPrecision, type LockFsState } from '../src/core/lock/lockfs';
import { META_DIR, QUEUE_DIR } from '../src/core/base/protocol';
import { resolveArea } from '../src/core/fs/tags';
import { formatTable, interleave, median, p95, ratioOf, type Candidate, type Row } from './stats';
import { benchHandoff } from './handoff';
import { benchList } from './list';
import { benchManifest } from './manifest';
import { benchStage } from './stage';
import { benchSources } from './sources';
import { benchDu } from './du';
import { benchVerify } from './verify';
import { benchPolling } from './watch';
import { benchHistory } from './history';
import { benchCliStartup } from './cli';
import { benchCycleFloors } from './cycleFloors';

const argv = new Set(process.argv.slice(2));
const QUICK = argv.has('--quick');
const RACE = !argv.has('--no-race');
const STAGE = !argv.has('--no-stage');
const SOURCES = !argv.has('--no-sources');
const DU = !argv.has('--no-du');
const VERIFY = !argv.has('--no-verify');
const HISTORY = !argv.has('--no-history');
const HANDOFF = !argv.has('--no-handoff');
const CLI_STARTUP = !argv.has('--no-cli');
const MANIFEST = !argv.has('--no-manifest');

const us = (ms: number): string => `${(ms * 1000).toFixed(0)} µs`;

function line(s = ''): void {
  process.stdout.write(`${s}\n`);
}

// ---------------------------------------------------------------------------------------------
// a) one uncontended acquire+release cycle

/** A name for the filesystem under `dir`: the cycle's cost is mostly its metadata operations. */
function fsLabel(dir: string): string {
  const names: Record<number, string> = { 0xef53: 'ext4', 0x01021994: 'tmpfs', 0x58465342: 'xfs', 0x9123683e: 'btrfs', 0x794c7630: 'overlayfs' };
  const type = fs.statfsSync(dir).type;
  return `${names[type] ?? `fs 0x${type.toString(16)}`} ${dir}`;
}

/**
 * The system calls of one cycle of ours (bench/README.md, part a), in order, with nothing between
 * them: what the kernel charges for the protocol before any JavaScript runs. `dir` is an area with
 * a counter in it; `segment` a history segment kept open, as a lease keeps its tag's.
 */
function callsOfACycle(dir: string, segment: number): void {
  const C = fs.constants;
  const top = path.dirname(dir);
  const area = fs.openSync(dir, C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW);
  const at = (name: string): string => `/proc/self/fd/${area}/${name}`;
  fs.fstatSync(area);
  fs.lstatSync(path.join(top, 'no-line-here'), { throwIfNoEntry: false });
  const counter = Number(fs.readlinkSync(at('counter')));
  process.getuid?.();
  fs.mkdirSync(at('new'));
  const lock = fs.openSync(at('new'), C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW);
  const record = fs.openSync(`/proc/self/fd/${lock}/owner.json`, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o644);
  fs.writeSync(record, '{"pid":1}\n'.repeat(30));
  fs.closeSync(record);
  fs.symlinkSync(String(counter + 1), `/proc/self/fd/${lock}/fence.next`);
  fs.renameSync(at('new'), at('lock'));
  fs.readlinkSync(at('counter'));
  fs.renameSync(at('lock/fence.next'), at('counter'));
  fs.fstatSync(lock);
  fs.readdirSync(at('.'), { withFileTypes: true });
  fs.fstatSync(segment);
  fs.readlinkSync(`/proc/self/fd/${segment}`);
  fs.writeSync(segment, 'x'.repeat(160));
  fs.lstatSync(at('lock'));
  fs.renameSync(at('lock'), at('trash'));
  fs.lstatSync(at('trash'));
  fs.unlinkSync(`/proc/self/fd/${lock}/owner.json`);
  fs.rmdirSync(at('trash'));
  fs.closeSync(lock);
  fs.fstatSync(segment);
  fs.writeSync(segment, 'x'.repeat(160));
  fs.closeSync(area);
}

async function benchCycle(root: string, rows: Row[]): Promise<void> {
  const where = fsLabel(root);
  line(`a) uncontended acquire+release of one tag, per cycle, on ${where}`);
  const staticDir = path.join(root, 'cycle', 'static');
  for (const d of ['ours', 'bare', 'mkdir']) fs.mkdirSync(path.join(staticDir, d), { recursive: true });
  const bareTarget = path.join(staticDir, 'bare', 'devserver');
  const bareLock = path.join(staticDir, 'bare', 'devserver.lock');
  const mkdirLock = path.join(staticDir, 'mkdir', 'devserver.lock');

  const candidates: Candidate[] = [
    {
      name: 'ours',
      run: async () => {
        const lease = await acquire(staticDir, 'ours', { createOnce: false });
        await lease.release();
      },
    },
    {
      name: 'proper-lockfile',
      run: async () => {
        const release = await lockfile.lock(bareTarget, { realpath: false, lockfilePath: bareLock });
        await release();
      },
    },
    {
      name: 'mkdir+rmdir',
      run: async () => {
        await fs.promises.mkdir(mkdirLock);
        await fs.promises.rmdir(mkdirLock);
      },
    },
  ];
  const s = await interleave(candidates, { warmup: 300, perRound: 25, rounds: QUICK ? 40 : 200, budgetMs: QUICK ? 4_000 : 15_000 });
  const ours = s.get('ours')!;
  const bare = s.get('proper-lockfile')!;
  const mk = s.get('mkdir+rmdir')!;
  for (const [name, v] of s) line(`   ${name.padEnd(16)} median ${us(median(v)).padStart(8)}   p95 ${us(p95(v)).padStart(8)}   (${v.length} cycles)`);
  const vsBare: Row = { name: `acquire+release, ${where.split(' ')[0]}`, unit: 'µs', median: median(ours), p95: p95(ours), baseline: 'proper-lockfile', baselineMedian: median(bare), aim: '≤ 1.00×' };
  vsBare.met = ratioOf(vsBare)! <= 1;
  rows.push(vsBare);
  rows.push({ name: `acquire+release, ${where.split(' ')[0]}`, unit: 'µs', median: median(ours), p95: p95(ours), baseline: 'mkdir+rmdir', baselineMedian: median(mk) });
  line(`   ours/proper-lockfile ${(median(ours) / median(bare)).toFixed(2)}×   ours/mkdir+rmdir ${(median(ours) / median(mk)).toFixed(2)}×`);
  line();

  // Where the cycle's time goes: the steps acquire() and release() take, timed one by one, each
  // with what it is for (see bench/README.md, part a).
  line('   breakdown of one cycle (medians; the steps run in sequence in acquire/release):');
  const { realStaticDir, io } = await resolveArea(staticDir, 'ours');
  const dev = fs.statSync(path.join(staticDir, 'ours')).dev;
  const timing = { staleMs: 10_000, refreshMs: 2_500 };
  const holderJson = (fence: number): string => `${JSON.stringify(makeHolder({ ...timing, acquiredAtMs: Date.now(), fence }), null, 2)}\n`;
  const opened = await openDir(path.join(realStaticDir, 'ours'), false, io.sync);
  fs.mkdirSync(path.join(realStaticDir, 'calls'));
  fs.symlinkSync('0', path.join(realStaticDir, 'calls', 'counter'));
  const segmentFd = fs.openSync(path.join(realStaticDir, 'calls', 'segment'), fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT, 0o644);
  const steps: Candidate[] = [
    {
      name: 'open the area',
      run: async () => (await openDir(path.join(realStaticDir, 'ours'), false, io.sync)).close(),
    },
    { name: 'the line (one lstat)', run: () => io.lstatOrNull(path.join(realStaticDir, META_DIR, QUEUE_DIR)) },
    { name: 'read the counter', run: () => lookAtCounter(io, opened, staticDir) },
    { name: 'owner record (JSON)', run: async () => holderJson(1) },
    {
      name: 'lock, token, release',
      run: async () => {
        const ctx = { io, area: opened, shownArea: staticDir, floor: 0 };
        const fence = await proposeToken(ctx);
        const lockPath = path.join(staticDir, 'ours', 'devserver.lock');
        const state: LockFsState = { io, area: opened, lockPath, ownerJson: holderJson(fence), workName: 'work.bench', mode: 0o755, skewMs: 0, created: false, dev };
        const lockFs = makeLockFs(state);
        const release = await lockfile.lock(path.join(staticDir, 'ours', 'devserver'), {
          lockfilePath: lockPath,
          realpath: false,
          stale: timing.staleMs,
          update: timing.refreshMs,
          retries: 0,
          fs: lockFs,
        });
        rememberPrecision(lockFs, state);
        await settleToken(ctx, 'devserver.lock/work.bench', fence);
        state.settled = true;
        await release();
        closeLockFd(state);
      },
    },
    { name: 'litter (area listing)', run: () => clearLitter(io, opened, timing) },
    {
      name: 'history (two records)',
      run: async () => {
        const segment = new HistorySegment();
        const holder = { user: 'bench', hostname: 'bench', pid: process.pid, clientId: 'bench' };
        await recordHistory(staticDir, { tag: 'ours', kind: 'acquired', holder, fence: 1, waitedMs: 0 }, undefined, segment);
        await recordHistory(staticDir, { tag: 'ours', kind: 'released', holder, fence: 1, heldMs: 0 }, undefined, segment);
        segment.end();
      },
    },
    { name: 'the 32 calls alone', run: async () => callsOfACycle(path.join(realStaticDir, 'calls'), segmentFd) },
    {
      name: 'proper-lockfile',
      run: async () => {
        const release = await lockfile.lock(bareTarget, { realpath: false, lockfilePath: bareLock });
        await release();
      },
    },
  ];
  const b = await interleave(steps, { warmup: 100, perRound: 20, rounds: QUICK ? 10 : 40, budgetMs: QUICK ? 2_000 : 8_000 });
  opened.close();
  fs.closeSync(segmentFd);
  await flushHistory();
  for (const [name, v] of b) line(`   - ${name.padEnd(22)} ${us(median(v)).padStart(8)}`);
  line('     (the steps add up to about a cycle of ours, less its JavaScript between them; "the 32 calls alone"');
  line('     makes the system calls of a cycle in a row with nothing else: the floor for this protocol on this filesystem)');

  // What the kernel asks for the directory changes of a cycle on this filesystem, called directly.
  line("   the filesystem's price of the changes a cycle makes (synchronous calls, medians):");
  const k = path.join(staticDir, 'kernel');
  fs.mkdirSync(k);
  fs.writeFileSync(path.join(k, 'counter-file'), '1\n');
  fs.symlinkSync('1', path.join(k, 'counter-link'));
  const C = fs.constants;
  let n = 0;
  const kernel: Candidate[] = [
    {
      name: 'mkdir + rmdir',
      run: async () => {
        fs.mkdirSync(path.join(k, 'lock'));
        fs.rmdirSync(path.join(k, 'lock'));
      },
    },
    {
      name: 'record: create + unlink',
      run: async () => {
        const fd = fs.openSync(path.join(k, 'owner.json'), C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o644);
        fs.writeSync(fd, '{"pid":1}\n'.repeat(30));
        fs.closeSync(fd);
        fs.unlinkSync(path.join(k, 'owner.json'));
      },
    },
    {
      name: 'counter: link + rename',
      run: async () => {
        fs.symlinkSync(String(++n), path.join(k, 'next-link'));
        fs.renameSync(path.join(k, 'next-link'), path.join(k, 'counter-link'));
      },
    },
    {
      name: 'counter: file + rename',
      run: async () => {
        fs.writeFileSync(path.join(k, 'next-file'), `${++n}\n`, { flag: 'wx' });
        fs.renameSync(path.join(k, 'next-file'), path.join(k, 'counter-file'));
      },
    },
    {
      name: 'mkdir, rename, rmdir',
      run: async () => {
        fs.mkdirSync(path.join(k, 'd'));
        fs.renameSync(path.join(k, 'd'), path.join(k, 'e'));
        fs.rmdirSync(path.join(k, 'e'));
      },
    },
  ];
  const kr = await interleave(kernel, { warmup: 50, perRound: 20, rounds: QUICK ? 10 : 30, budgetMs: QUICK ? 1_500 : 4_000 });
  for (const [name, v] of kr) line(`   - ${name.padEnd(22)} ${us(median(v)).padStart(8)}`);
  line('     (a rename of a directory is the last line less the first)');
  line();
}

// ---------------------------------------------------------------------------------------------
// c) N processes race for one stale lock

const CONTENDERS = 12;
const TRIALS = QUICK ? 20 : 100;
const RACE_BUDGET_MS = 30_000;

interface WorkerMsg {
  type: string;
  ok?: boolean;
  code?: string;
}

function collect(workers: readonly ChildProcess[], type: string, timeoutMs = 15_000): Promise<WorkerMsg[]> {
  return Promise.all(
    workers.map(
      (w) =>
        new Promise<WorkerMsg>((resolve, reject) => {
          const timer = setTimeout(() => {
            w.off('message', on);
            reject(new Error(`race worker ${w.pid} sent no '${type}' within ${timeoutMs} ms`));
          }, timeoutMs);
          const on = (m: WorkerMsg): void => {
            if (m.type !== type) return;
            clearTimeout(timer);
            w.off('message', on);
            resolve(m);
          };
          w.on('message', on);
        }),
    ),
  );
}

async function benchRace(root: string, rows: Row[]): Promise<void> {
  line(`c) ${CONTENDERS} processes race for one stale lock (mtime 1 h old, stale after 2 s), up to ${TRIALS} trials each, alternating`);
  if (!RACE) {
    line('   skipped (--no-race)');
    line();
    return;
  }
  const staticDir = path.join(root, 'race', 'static');
  fs.mkdirSync(staticDir, { recursive: true });
  const workerJs = path.join(__dirname, 'race-worker.js');
  const workers = Array.from({ length: CONTENDERS }, () => spawn(process.execPath, [workerJs], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }));
  const tally = {
    bare: { trials: 0, multi: 0, none: 0, maxOwners: 0 },
    core: { trials: 0, multi: 0, none: 0, maxOwners: 0 },
  };
  const start = performance.now();
  try {
    await collect(workers, 'ready', 30_000);
    const hourAgo = new Date(Date.now() - 3_600_000);
    for (let i = 0; i < 2 * TRIALS && performance.now() - start < RACE_BUDGET_MS; i++) {
      const mode = i % 2 === 0 ? 'bare' : 'core';
      const tag = `t${i}`;
      const lock = path.join(staticDir, tag, 'devserver.lock');
      fs.mkdirSync(lock, { recursive: true });
      fs.utimesSync(lock, hourAgo, hourAgo);
      const results = collect(workers, 'result');
      // Everyone starts at the same wall-clock instant, a little ahead so the message reaches all.
      const at = Date.now() + 25;
      for (const w of workers) w.send({ type: 'go', mode, staticDir, tag, at });
      const owners = (await results).filter((r) => r.ok === true).length;
      const dropped = collect(workers, 'dropped');
      for (const w of workers) w.send({ type: 'drop' });
      await dropped;
      fs.rmSync(path.join(staticDir, tag), { recursive: true, force: true });
      const t = tally[mode];
      t.trials++;
      if (owners > 1) t.multi++;
      if (owners === 0) t.none++;
      t.maxOwners = Math.max(t.maxOwners, owners);
    }
  } finally {
    for (const w of workers) if (w.connected) w.disconnect();
  }
  const elapsed = performance.now() - start;
  for (const [name, t] of Object.entries(tally)) {
    line(`   ${(name === 'bare' ? 'proper-lockfile' : 'ours').padEnd(16)} ${t.multi}/${t.trials} trials with more than one owner (at most ${t.maxOwners} at once); ${t.none} with none`);
  }
  if (tally.bare.trials < TRIALS) line(`   (stopped after ${(elapsed / 1000).toFixed(0)} s: fewer trials than asked)`);
  line(`   ${(elapsed / 1000).toFixed(1)} s`);
  rows.push({
    name: `stale race ×${CONTENDERS}: trials >1 owner`,
    unit: 'ms',
    median: NaN,
    p95: NaN,
    medianText: `${tally.core.multi}/${tally.core.trials}`,
    p95Text: '-',
    baselineText: `proper-lockfile: ${tally.bare.multi}/${tally.bare.trials}`,
    ratioText: '-',
    aim: 'ours 0',
    met: tally.core.multi === 0,
  });
  line();
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const load = os.loadavg().map((l) => l.toFixed(2)).join(' ');
  line(`Devserver Staging bench: node ${process.version}, ${os.cpus().length} CPUs, load ${load}, tmp ${os.tmpdir()}${QUICK ? ', --quick' : ''}`);
  line('Figures are medians (p95 where shown) of rounds that alternate candidate and baseline; nothing is asserted.');
  line();
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dss-bench-'));
  const rows: Row[] = [];
  const t0 = performance.now();
  try {
    await benchCycle(root, rows);
    await benchCycleFloors(root, rows, QUICK, line, fsLabel(root).split(' ')[0]);
    // The same on memory-backed tmpfs where there is one: it shows the core's own cost, with the
    // disk's metadata operations (a third of the cycle on ext4) taken out.
    if (fs.existsSync('/dev/shm') && fs.statSync('/dev/shm').dev !== fs.statSync(root).dev) {
      const shm = fs.mkdtempSync('/dev/shm/dss-bench-');
      try {
        await benchCycle(shm, rows);
      } finally {
        fs.rmSync(shm, { recursive: true, force: true });
      }
    }
    await benchList(root, rows, QUICK, line);
    if (CLI_STARTUP) await benchCliStartup(root, rows, QUICK, line, path.resolve(__dirname, '..', '..', 'dist', 'cli.js'));
    await benchRace(root, rows);
    if (STAGE) await benchStage(root, rows, QUICK, line);
    if (SOURCES) await benchSources(root, rows, QUICK, line, path.resolve(__dirname, '..', '..', 'dist', 'cli.js'));
    if (DU) await benchDu(root, rows, QUICK, line, path.resolve(__dirname, '..', '..', 'dist', 'cli.js'));
    if (VERIFY) await benchVerify(root, rows, QUICK, line);
    if (MANIFEST) await benchManifest(root, rows, QUICK, line);
    if (HANDOFF) await benchHandoff(root, rows, QUICK, line, path.resolve(__dirname, '..', '..', 'dist', 'cli.js'));
    await benchPolling(root, rows, QUICK, line);
    if (HISTORY) await benchHistory(root, rows, QUICK, line);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
  line(formatTable(rows));
  line();
  line(`total ${((performance.now() - t0) / 1000).toFixed(0)} s`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
