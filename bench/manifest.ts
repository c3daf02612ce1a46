/**
 * j) The manifest of a build of 100,000 artifacts (about 30 MB), read the way the details page
 * reads it: `readBuildArtifacts` (opened through the build, parsed and checked entry by entry) and
 * the page's summary (stagings by fencing token, the first 2,000 names in the user's order). The
 * baseline is a bare `readFile` and `JSON.parse` of the same file. The figure that matters is the
 * longest the event loop was held at once: the page is made in the extension host. Aim: 50 ms.
 *
 *   node out/bench/manifest.js [--quick]     this part alone
 */
import * as fs from 'fs';
import * as path from 'path';
import * as v8 from 'v8';
import * as vm from 'vm';
import { readBuildArtifacts } from '../src/core/build/browse';
import { ContentsCache } from '../src/core/contents';
import { manifestText, noArtifacts } from '../src/core/build/manifest';
import { MANIFEST_FILE } from '../src/core/base/protocol';
import { summarize } from '../src/extension/details/summary';
import { runAlone } from './alone';
import { longestBlock, measuresThreadCpu } from './blocks';
import { interleave, median, p95, ratioOf, type Candidate, type Row } from './stats';

const ARTIFACTS = 100_000;
const BLOCK_AIM_MS = 50;

export async function benchManifest(root: string, rows: Row[], quick: boolean, line: (s?: string) => void): Promise<void> {
  const staticDir = path.join(root, 'manifest-static');
  const area = path.join(staticDir, 'eve', 'R1');
  fs.mkdirSync(area, { recursive: true });
  const artifacts = noArtifacts();
  const stagedAt = new Date().toISOString();
  for (let i = 0; i < ARTIFACTS; i++) {
    const name = `dir-${i % 40}/file-${String(i).padStart(6, '0')}.bin`;
    artifacts[name] = { name, type: 'file', size: 102_400 + i, sha256: (i % 16).toString(16).repeat(64), source: `/home/builder/out/${name}`, stagedAt, fence: 1 + (i % 3) };
  }
  const file = path.join(area, MANIFEST_FILE);
  fs.writeFileSync(file, await manifestText({ version: 1, artifacts }));
  const mb = fs.statSync(file).size / 1e6;
  line(`j) the manifest of a build of ${ARTIFACTS.toLocaleString('en')} artifacts (${mb.toFixed(1)} MB), read for the details page, vs readFile + JSON.parse`);

  const ours = async (): Promise<void> => {
    const s = await summarize(await readBuildArtifacts(staticDir, 'eve/R1'), 2_000);
    if (s.count !== ARTIFACTS || s.stagings.length !== 3) throw new Error(`the summary counts ${s.count} artifacts in ${s.stagings.length} stagings`);
  };
  const bare = async (): Promise<void> => {
    const m = JSON.parse(await fs.promises.readFile(file, 'utf8')) as { artifacts: object };
    if (Object.keys(m.artifacts).length !== ARTIFACTS) throw new Error('the bare parse lost artifacts');
  };
  const candidates: Candidate[] = [
    { name: 'details', run: ours },
    { name: 'readFile+parse', run: bare },
  ];
  const s = await interleave(candidates, { warmup: 1, perRound: 1, rounds: quick ? 3 : 9, budgetMs: quick ? 10_000 : 40_000 });
  const mine = s.get('details')!;
  const base = s.get('readFile+parse')!;
  for (const [name, v] of s) line(`   ${name.padEnd(16)} median ${median(v).toFixed(0).padStart(6)} ms   p95 ${p95(v).toFixed(0).padStart(6)} ms   (${v.length} runs)`);
  const row: Row = { name: 'manifest 100k artifacts: read', unit: 'ms', median: median(mine), p95: p95(mine), baseline: 'readFile+parse', baselineMedian: median(base) };
  rows.push(row);
  line(`   details/readFile+parse ${ratioOf(row)!.toFixed(2)}×`);

  const times = quick ? 2 : 5;
  const blockOurs = await longestBlock(ours, times);
  const blockBare = await longestBlock(bare, times);
  line(`   longest the event loop was held at once, over ${times} runs each: details ${blockOurs.wallMs.toFixed(1)} ms, readFile+parse ${blockBare.wallMs.toFixed(1)} ms`);
  if (measuresThreadCpu) line(`   the most of this thread's CPU in one block: details ${blockOurs.cpuMs.toFixed(1)} ms, readFile+parse ${blockBare.cpuMs.toFixed(1)} ms`);
  rows.push({
    name: 'manifest 100k: longest event-loop block',
    unit: 'ms',
    median: blockOurs.wallMs,
    p95: NaN,
    p95Text: measuresThreadCpu ? `CPU ${blockOurs.cpuMs.toFixed(1)} ms` : '-',
    baselineText: `readFile+parse: ${blockBare.wallMs.toFixed(1)} ms`,
    ratioText: '-',
    aim: `≤ ${BLOCK_AIM_MS} ms`,
    met: blockOurs.wallMs <= BLOCK_AIM_MS,
  });
  const heapOurs = await peakHeap(ours, times);
  const heapBare = await peakHeap(bare, times);
  line(`   heap in use at its peak while reading, above where it started (median of ${times}, sampled every 2 ms, garbage included): details ${heapOurs.toFixed(0)} MB, readFile+parse ${heapBare.toFixed(0)} MB`);

  // The tooltip's figures of the same build (the tree's ContentsCache): its first hover reads the
  // manifest; a hover while it is unchanged opens and fstats it; a hover after a touch reads it again.
  const hovers: Candidate[] = [
    {
      name: 'first hover',
      run: async () => {
        const c = await new ContentsCache(64 * 1024 * 1024).get(staticDir, 'eve/R1');
        if (c?.artifacts !== ARTIFACTS) throw new Error(`the tooltip counts ${c?.artifacts}`);
      },
    },
  ];
  const kept = new ContentsCache(64 * 1024 * 1024);
  await kept.get(staticDir, 'eve/R1');
  const again: Candidate[] = [
    {
      name: 'unchanged',
      run: async () => {
        const c = await kept.get(staticDir, 'eve/R1');
        if (c?.artifacts !== ARTIFACTS) throw new Error(`the tooltip counts ${c?.artifacts}`);
      },
    },
  ];
  const h1 = (await interleave(hovers, { warmup: 1, perRound: 1, rounds: quick ? 3 : 9, budgetMs: quick ? 10_000 : 30_000 })).get('first hover')!;
  const h2 = (await interleave(again, { warmup: 20, perRound: 20, rounds: quick ? 5 : 20, budgetMs: 5_000 })).get('unchanged')!;
  line(`   its tooltip's figures: first hover (or after a change) median ${median(h1).toFixed(0)} ms, again while unchanged ${(median(h2) * 1000).toFixed(0)} µs`);
  rows.push({ name: 'manifest 100k: tooltip, first hover', unit: 'ms', median: median(h1), p95: p95(h1), baselineText: `again while unchanged: ${(median(h2) * 1000).toFixed(0)} µs`, ratioText: '-' });
  fs.rmSync(staticDir, { recursive: true, force: true });
  line();
}

/**
 * How far the heap in use rose above where it started, after a full collection, while `run` ran,
 * in MB: the median of `times` runs. Sampled on a timer, so it sees the heap between slices (a
 * reader that holds the loop for the whole read is sampled after it, when some of its garbage may
 * already be collected).
 */
async function peakHeap(run: () => Promise<unknown>, times: number): Promise<number> {
  // A full collection before each run, so that one run's garbage does not count in the next; the
  // flag only makes `gc` available (to a new context), it changes nothing else.
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  const rises: number[] = [];
  for (let i = 0; i < times; i++) {
    gc();
    const start = v8.getHeapStatistics().used_heap_size;
    let peak = start;
    const sample = (): void => {
      peak = Math.max(peak, v8.getHeapStatistics().used_heap_size);
    };
    const timer = setInterval(sample, 2);
    await run();
    sample();
    clearInterval(timer);
    rises.push((peak - start) / 1e6);
  }
  return median(rises);
}

if (require.main === module) runAlone('manifest', benchManifest);
