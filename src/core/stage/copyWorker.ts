/**
 * A copying worker thread (pool.ts says why workers copy and hash; copyWorkers.ts hands them
 * files, in the messages of copyProtocol.ts).
 *
 * The rules of copy.ts hold here: the source is opened without following a link and without
 * waiting on a FIFO, must be the regular file the source saw (device and inode), is read through
 * that one descriptor, and a file that changes while it is read is refused. The destination is
 * created with `O_EXCL | O_NOFOLLOW`: nothing in its place is ever written through.
 */
import * as crypto from 'crypto';
import * as fs from 'fs';
import { threadPort } from '../base/threads';
import { CHUNK, MEASURE_MS, PROGRESS_EVERY, SMALL_MAX, type CopyJob, type ErrorShape, type FailSide, type FromWorker, type Result, type ToWorker } from './copyProtocol';
import type { TreeSize } from './types';

const port = threadPort<ToWorker, FromWorker>('copyWorker', 'the copying pool (copyWorkers.ts)');
const C = fs.constants;
let stop = new Int32Array(new SharedArrayBuffer(4));
const whole = Buffer.allocUnsafe(SMALL_MAX + 1);
let chunk: Buffer | undefined;

class Fail extends Error {
  constructor(
    readonly side: FailSide,
    readonly err?: unknown,
  ) {
    super(side);
  }
}
/** Throws unless the lock still holds the work directory (a check before writing; the commit's renames are the fence). */
const fenced = (job: CopyJob): void => {
  if (job.fence === undefined) return;
  let ino: number | undefined;
  try {
    ino = fs.lstatSync(job.fence.path).ino;
  } catch {
    ino = undefined;
  }
  if (ino !== job.fence.ino) throw new Fail('lost');
};
const shape = (err: unknown): ErrorShape => {
  const e = err as NodeJS.ErrnoException;
  const out: ErrorShape = { message: String(e?.message ?? err) };
  if (typeof e?.code === 'string') out.code = e.code;
  if (typeof e?.path === 'string') out.path = e.path;
  if (typeof e?.syscall === 'string') out.syscall = e.syscall;
  return out;
};
const tryOr = <T>(side: 'source' | 'dest', fn: () => T): T => {
  try {
    return fn();
  } catch (err) {
    throw new Fail(side, err);
  }
};
const writeAll = (fd: number, buf: Buffer, n: number): void => {
  for (let off = 0; off < n; ) off += fs.writeSync(fd, buf, off, n - off);
};

/**
 * The copy's file: made now (after a look through the lock), or the one the creating worker made,
 * which must still be that inode (writing into it adds nothing to a lock being removed).
 */
function openDest(job: CopyJob): number {
  if (job.created === undefined) {
    fenced(job);
    return tryOr('dest', () => fs.openSync(job.dest, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o666));
  }
  const fd = tryOr('dest', () => fs.openSync(job.dest, C.O_WRONLY | C.O_NOFOLLOW | C.O_NONBLOCK));
  let st: fs.Stats | undefined;
  try {
    st = fs.fstatSync(fd);
  } catch {
    st = undefined;
  }
  // The file made for this copy, and with no other name: a hard link made to it since may be outside.
  const why = st?.ino !== job.created ? 'was replaced in the work directory' : st.nlink !== 1 ? `has ${st.nlink} hard links now (other names, perhaps outside)` : undefined;
  if (why !== undefined) {
    fs.closeSync(fd);
    throw new Fail('dest', Object.assign(new Error(`${job.dest} ${why}`), { code: 'EEXIST' }));
  }
  return fd;
}

/** Makes the copy's file, empty, and lets it go: the copying worker opens it by name (a descriptor is only closed where it was opened). */
function create(job: CopyJob): Result {
  if (Atomics.load(stop, 0) !== 0) throw new Fail('stopped');
  fenced(job);
  const fd = tryOr('dest', () => fs.openSync(job.dest, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o666));
  try {
    return { id: job.id, created: tryOr('dest', () => fs.fstatSync(fd).ino) };
  } finally {
    fs.closeSync(fd);
  }
}

function copy(job: CopyJob): Result {
  if (Atomics.load(stop, 0) !== 0) throw new Fail('stopped');
  let input: number;
  try {
    input = fs.openSync(job.src, C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK);
  } catch (err) {
    // A link where the file was: exchanged since the source saw it.
    throw new Fail((err as NodeJS.ErrnoException).code === 'ELOOP' ? 'changed' : 'source', err);
  }
  let output: number | undefined;
  try {
    const st = tryOr('source', () => fs.fstatSync(input));
    const seen = job.seen;
    if (!st.isFile() || (seen !== undefined && (st.dev !== seen.dev || st.ino !== seen.ino))) throw new Fail('changed');
    const hash = crypto.createHash('sha256');
    let size = 0;
    if (st.size <= SMALL_MAX) {
      // One byte more than its size: a file that grew since it was opened is read to its end and told.
      for (let got = -1; got !== 0 && size < st.size + 1; size += got) got = tryOr('source', () => fs.readSync(input, whole, size, st.size + 1 - size, size));
      if (size > st.size) throw new Fail('changed');
      hash.update(whole.subarray(0, size));
      output = openDest(job);
      const out = output;
      tryOr('dest', () => writeAll(out, whole, size));
    } else {
      if (seen !== undefined && seen.size <= SMALL_MAX) throw new Fail('changed'); // grew past a small file since the walk
      const buf = (chunk ??= Buffer.allocUnsafe(CHUNK));
      output = openDest(job);
      const out = output;
      let told = 0;
      for (;;) {
        if (Atomics.load(stop, 0) !== 0) throw new Fail('stopped');
        const n = tryOr('source', () => fs.readSync(input, buf, 0, buf.length, size));
        if (n === 0) break;
        hash.update(buf.subarray(0, n));
        tryOr('dest', () => writeAll(out, buf, n));
        size += n;
        // Growing while it is read: stop now, rather than copy a file that may never end.
        if (size > st.size) throw new Fail('changed');
        if (size - told >= PROGRESS_EVERY) {
          told = size;
          fenced(job);
          port.post({ id: job.id, progress: size });
        }
      }
    }
    // A large file must be as the walk saw it, as it was opened, and as long as what was read;
    // a small one was read whole in one go, so what was read is what is hashed and written.
    const end = st.size <= SMALL_MAX ? st : tryOr('source', () => fs.fstatSync(input));
    const same = (a: { ino: number; size: number; mtimeMs: number }): boolean => a.ino === end.ino && a.size === end.size && a.mtimeMs === end.mtimeMs;
    if (end !== st && (!same(st) || (seen !== undefined && !same(seen)) || size !== end.size)) throw new Fail('changed');
    const fd = output;
    const ino = job.created ?? tryOr('dest', () => fs.fstatSync(fd).ino);
    output = undefined;
    tryOr('dest', () => fs.closeSync(fd)); // a network filesystem may report a failed write only here
    return { id: job.id, size, sha256: hash.digest('hex'), end: { ino: end.ino, size: end.size, mtimeMs: end.mtimeMs }, ino };
  } finally {
    fs.closeSync(input);
    if (output !== undefined) {
      try {
        fs.closeSync(output);
      } catch {
        /* the copy failed already */
      }
    }
  }
}

/**
 * Bytes of the regular files below `dirs` (links not followed), how many files and links there
 * are (the artifacts a staging of them records) and the bytes of their names relative to the
 * directory given; null if it takes too long.
 */
function measure(dirs: string[]): TreeSize | null {
  const deadline = Date.now() + MEASURE_MS;
  const total = { bytes: 0, artifacts: 0, nameBytes: 0 };
  const stack = dirs.map((d) => ({ d, rel: '' }));
  while (stack.length > 0) {
    if (Date.now() > deadline || Atomics.load(stop, 0) !== 0) return null;
    const { d, rel } = stack.pop()!;
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(d, { withFileTypes: true });
    } catch {
      continue;
    }
    for (const ent of entries) {
      const p = `${d}/${ent.name}`;
      const name = `${rel}${ent.name}`;
      if (ent.isDirectory()) {
        stack.push({ d: p, rel: `${name}/` });
        continue;
      }
      if (!ent.isFile() && !ent.isSymbolicLink()) continue;
      total.artifacts++;
      total.nameBytes += Buffer.byteLength(name);
      if (ent.isFile()) total.bytes += fs.lstatSync(p, { throwIfNoEntry: false })?.size ?? 0;
    }
  }
  return total;
}

port.onMessage((msg) => {
  stop = new Int32Array(msg.stop);
  if ('measure' in msg) {
    let total: TreeSize | null = null;
    try {
      total = measure(msg.measure.dirs);
    } catch {
      total = null;
    }
    port.post({ results: [{ id: msg.measure.id, total }] });
    return;
  }
  const results: Result[] = [];
  const creating = 'create' in msg;
  for (const job of creating ? msg.create : msg.copy) {
    try {
      results.push(creating ? create(job) : copy(job));
    } catch (err) {
      if (err instanceof Fail) results.push(err.err === undefined ? { id: job.id, failed: err.side } : { id: job.id, failed: err.side, error: shape(err.err) });
      else results.push({ id: job.id, failed: 'source', error: shape(err) });
    }
  }
  port.post({ results });
});
