/**
 * e) Verifying a staged build of about 1 GiB (part d's tree, staged once) with `verify()`,
 * progress on, against `sha256sum` over the same files (one process fed by `xargs -0`, as a script
 * would check a build), in alternating runs. After a first untimed read of each, both read from the
 * page cache: the figure is hashing and per-file work, not the disk. Aim: at least 0.9× the speed
 * of sha256sum. Then, as context, the same for a build of 20,000 files of 100 bytes, where there
 * is nearly nothing to hash and per-file work is all.
 */
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { performance } from 'perf_hooks';
import { stage } from '../src/core/stage/stage';
import { MANIFEST_FILE, type Manifest } from '../src/core/stage/types';
import { verify } from '../src/core/verify';
import { sourceTree } from './stage';
import { median, speedRow, type Row } from './stats';

const SMALL_DIRS = 100;
const SMALL_PER_DIR = 200;

export async function benchVerify(root: string, rows: Row[], quick: boolean, line: (s?: string) => void): Promise<void> {
  const { dir: src, bytes } = sourceTree(root, quick);
  const big = await stageOnce(root, 'verify-static', src);
  line(`e) verifying the staged build of d (${(bytes / 1024 ** 3).toFixed(2)} GiB, ${big.files.toLocaleString('en')} files) vs sha256sum of the same files`);
  const b = await timeBoth(big, quick, line, bytes);
  rows.push(speedRow('verify ~1 GiB build (speed vs sha256sum)', b.ours, 'sha256sum', b.sums, 0.9));

  const small = path.join(root, 'verify-small-src');
  const dirs = quick ? SMALL_DIRS / 4 : SMALL_DIRS;
  for (let d = 0; d < dirs; d++) {
    fs.mkdirSync(path.join(small, `d${d}`), { recursive: true });
    for (let i = 0; i < SMALL_PER_DIR; i++) fs.writeFileSync(path.join(small, `d${d}`, `f${i}.txt`), `${d}/${i} `.padEnd(100, 'x'));
  }
  const tiny = await stageOnce(root, 'verify-small-static', small);
  line(`   and a build of ${tiny.files.toLocaleString('en')} files of 100 bytes (context: per-file work only)`);
  const t = await timeBoth(tiny, quick, line, tiny.files * 100);
  rows.push(speedRow(`verify ${tiny.files.toLocaleString('en')} files of 100 B (speed)`, t.ours, 'sha256sum', t.sums));
  line();
}

interface Staged {
  staticDir: string;
  area: string;
  list: string;
  files: number;
}

async function stageOnce(root: string, name: string, src: string): Promise<Staged> {
  const staticDir = path.join(root, name);
  fs.mkdirSync(staticDir);
  await stage(staticDir, 'build', [src]);
  const area = path.join(staticDir, 'build');
  const manifest = JSON.parse(fs.readFileSync(path.join(area, MANIFEST_FILE), 'utf8')) as Manifest;
  const files = Object.values(manifest.artifacts).filter((e) => e.type === 'file');
  // The artifacts by name, NUL-separated: what sha256sum reads is exactly what verify hashes.
  const list = path.join(root, `${name}-files`);
  fs.writeFileSync(list, files.map((e) => `${e.name}\0`).join(''));
  return { staticDir, area, list, files: files.length };
}

async function timeBoth(s: Staged, quick: boolean, line: (s?: string) => void, bytes: number): Promise<{ ours: number[]; sums: number[] }> {
  let progressEvents = 0;
  const candidates: [string, () => Promise<number>][] = [
    [
      'ours',
      async () => {
        const t0 = performance.now();
        const r = await verify(s.staticDir, 'build', { onProgress: () => progressEvents++ });
        if (!r.ok) throw new Error(`verify found problems in a build just staged: ${JSON.stringify(r.problems.slice(0, 3))}`);
        return performance.now() - t0;
      },
    ],
    [
      'sha256sum',
      () => {
        const t0 = performance.now();
        const res = spawnSync('xargs', ['-0', '-a', s.list, 'sha256sum'], { cwd: s.area, stdio: ['ignore', 'ignore', 'pipe'] });
        if (res.status !== 0) throw new Error(`sha256sum failed: ${res.stderr.toString()}`);
        return Promise.resolve(performance.now() - t0);
      },
    ],
  ];
  for (const [, run] of candidates) await run();
  const samples = new Map<string, number[]>(candidates.map(([name]) => [name, []]));
  const rounds = quick ? 2 : 5;
  for (let r = 0; r < rounds; r++) {
    // Alternate who goes first.
    for (const [name, run] of r % 2 === 0 ? candidates : [...candidates].reverse()) samples.get(name)!.push(await run());
  }
  const ours = samples.get('ours')!;
  const sums = samples.get('sha256sum')!;
  const mOurs = median(ours);
  const mSum = median(sums);
  const mib = bytes / 1024 ** 2;
  const runs = (v: number[]): string => v.map((m) => (m / 1000).toFixed(2)).join(', ');
  line(`   verify     median ${(mOurs / 1000).toFixed(2)} s (${(mib / (mOurs / 1000)).toFixed(0)} MiB/s), runs ${runs(ours)} s; ${progressEvents} progress events in all`);
  line(`   sha256sum  median ${(mSum / 1000).toFixed(2)} s (${(mib / (mSum / 1000)).toFixed(0)} MiB/s), runs ${runs(sums)} s`);
  line(`   speed relative to sha256sum: ${(mSum / mOurs).toFixed(2)}×`);
  return { ours, sums };
}
