/**
 * k) Staging a build as a user does, from each kind of source, against the tool the user would
 * run instead, each a whole process (start-up, lock, commit and manifest included), on a tree
 * like a real build (bench/buildTree.ts): `stage TAG build.tar.gz` against `tar -xzf`, `.zip`
 * against `unzip -q`, `.tar.xz` against `tar -xJf`, a directory against `cp -r`, and an http URL
 * of the `.tar.gz` against `curl -o` then `tar -xzf` of it. The staging does more than each: it
 * hashes every byte (SHA-256), writes each artifact whole or not at all into the lock's work
 * directory, commits by renames recorded beforehand, writes the manifest and takes and lets go of
 * the lock. Aim: no slower than the tool (≤ 1.00×).
 *
 * In alternating pairs (the order rotates each round), after `sync`, each into a new directory
 * that is removed after the pair; timed by the helper of part i (posix_spawn, wait4: the CPU of
 * the process and everything it waited for, which for `tar` is its gzip or xz too).
 *
 *   node out/bench/sources.js [--quick] [--only=tar.gz,zip,...] [--cli=PATH] [--hashed]
 *   (--cli: another build's dist/cli.js, for a before and after; --hashed: see HASHED)
 */
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as http from 'http';
import type { AddressInfo } from 'net';
import * as os from 'os';
import * as path from 'path';
import { runAlone } from './alone';
import { makeBuildTree } from './buildTree';
import { Runner, type Sample } from './cli';
import { median, type Row } from './stats';

interface Pair {
  name: string;
  tool: string;
  /** The argv of each, given a fresh directory (the tag of the staging, the output of the tool). */
  ours(tag: string): string[];
  theirs(out: string): string[];
}

const s = (x: number): string => `${x.toFixed(2)} s`;

/**
 * With `--hashed`, each tool also runs followed by `sha256sum` of every file it wrote, a third
 * in each round: the same tools giving the guarantee the staging gives (every byte hashed, a
 * record of it), as context.
 */
const HASHED = process.argv.includes('--hashed');

/** `argv` (a tool writing into `out`), then every file below `out` hashed. */
function hashed(argv: string[], out: string): string[] {
  const quoted = argv.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
  return ['sh', '-c', `${quoted} && cd "$1" && find . -type f -print0 | xargs -0 sha256sum > /dev/null`, 'sh', out];
}

/** Serves `file` over http on a loopback port, for the URL row. */
async function serve(file: string): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((_req, res) => {
    const size = fs.statSync(file).size;
    res.writeHead(200, { 'content-type': 'application/gzip', 'content-length': size });
    fs.createReadStream(file).pipe(res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/${path.basename(file)}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

export async function benchSources(root: string, rows: Row[], quick: boolean, line: (s?: string) => void, cli: string): Promise<void> {
  line('k) staging a build from each kind of source, each a whole process, against the tool a user would run instead (alternating pairs)');
  if (!fs.existsSync(cli)) {
    line(`   skipped: ${cli} is not built (npm run build)`);
    line();
    return;
  }
  const missing = ['tar', 'unzip', 'zip', 'xz', 'curl', 'cp'].filter((t) => spawnSync('sh', ['-c', `command -v ${t}`]).status !== 0);
  const base = path.join(root, 'sources');
  fs.mkdirSync(base, { recursive: true });
  const tree = makeBuildTree(base, quick);
  const staticDir = path.join(base, 'static');
  const outs = path.join(base, 'out');
  fs.mkdirSync(staticDir);
  fs.mkdirSync(outs);
  line(`   the tree: ${tree.files} files, ${(tree.bytes / 1024 ** 2).toFixed(0)} MiB (2 disk images, the rest small files); load ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  const server = await serve(tree.archives['tar.gz']);
  const node = process.execPath;
  const stage = (source: string) => (tag: string) => [node, cli, '-d', staticDir, 'stage', tag, source];
  const into = (cmd: string) => (out: string) => ['sh', '-c', `mkdir "$1" && cd "$1" && ${cmd}`, 'sh', out];
  const pairs: Pair[] = [
    { name: '.tar.gz', tool: 'tar -xzf', ours: stage(tree.archives['tar.gz']), theirs: into(`exec tar -xzf '${tree.archives['tar.gz']}'`) },
    { name: '.zip', tool: 'unzip -q', ours: stage(tree.archives.zip), theirs: into(`exec unzip -q '${tree.archives.zip}'`) },
    { name: '.tar.xz', tool: 'tar -xJf', ours: stage(tree.archives['tar.xz']), theirs: into(`exec tar -xJf '${tree.archives['tar.xz']}'`) },
    { name: 'a directory', tool: 'cp -r', ours: stage(tree.dir), theirs: (out) => ['cp', '-r', tree.dir, out] },
    { name: 'an http URL of the .tar.gz', tool: 'curl -o, then tar -xzf', ours: stage(server.url), theirs: into(`curl -s -o build.tar.gz '${server.url}' && exec tar -xzf build.tar.gz`) },
  ];
  const only = process.argv.find((a) => a.startsWith('--only='))?.slice(7).split(',');
  const runner = new Runner();
  let serial = 0;
  try {
    for (const pair of pairs) {
      if (only !== undefined && !only.some((o) => pair.name.includes(o))) continue;
      const need = pair.tool.split(/[ ,]+/).filter((w) => missing.includes(w));
      if (need.length > 0) {
        line(`   ${pair.name}: skipped, ${need.join(' and ')} missing here`);
        continue;
      }
      const ours: Sample[] = [];
      const theirs: Sample[] = [];
      const hashedRuns: Sample[] = [];
      const ratios: number[] = [];
      const hashedRatios: number[] = [];
      const rounds = quick ? 2 : 5;
      const order = HASHED ? [0, 1, 2] : [0, 1];
      for (let round = -1; round < rounds; round++) {
        const got: Sample[] = [];
        // Rotated each round, so that none always runs right after the same other.
        for (const which of order.map((_, k) => order[(k + round + 1) % order.length])) {
          const dir = which === 0 ? `t${serial++}` : path.join(outs, `o${serial++}`);
          spawnSync('sync');
          const argv = which === 0 ? pair.ours(dir) : which === 1 ? pair.theirs(dir) : hashed(pair.theirs(dir), dir);
          const sample = await runner.run(argv);
          if (sample.code !== 0) throw new Error(`${which === 0 ? 'stage' : pair.tool} of ${pair.name} exited ${sample.code}`);
          got[which] = sample;
        }
        // The first round warms the caches: not counted.
        if (round >= 0) {
          ours.push(got[0]);
          theirs.push(got[1]);
          ratios.push(got[0].wall / got[1].wall);
          if (HASHED) {
            hashedRuns.push(got[2]);
            hashedRatios.push(got[0].wall / got[2].wall);
          }
        }
        fs.rmSync(staticDir, { recursive: true, force: true });
        fs.rmSync(outs, { recursive: true, force: true });
        fs.mkdirSync(staticDir);
        fs.mkdirSync(outs);
      }
      const wall = median(ours.map((x) => x.wall));
      const theirWall = median(theirs.map((x) => x.wall));
      const ratio = median(ratios);
      line(
        `   ${pair.name.padEnd(27)} stage ${s(wall)} (CPU ${s(median(ours.map((x) => x.cpu)))})   ${pair.tool}: ${s(theirWall)} (CPU ${s(median(theirs.map((x) => x.cpu)))})   ` +
          `time ratio ${ratio.toFixed(2)}× (pairs ${ratios.map((r) => r.toFixed(2)).join(', ')}), load ${os.loadavg()[0].toFixed(2)}`,
      );
      if (HASHED) {
        const hashedRatio = median(hashedRatios);
        line(`   ${''.padEnd(27)} ${pair.tool}, then sha256sum of every file: ${s(median(hashedRuns.map((x) => x.wall)))} (CPU ${s(median(hashedRuns.map((x) => x.cpu)))})   time ratio ${hashedRatio.toFixed(2)}×`);
        rows.push({
          name: `stage ${pair.name} vs the tool + sha256sum`,
          unit: 'ms',
          median: wall * 1000,
          p95: Math.max(...ours.map((x) => x.wall)) * 1000,
          baseline: `${pair.tool} + sha256sum`,
          baselineMedian: median(hashedRuns.map((x) => x.wall)) * 1000,
          ratioText: `${hashedRatio.toFixed(2)}×`,
        });
      }
      rows.push({
        name: `stage ${pair.name} (whole process)`,
        unit: 'ms',
        median: wall * 1000,
        p95: Math.max(...ours.map((x) => x.wall)) * 1000,
        baseline: pair.tool,
        baselineMedian: theirWall * 1000,
        ratioText: `${ratio.toFixed(2)}×`,
        aim: '≤ 1.00×',
        met: ratio <= 1,
      });
    }
  } finally {
    runner.close();
    await server.close();
  }
  line();
}

if (require.main === module) {
  const cli = process.argv.find((a) => a.startsWith('--cli='))?.slice(6) ?? path.resolve(__dirname, '..', '..', 'dist', 'cli.js');
  runAlone('sources', (root, rows, quick, line) => benchSources(root, rows, quick, line, path.resolve(cli)));
}
