/**
 * f) The history of a build. First, what one record costs (`recordHistory`, as the lock path
 * calls it, on the temporary directory's filesystem) against a bare `O_APPEND` write of the same
 * line to one open file. Then a query: 10,000 events of one tag, in the segments of 4 hosts (2,500
 * each, as a static directory shared by several machines holds them), among 3,000 events of 300
 * other tags, read with `history(staticDir, { tag })` against reading the same segments with
 * `readFileSync` and `JSON.parse` of every line. Aim: the query under 200 ms.
 */
import * as fs from 'fs';
import * as path from 'path';
import { flushHistory, history, lastHeld, recordHistory, type HistoryEvent, type NewHistoryEvent } from '../src/core/log/history';
import { HISTORY_DIR, META_DIR, historyDirOf, historySegmentName } from '../src/core/base/protocol';
import { interleave, median, p95, type Row } from './stats';

const TAG = 'eve-release/R120-15662.0.0';
const EVENTS = 10_000;
const HOSTS = 4;
const OTHER_TAGS = 300;
const OTHER_EVENTS = 10;

/** A realistic event: the fields a holder's release writes, with a purpose. */
function event(tag: string, i: number, host: string): NewHistoryEvent {
  const kinds = ['acquired', 'staged', 'released'] as const;
  const kind = kinds[i % 3];
  return {
    tag,
    kind,
    holder: { user: 'builder', hostname: host, pid: 10_000 + (i % 5_000), clientId: `${host}:${10_000 + (i % 5_000)}`, purpose: `staging ./out/build-${i}/chromiumos_test_image.bin` },
    fence: Math.floor(i / 3) + 1,
    ...(kind === 'acquired' ? { waitedMs: i % 700 } : kind === 'released' ? { heldMs: 60_000 + i } : { artifacts: 12, skipped: 0, bytes: 3_221_225_472 }),
  };
}

export async function benchHistory(root: string, rows: Row[], quick: boolean, line: (s?: string) => void): Promise<void> {
  const staticDir = path.join(root, 'history-static');
  fs.mkdirSync(staticDir);
  line(`f) history: one record's cost; a query of ${EVENTS.toLocaleString('en')} events of one tag (${HOSTS} hosts) among ${(OTHER_TAGS * OTHER_EVENTS).toLocaleString('en')} of ${OTHER_TAGS} other tags`);

  // What a record costs on the lock path, against the bare append it comes down to.
  const bare = path.join(root, 'history-bare.jsonl');
  const bareFd = fs.openSync(bare, fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT, 0o644);
  const sample = `${JSON.stringify({ ...event('x/y', 2, 'h'), time: new Date().toISOString() })}\n`;
  let n = 0;
  const append = await interleave(
    [
      { name: 'recordHistory', run: () => recordHistory(staticDir, event(`other/tag-${n++ % OTHER_TAGS}`, n, 'bench-host'), (w) => line(`   warning: ${w.message}`)) },
      { name: 'bare append', run: async () => fs.writeSync(bareFd, sample) },
    ],
    { warmup: 100, perRound: 50, rounds: quick ? 20 : 60, budgetMs: quick ? 2_000 : 6_000 },
  );
  fs.closeSync(bareFd);
  await flushHistory();
  const rec = append.get('recordHistory')!;
  const bareSamples = append.get('bare append')!;
  const us = (ms: number): string => `${(ms * 1000).toFixed(0)} µs`;
  line(`   recordHistory    median ${us(median(rec)).padStart(7)}   p95 ${us(p95(rec)).padStart(7)}   (${rec.length} records; two per lock cycle)`);
  line(`   bare append      median ${us(median(bareSamples)).padStart(7)}   p95 ${us(p95(bareSamples)).padStart(7)}`);
  rows.push({ name: 'history: one record', unit: 'µs', median: median(rec), p95: p95(rec), baseline: 'bare append', baselineMedian: median(bareSamples) });

  // The query's fixture: the segments as hosts write them (one per host, lines in time order).
  const [fan, hash] = historyDirOf(TAG);
  const dir = path.join(staticDir, META_DIR, HISTORY_DIR, fan, hash);
  fs.mkdirSync(dir, { recursive: true });
  const start = Date.now() - 30 * 86_400_000;
  const step = (30 * 86_400_000) / EVENTS;
  for (let h = 0; h < HOSTS; h++) {
    const host = `bench-host-${h}`;
    const lines: string[] = [];
    for (let i = h; i < EVENTS; i += HOSTS) lines.push(JSON.stringify({ ...event(TAG, i, host), time: new Date(start + i * step).toISOString() }));
    fs.writeFileSync(path.join(dir, historySegmentName(host, 0)), `${lines.join('\n')}\n`);
  }
  for (let t = 0; t < OTHER_TAGS; t++) for (let i = 0; i < OTHER_EVENTS; i++) await recordHistory(staticDir, event(`other/tag-${t}`, i, 'bench-host'));
  const segments = fs.readdirSync(dir).map((f) => path.join(dir, f));
  const bytes = segments.reduce((sum, f) => sum + fs.statSync(f).size, 0);
  const check = await history(staticDir, { tag: TAG });
  if (check.length !== EVENTS) throw new Error(`history() returned ${check.length} events of ${TAG}, expected ${EVENTS}`);
  line(`   fixture: ${segments.length} segments, ${(bytes / 1024 ** 2).toFixed(1)} MiB for ${TAG}`);

  const s = await interleave(
    [
      { name: 'history(tag)', run: () => history(staticDir, { tag: TAG }) },
      {
        name: 'readFile+JSON.parse',
        run: async () => {
          const all: HistoryEvent[] = [];
          for (const f of segments) for (const l of fs.readFileSync(f, 'utf8').split('\n')) if (l !== '') all.push(JSON.parse(l) as HistoryEvent);
          return all.length;
        },
      },
      { name: 'history(tag, limit 20)', run: () => history(staticDir, { tag: TAG, limit: 20 }) },
      { name: 'lastHeld(tag)', run: () => lastHeld(staticDir, TAG) },
    ],
    { warmup: 2, perRound: 1, rounds: quick ? 5 : 15, budgetMs: quick ? 5_000 : 15_000 },
  );
  const ms = (v: number): string => `${v.toFixed(1)} ms`;
  for (const [name, v] of s) line(`   ${name.padEnd(23)} median ${ms(median(v)).padStart(9)}   p95 ${ms(p95(v)).padStart(9)}   (${v.length} runs)`);
  const q = s.get('history(tag)')!;
  rows.push({
    name: `history: ${EVENTS / 1000}k events of a tag`,
    unit: 'ms',
    median: median(q),
    p95: p95(q),
    baseline: 'readFile+JSON.parse',
    baselineMedian: median(s.get('readFile+JSON.parse')!),
    aim: '< 200 ms',
    met: median(q) < 200,
  });
  const tail = s.get('history(tag, limit 20)')!;
  rows.push({ name: 'history: newest 20 of a tag', unit: 'ms', median: median(tail), p95: p95(tail) });
  line();
}
