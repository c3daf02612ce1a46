/**
 * l) `devserver-stage du` and `prune --keep 50 --dry-run` of a static directory of many staged
 * builds, each a whole process, against `du -s` of the same tree and against `du -s` followed by
 * reading every build's manifest (`cat`): what `du` tells beyond sizes (each build's artifacts
 * and whether its manifest is damaged) is in the manifests, which `du -s` never opens. In
 * alternating rounds, rotated, the first not counted; wall, CPU and peak memory of each process.
 *
 * The tree: 100 boards of 1,000 builds (of 200 with --quick), each a staged build of one
 * 1,000-byte file with its manifest and `staged.timestamp`, as a staging writes them.
 *
 *   node out/bench/du.js [--quick] [--cli=PATH]     this part alone
 */
import { spawnSync } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { performance } from 'perf_hooks';
import { manifestBytes } from '../src/core/build/manifest';
import { MANIFEST_FILE, TIMESTAMP_FILE } from '../src/core/base/protocol';
import { runAlone } from './alone';
import { Runner, type Sample } from './cli';
import { median, type Row } from './stats';

const BOARDS = 100;

const s = (x: number): string => `${x.toFixed(2)} s`;
const mib = (kib: number): string => `${(kib / 1024).toFixed(0)} MiB`;

/** `areas` staged builds in `BOARDS` boards; the same bytes in each but its name. */
export async function makeDuFixture(staticDir: string, areas: number): Promise<void> {
  const per = Math.ceil(areas / BOARDS);
  const content = Buffer.alloc(1_000, 'x');
  const sha256 = crypto.createHash('sha256').update(content).digest('hex');
  const when = new Date('2026-11-01T00:00:00Z');
  const manifest = await manifestBytes({
    version: 1,
    artifacts: { 'image.bin': { name: 'image.bin', type: 'file', size: content.length, sha256, source: '/builds/image.bin', stagedAt: when.toISOString(), fence: 1 } },
  });
  for (let b = 0; b < BOARDS; b++) {
    const board = path.join(staticDir, `board${String(b).padStart(3, '0')}-release`);
    fs.mkdirSync(board, { recursive: true });
    for (let i = 0; i < per && b * per + i < areas; i++) {
      const dir = path.join(board, `R${100 + (i % 50)}-${10_000 + i}.0.0`);
      fs.mkdirSync(dir);
      fs.writeFileSync(path.join(dir, 'image.bin'), content);
      fs.writeFileSync(path.join(dir, MANIFEST_FILE), manifest);
      fs.writeFileSync(path.join(dir, TIMESTAMP_FILE), '1');
      // Last use spread over a month, so that `prune --keep` has an order to sort.
      const used = new Date(when.getTime() + ((b * per + i) % 720) * 3_600_000);
      fs.utimesSync(path.join(dir, TIMESTAMP_FILE), used, used);
    }
  }
}

interface Candidate {
  name: string;
  argv: string[];
}

export async function benchDu(root: string, rows: Row[], quick: boolean, line: (s?: string) => void, cli: string): Promise<void> {
  const areas = quick ? 20_000 : 100_000;
  line(`l) du and prune --dry-run of ${areas.toLocaleString('en')} staged builds, each a whole process, against du -s, and du -s then cat of every manifest (alternating rounds)`);
  if (!fs.existsSync(cli)) {
    line(`   skipped: ${cli} is not built (npm run build)`);
    line();
    return;
  }
  const staticDir = path.join(root, 'du', 'static');
  const t0 = performance.now();
  await makeDuFixture(staticDir, areas);
  line(`   fixture of ${areas.toLocaleString('en')} builds in ${BOARDS} boards made in ${s((performance.now() - t0) / 1000)}; load ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  const node = process.execPath;
  const candidates: Candidate[] = [
    { name: 'du -s', argv: ['du', '-s', staticDir] },
    // Every manifest read too, in one process for all: what `du` reads beyond the sizes.
    { name: 'du -s, then cat of every manifest', argv: ['sh', '-c', `du -s "$1" && find "$1" -name '${MANIFEST_FILE}' -type f -exec cat {} + >/dev/null`, 'sh', staticDir] },
    { name: 'du', argv: [node, cli, '-d', staticDir, 'du'] },
    { name: 'prune --keep 50 --dry-run', argv: [node, cli, '-d', staticDir, 'prune', '--keep', '50', '--dry-run'] },
  ];
  const samples = new Map<string, Sample[]>(candidates.map((c) => [c.name, []]));
  const runner = new Runner();
  const rounds = quick ? 2 : 3;
  try {
    for (let round = -1; round < rounds; round++) {
      for (let k = 0; k < candidates.length; k++) {
        const c = candidates[(k + round + 1) % candidates.length];
        spawnSync('sync');
        const sample = await runner.run(c.argv);
        if (sample.code !== 0) throw new Error(`${c.name} exited ${sample.code}`);
        if (round >= 0) samples.get(c.name)!.push(sample);
      }
    }
  } finally {
    runner.close();
  }
  const figures = (name: string): { wall: number; cpu: number; peakKiB: number } => {
    const list = samples.get(name)!;
    return { wall: median(list.map((x) => x.wall)), cpu: median(list.map((x) => x.cpu)), peakKiB: median(list.map((x) => x.maxrssKiB ?? 0)) };
  };
  const duS = figures('du -s');
  const withManifests = figures('du -s, then cat of every manifest');
  for (const c of candidates) {
    const f = figures(c.name);
    line(`   ${c.name.padEnd(34)} ${s(f.wall)} (CPU ${s(f.cpu)}, peak ${mib(f.peakKiB)})`);
  }
  for (const name of ['du', 'prune --keep 50 --dry-run']) {
    const f = figures(name);
    line(`   ${name}: ${(f.wall / duS.wall).toFixed(2)}× of du -s, ${(f.wall / withManifests.wall).toFixed(2)}× of du -s then cat of the manifests`);
    rows.push({ name: `${name}, ${areas / 1000}k builds (whole process)`, unit: 'ms', median: f.wall * 1000, p95: Math.max(...samples.get(name)!.map((x) => x.wall)) * 1000, baseline: 'du -s', baselineMedian: duS.wall * 1000, ratioText: `${(f.wall / duS.wall).toFixed(2)}×`, aim: '≤ 1.50×', met: f.wall / duS.wall <= 1.5 });
    rows.push({ name: `${name}, ${areas / 1000}k builds, vs reading the manifests too`, unit: 'ms', median: f.wall * 1000, p95: Math.max(...samples.get(name)!.map((x) => x.wall)) * 1000, baseline: 'du -s + cat', baselineMedian: withManifests.wall * 1000, ratioText: `${(f.wall / withManifests.wall).toFixed(2)}×` });
  }
  fs.rmSync(path.join(root, 'du'), { recursive: true, force: true });
  line();
}

if (require.main === module) {
  const cli = process.argv.find((a) => a.startsWith('--cli='))?.slice(6) ?? path.resolve(__dirname, '..', '..', 'dist', 'cli.js');
  runAlone('du', (root, rows, quick, line) => benchDu(root, rows, quick, line, path.resolve(cli)));
}
