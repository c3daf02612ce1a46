/**
 * d) Staging a directory of about 1 GiB (a few large files and many small ones) with progress on,
 * against `cp -r` of the same tree, alternating, in the same run. The staging hashes every byte
 * and writes a manifest; cp does neither. Aim: at least cp's speed (1.0×).
 */
import { spawnSync } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { performance } from 'perf_hooks';
import { stage } from '../src/core/stage/stage';
import { runAlone } from './alone';
import { median, speedRow, type Row } from './stats';

const LARGE = 4;
const LARGE_BYTES = 200 * 1024 * 1024;
const SMALL = 2_000;
const SMALL_BYTES = 100 * 1024;

function makeTree(dir: string, quick: boolean): number {
  const scale = quick ? 8 : 1;
  let bytes = 0;
  const chunk = crypto.randomBytes(8 * 1024 * 1024);
  for (let i = 0; i < LARGE; i++) {
    const fd = fs.openSync(path.join(dir, `image-${i}.bin`), 'w');
    for (let w = 0; w < LARGE_BYTES / scale; w += chunk.length) {
      // Vary each chunk a little so no filesystem can deduplicate it.
      chunk.writeUInt32LE(i * 1_000_003 + w, 0);
      fs.writeSync(fd, chunk);
    }
    fs.closeSync(fd);
    bytes += LARGE_BYTES / scale;
  }
  for (let i = 0; i < SMALL / scale; i++) {
    const sub = path.join(dir, 'autotest', `d${i % 40}`);
    fs.mkdirSync(sub, { recursive: true });
    fs.writeFileSync(path.join(sub, `f${i}.bin`), crypto.randomBytes(SMALL_BYTES));
    bytes += SMALL_BYTES;
  }
  return bytes;
}

const trees = new Map<string, { dir: string; bytes: number }>();

/** The tree of about 1 GiB that parts d and e read, made once per run under `root`. */
export function sourceTree(root: string, quick: boolean): { dir: string; bytes: number } {
  const dir = path.join(root, 'stage-src');
  const known = trees.get(dir);
  if (known !== undefined) return known;
  fs.mkdirSync(dir);
  const tree = { dir, bytes: makeTree(dir, quick) };
  trees.set(dir, tree);
  return tree;
}

export async function benchStage(root: string, rows: Row[], quick: boolean, line: (s?: string) => void): Promise<void> {
  const { dir: src, bytes } = sourceTree(root, quick);
  const staticDir = path.join(root, 'stage-static');
  fs.mkdirSync(staticDir);
  line(`d) staging ${(bytes / 1024 ** 3).toFixed(2)} GiB (${LARGE} large files, ${SMALL / (quick ? 8 : 1)} small) vs cp -r of the same tree`);
  const ours: number[] = [];
  const cp: number[] = [];
  const rounds = quick ? 2 : 5;
  let progressEvents = 0;
  for (let r = 0; r < rounds; r++) {
    // Alternate who goes first; flush dirty pages before each run so neither pays for the other.
    const runs: [string, () => Promise<number>][] = [
      [
        'ours',
        async () => {
          const t0 = performance.now();
          await stage(staticDir, `build-${r}`, [src], { onProgress: () => progressEvents++ });
          return performance.now() - t0;
        },
      ],
      [
        'cp',
        () => {
          const t0 = performance.now();
          const res = spawnSync('cp', ['-r', src, path.join(root, `cp-${r}`)]);
          if (res.status !== 0) throw new Error(`cp -r failed: ${res.stderr.toString()}`);
          return Promise.resolve(performance.now() - t0);
        },
      ],
    ];
    if (r % 2 === 1) runs.reverse();
    for (const [name, run] of runs) {
      spawnSync('sync');
      const ms = await run();
      (name === 'ours' ? ours : cp).push(ms);
    }
    fs.rmSync(path.join(staticDir, `build-${r}`), { recursive: true, force: true });
    fs.rmSync(path.join(root, `cp-${r}`), { recursive: true, force: true });
  }
  const mOurs = median(ours);
  const mCp = median(cp);
  const mib = bytes / 1024 ** 2;
  line(`   stage   median ${(mOurs / 1000).toFixed(2)} s (${(mib / (mOurs / 1000)).toFixed(0)} MiB/s), runs ${ours.map((m) => (m / 1000).toFixed(2)).join(', ')} s; ${progressEvents} progress events in all`);
  line(`   cp -r   median ${(mCp / 1000).toFixed(2)} s (${(mib / (mCp / 1000)).toFixed(0)} MiB/s), runs ${cp.map((m) => (m / 1000).toFixed(2)).join(', ')} s`);
  const speed = mCp / mOurs;
  line(`   speed relative to cp -r: ${speed.toFixed(2)}×`);
  line();
  rows.push(speedRow('stage ~1 GiB dir (speed vs cp)', ours, 'cp -r', cp, 1.0));
}

if (require.main === module) runAlone('stage', benchStage);
