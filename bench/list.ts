/**
 * b) `list(staticDir)` of 10,000 and of 100,000 areas against a bare readdir and stat of every
 * entry, and the longest the event loop was held while each ran: a listing is made in a process
 * that has other work (an editor's extension host), so how long it holds the loop at once matters
 * as much as how long it takes.
 *
 *   node out/bench/list.js [--quick]     this part alone
 */
import * as fs from 'fs';
import * as path from 'path';
import { performance } from 'perf_hooks';
import { list } from '../src/core/lock/inspect';
import { runAlone } from './alone';
import { longestBlock, measuresThreadCpu } from './blocks';
import { interleave, median, p95, ratioOf, type Candidate, type Row } from './stats';

const HELD = 100;
const STALE = 10;
const LEGACY = 10;
/** The aim for the longest time the event loop is held at once during a listing. */
const BLOCK_AIM_MS = 50;

const msf = (ms: number): string => `${ms.toFixed(1)} ms`;

/** Runs `fn` over `items` with at most `limit` in flight: creating 100,000 directories at once would exhaust file handles on some systems. */
async function pool<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]);
    }),
  );
}

async function makeListFixture(staticDir: string, areas: number): Promise<void> {
  fs.mkdirSync(staticDir, { recursive: true });
  const names = Array.from({ length: areas }, (_, i) => `area-${String(i).padStart(6, '0')}`);
  await pool(names, 64, (n) => fs.promises.mkdir(path.join(staticDir, n)));
  const base = { user: 'bench', clientId: 'bench', refreshMs: 2_500, tool: 'bench' };
  // Held by a holder on another host with a long threshold: judged by heartbeat, stays held for the whole run.
  await pool(names.slice(0, HELD), 16, async (n) => {
    const lock = path.join(staticDir, n, 'devserver.lock');
    await fs.promises.mkdir(lock);
    const holder = { ...base, pid: 4242, hostname: 'bench-other-host', acquiredAt: new Date().toISOString(), token: `held-${n}`, staleMs: 86_400_000 };
    await fs.promises.writeFile(path.join(lock, 'owner.json'), JSON.stringify(holder));
  });
  const hourAgo = new Date(Date.now() - 3_600_000);
  await pool(names.slice(HELD, HELD + STALE), 16, async (n) => {
    const lock = path.join(staticDir, n, 'devserver.lock');
    await fs.promises.mkdir(lock);
    const holder = { ...base, pid: 4242, hostname: 'bench-other-host', acquiredAt: hourAgo.toISOString(), token: `stale-${n}`, staleMs: 10_000 };
    await fs.promises.writeFile(path.join(lock, 'owner.json'), JSON.stringify(holder));
    await fs.promises.utimes(lock, hourAgo, hourAgo);
  });
  // The Python devserver's lock: a hard link to `<hostname>-<thread>.<pid><hash>`.
  await pool(names.slice(HELD + STALE, HELD + STALE + LEGACY), 16, async (n) => {
    const unique = path.join(staticDir, n, 'benchhost-7f3a.4242-17');
    await fs.promises.writeFile(unique, '');
    await fs.promises.link(unique, path.join(staticDir, n, 'devserver.lock'));
  });
  // A few plain files next to the areas, as real static directories have.
  for (let i = 0; i < 20; i++) fs.writeFileSync(path.join(staticDir, `notes-${i}.txt`), 'x');
}

/** The baseline: what any directory listing with per-entry metadata costs. */
async function bareList(dir: string): Promise<number> {
  const entries = await fs.promises.readdir(dir, { withFileTypes: true });
  const stats = await Promise.all(entries.map((e) => fs.promises.stat(path.join(dir, e.name))));
  return stats.length;
}

async function benchListOf(root: string, areas: number, rows: Row[], quick: boolean, line: (s?: string) => void): Promise<void> {
  const k = `${areas / 1000}k`;
  line(`b) list() of ${areas.toLocaleString('en')} areas (${HELD} held, ${STALE} stale, ${LEGACY} legacy, the rest free)`);
  const staticDir = path.join(root, `list-${k}`, 'static');
  const t0 = performance.now();
  await makeListFixture(staticDir, areas);
  line(`   fixture created in ${msf(performance.now() - t0)}`);
  const check = await list(staticDir);
  const count = (state: string): number => check.filter((e) => e.state === state).length;
  line(`   list() sees: ${check.length} entries, ${count('held')} held, ${count('stale')} stale, ${count('legacy')} legacy, ${count('free')} free`);
  const candidates: Candidate[] = [
    { name: 'list', run: () => list(staticDir) },
    { name: 'readdir+stat', run: () => bareList(staticDir) },
  ];
  const big = areas > 20_000;
  const s = await interleave(candidates, {
    warmup: big ? 1 : 2,
    perRound: 1,
    rounds: quick ? (big ? 3 : 5) : big ? 11 : 25,
    budgetMs: quick ? 8_000 : big ? 40_000 : 25_000,
  });
  const ours = s.get('list')!;
  const bare = s.get('readdir+stat')!;
  for (const [name, v] of s) line(`   ${name.padEnd(16)} median ${msf(median(v)).padStart(9)}   p95 ${msf(p95(v)).padStart(9)}   (${v.length} runs)`);
  const row: Row = { name: `list ${k} areas`, unit: 'ms', median: median(ours), p95: p95(ours), baseline: 'readdir+stat', baselineMedian: median(bare), aim: '≤ 1.50×' };
  row.met = ratioOf(row)! <= 1.5;
  rows.push(row);
  line(`   list/readdir+stat ${ratioOf(row)!.toFixed(2)}×`);

  const times = quick ? 2 : 5;
  const blockOurs = await longestBlock(() => list(staticDir), times);
  const blockBare = await longestBlock(() => bareList(staticDir), times);
  line(`   longest the event loop was held at once, over ${times} runs each: list ${msf(blockOurs.wallMs)}, readdir+stat ${msf(blockBare.wallMs)}`);
  if (measuresThreadCpu) {
    line(`   the most of this thread's CPU in one block (what is ours of it on a loaded machine): list ${msf(blockOurs.cpuMs)}, readdir+stat ${msf(blockBare.cpuMs)}`);
  }
  rows.push({
    name: `list ${k}: longest event-loop block`,
    unit: 'ms',
    median: blockOurs.wallMs,
    p95: NaN,
    p95Text: measuresThreadCpu ? `CPU ${blockOurs.cpuMs.toFixed(1)} ms` : '-',
    baselineText: `readdir+stat: ${blockBare.wallMs.toFixed(1)} ms`,
    ratioText: '-',
    aim: `≤ ${BLOCK_AIM_MS} ms`,
    met: blockOurs.wallMs <= BLOCK_AIM_MS,
  });
  fs.rmSync(path.dirname(staticDir), { recursive: true, force: true });
  line();
}

export async function benchList(root: string, rows: Row[], quick: boolean, line: (s?: string) => void): Promise<void> {
  for (const areas of [10_000, 100_000]) await benchListOf(root, areas, rows, quick, line);
}

if (require.main === module) runAlone('list', benchList);
