/**
 * e) Verifying a staged build of about 1 GiB (part d's tree, staged once) with `verify()`,
 * progress on, against `sha256sum` over the same files (one process fed by `xargs -0`, as a script
 * would check a build), in alternating runs. After a first untimed read of each, both read from the
 * page cache: the figure is hashing and per-file work, not the disk. Aim: at least 0.9× the speed
 * of sha256sum.
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

export async function benchVerify(root: string, rows: Row[], quick: boolean, line: (s?: string) => void): Promise<void> {
  const { dir: src, bytes } = sourceTree(root, quick);
  const staticDir = path.join(root, 'verify-static');
  fs.mkdirSync(staticDir);
  await stage(staticDir, 'build', [src]);
  const area = path.join(staticDir, 'build');
  const manifest = JSON.parse(fs.readFileSync(path.join(area, MANIFEST_FILE), 'utf8')) as Manifest;
  const files = Object.values(manifest.artifacts).filter((e) => e.type === 'file');
  // The artifacts by name, NUL-separated: what sha256sum reads is exactly what verify hashes.
  const list = path.join(root, 'verify-files');
  fs.writeFileSync(list, files.map((e) => `${e.name}\0`).join(''));
  line(`e) verifying the staged build of d (${(bytes / 1024 ** 3).toFixed(2)} GiB, ${files.length.toLocaleString('en')} files) vs sha256sum of the same files`);

  let progressEvents = 0;
  const candidates: [string, () => Promise<number>][] = [
    [
      'ours',
      async () => {
        const t0 = performance.now();
        const r = await verify(staticDir, 'build', { onProgress: () => progressEvents++ });
        if (!r.ok) throw new Error(`verify found problems in a build just staged: ${JSON.stringify(r.problems.slice(0, 3))}`);
        return performance.now() - t0;
      },
    ],
    [
      'sha256sum',
      () => {
        const t0 = performance.now();
        const res = spawnSync('xargs', ['-0', '-a', list, 'sha256sum'], { cwd: area, stdio: ['ignore', 'ignore', 'pipe'] });
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
  const speed = mSum / mOurs;
  line(`   speed relative to sha256sum: ${speed.toFixed(2)}×`);
  line();
  rows.push(speedRow('verify ~1 GiB build (speed vs sha256sum)', ours, 'sha256sum', sums, 0.9));
}
