/**
 * A tree like a real build, and its archives: a few large disk images that compress about as a
 * real one does (zeroed blocks, repeated text, blocks of noise) and thousands of small files of
 * varied sizes (scripts, text, small binaries) in a few dozen directories. The same bytes on
 * every run (a seeded generator), so that runs and machines compare.
 *
 *   node out/bench/buildTree.js DIR [--quick]   makes DIR/tree and DIR/build.{tar.gz,tar.xz,zip}
 */
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

export interface BuildTree {
  /** The tree itself. */
  dir: string;
  /** Bytes of its files. */
  bytes: number;
  files: number;
  /** Its archives, made with the system's tar, xz and zip from inside the tree. */
  archives: { 'tar.gz': string; 'tar.xz': string; zip: string };
}

/** A small, fast, seeded generator (xorshift32): the same tree every time. */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
}

const WORDS = 'the of build image partition kernel rootfs stateful firmware update payload board release test autotest chrome boot verified signature block sector'.split(' ');

function text(next: () => number, bytes: number): Buffer {
  const parts: string[] = [];
  let n = 0;
  while (n < bytes) {
    const w = WORDS[next() % WORDS.length];
    const s = next() % 9 === 0 ? `${w}\n` : `${w} `;
    parts.push(s);
    n += s.length;
  }
  return Buffer.from(parts.join('').slice(0, bytes));
}

/** One image of `bytes`: blocks of zeros, of text and of noise, as a disk image has. */
function writeImage(file: string, bytes: number, seed: number): void {
  const next = rng(seed);
  const fd = fs.openSync(file, 'w');
  const block = Buffer.alloc(64 * 1024);
  try {
    for (let off = 0; off < bytes; off += block.length) {
      const kind = next() % 10;
      if (kind < 4) block.fill(0);
      else if (kind < 7) text(next, block.length).copy(block);
      else for (let i = 0; i < block.length; i += 4) block.writeUInt32LE(next(), i);
      fs.writeSync(fd, block, 0, Math.min(block.length, bytes - off));
    }
  } finally {
    fs.closeSync(fd);
  }
}

function run(cmd: string, args: string[], cwd: string): void {
  const r = spawnSync(cmd, args, { cwd, stdio: ['ignore', 'ignore', 'inherit'] });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status ?? r.signal})`);
}

/**
 * Makes the tree under `root/tree` and its archives beside it: 2 images of 48 MiB and 3,000 small
 * files (an eighth of each with `quick`).
 */
export function makeBuildTree(root: string, quick = false): BuildTree {
  const scale = quick ? 8 : 1;
  const dir = path.join(root, 'tree');
  fs.mkdirSync(dir, { recursive: true });
  let bytes = 0;
  let files = 0;
  for (const [i, name] of ['chromiumos_test_image.bin', 'chromiumos_base_image.bin'].entries()) {
    const size = (48 * 1024 * 1024) / scale;
    writeImage(path.join(dir, name), size, 1000 + i);
    bytes += size;
    files++;
  }
  const next = rng(7);
  const small = 3000 / scale;
  for (let i = 0; i < small; i++) {
    const sub = path.join(dir, 'autotest', `suite${i % 50}`, i % 3 === 0 ? 'bin' : 'control');
    if (i < 150) fs.mkdirSync(sub, { recursive: true });
    // Sizes spread as a build's are: most under 16 KiB, a few up to 256 KiB.
    const r = next() % 100;
    const size = r < 60 ? 100 + (next() % 4000) : r < 95 ? 4096 + (next() % 28000) : 32768 + (next() % 230000);
    let content: Buffer;
    if (i % 5 === 4) {
      content = Buffer.alloc(size);
      for (let k = 0; k + 4 <= size; k += 4) content.writeUInt32LE(next(), k);
    } else content = text(next, size);
    fs.writeFileSync(path.join(sub, `f${i}.${i % 5 === 4 ? 'so' : 'py'}`), content);
    bytes += size;
    files++;
  }
  const out = (ext: string): string => path.join(root, `build.${ext}`);
  run('tar', ['-czf', out('tar.gz'), '.'], dir);
  run('sh', ['-c', `tar -cf - . | xz -6 -T2 > '${out('tar.xz')}'`], dir);
  run('zip', ['-qr', out('zip'), '.'], dir);
  return { dir, bytes, files, archives: { 'tar.gz': out('tar.gz'), 'tar.xz': out('tar.xz'), zip: out('zip') } };
}

if (require.main === module) {
  const where = process.argv[2];
  if (where === undefined) throw new Error('usage: node out/bench/buildTree.js DIR [--quick]');
  const t = makeBuildTree(where, process.argv.includes('--quick'));
  const size = (f: string): string => `${(fs.statSync(f).size / 1024 ** 2).toFixed(1)} MiB`;
  process.stdout.write(`${t.dir}: ${t.files} files, ${(t.bytes / 1024 ** 2).toFixed(1)} MiB; tar.gz ${size(t.archives['tar.gz'])}, tar.xz ${size(t.archives['tar.xz'])}, zip ${size(t.archives.zip)}\n`);
}
