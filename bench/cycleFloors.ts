/**
 * a') The lock cycle's own cost against its floor and against the locks it is compared with:
 * `acquire` + `release` of one tag (in this process, as part a) against the same system calls
 * replayed by a small C program with nothing between them (`bench/floor/cycle.c`, built here with
 * `cc` where there is one: the floor of this protocol), the same calls made through Node's
 * synchronous `fs` (`bench/floor/cycleNode.ts`: the floor of any Node program making them), the
 * Python devserver's lock (`lockfile.FileLock(...).acquire(timeout=0)` and `release()`,
 * python3-lockfile) and bare proper-lockfile. Each figure is microseconds per cycle over a batch of
 * cycles; the five run in alternating rounds, and the medians of the rounds are compared. The
 * other processes' start-up is not in their figures (they time their own loops).
 */
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { performance } from 'perf_hooks';
import * as lockfile from 'proper-lockfile';
import { acquire } from '../src/core/lock/lock';
import { runAlone } from './alone';
import { nodeReplayer } from './floor/cycleNode';
import { median, type Row } from './stats';

const PYTHON_LOCK = [
  'import lockfile, sys, time',
  'path, n = sys.argv[1], int(sys.argv[2])',
  'for _ in range(50):',
  '    l = lockfile.FileLock(path); l.acquire(timeout=0); l.release()',
  't0 = time.perf_counter()',
  'for _ in range(n):',
  '    l = lockfile.FileLock(path); l.acquire(timeout=0); l.release()',
  'print((time.perf_counter() - t0) / n * 1e6)',
].join('\n');

interface Floor {
  name: string;
  /** Microseconds per cycle over `n` cycles; undefined where it cannot run here. */
  run(n: number): Promise<number | undefined>;
}

export async function benchCycleFloors(root: string, rows: Row[], quick: boolean, line: (s?: string) => void, fsName: string): Promise<void> {
  line(`a') the lock cycle against its own system calls replayed in C and from Node, the Python devserver's lock and bare proper-lockfile (µs per cycle, ${fsName})`);
  const dir = path.join(root, 'floors');
  const staticDir = path.join(dir, 'static');
  fs.mkdirSync(path.join(staticDir, 'ours'), { recursive: true });
  fs.mkdirSync(path.join(staticDir, 'bare'));
  fs.mkdirSync(path.join(staticDir, 'python'));
  fs.mkdirSync(path.join(staticDir, 'c'));
  fs.mkdirSync(path.join(staticDir, 'node'));
  const replayInNode = nodeReplayer(path.join(staticDir, 'node'));
  const binary = path.join(dir, 'cycle');
  const source = path.resolve(__dirname, '..', '..', 'bench', 'floor', 'cycle.c');
  const built = spawnSync('cc', ['-O2', '-o', binary, source], { stdio: 'ignore' }).status === 0;
  const python = fs.existsSync('/usr/bin/python3') && spawnSync('/usr/bin/python3', ['-c', 'import lockfile'], { stdio: 'ignore' }).status === 0;
  const child = (argv: string[]): number | undefined => {
    const r = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8' });
    const v = Number(r.stdout.trim());
    return r.status === 0 && Number.isFinite(v) ? v : undefined;
  };
  const floors: Floor[] = [
    {
      name: 'ours',
      run: async (n) => {
        const t0 = performance.now();
        for (let i = 0; i < n; i++) await (await acquire(staticDir, 'ours', { createOnce: false })).release();
        return ((performance.now() - t0) * 1000) / n;
      },
    },
    { name: 'its calls from Node', run: async (n) => replayInNode(n) },
    { name: 'its calls in C', run: async (n) => (built ? child([binary, path.join(staticDir, 'c'), String(n)]) : undefined) },
    { name: 'Python devserver lock', run: async (n) => (python ? child(['/usr/bin/python3', '-c', PYTHON_LOCK, path.join(staticDir, 'python', 'devserver'), String(n)]) : undefined) },
    {
      name: 'proper-lockfile',
      run: async (n) => {
        const target = path.join(staticDir, 'bare', 'devserver');
        const t0 = performance.now();
        for (let i = 0; i < n; i++) await (await lockfile.lock(target, { realpath: false, lockfilePath: `${target}.lock` }))();
        return ((performance.now() - t0) * 1000) / n;
      },
    },
  ];
  const samples = new Map<string, number[]>(floors.map((f) => [f.name, []]));
  const rounds = quick ? 6 : 20;
  const n = quick ? 100 : 200;
  for (const f of floors) await f.run(50);
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < floors.length; k++) {
      const f = floors[(round + k) % floors.length];
      const v = await f.run(n);
      if (v !== undefined) samples.get(f.name)!.push(v);
    }
  }
  const ours = median(samples.get('ours')!);
  for (const f of floors) {
    const s = samples.get(f.name)!;
    if (s.length === 0) {
      line(`   ${f.name.padEnd(22)} not measured here (${f.name.endsWith(' C') ? 'no cc' : 'no /usr/bin/python3 with lockfile'})`);
      continue;
    }
    const m = median(s);
    line(`   ${f.name.padEnd(22)} ${m.toFixed(0).padStart(6)} µs${f.name === 'ours' ? '' : `   ours ${(ours / m).toFixed(2)}×`}   (${s.length} rounds of ${n})`);
    if (f.name === 'ours') continue;
    const isFloor = f.name.startsWith('its calls');
    const row: Row = { name: `lock cycle vs ${f.name}, ${fsName}`, unit: 'µs', median: ours / 1000, p95: Math.max(...samples.get('ours')!) / 1000, baseline: f.name, baselineMedian: m / 1000, aim: isFloor ? '≤ 1.20×' : '(context)' };
    if (isFloor) row.met = ours / m <= 1.2;
    rows.push(row);
  }
  line();
}

if (require.main === module) runAlone('floors', (root, rows, quick, line) => benchCycleFloors(root, rows, quick, line, 'the temporary directory'));
