/**
 * Copying an artifact's content into its temporary file in the area, hashing exactly what was
 * written, and counting it against the call's size limit.
 */
import * as crypto from 'crypto';
import * as fs from 'fs';
import { Transform, type Readable } from 'stream';
import { pipeline } from 'stream/promises';
import { StagingError, asStagingError, errnoCode, isStagingError } from '../errors';
import { fdPath } from '../anchored';
import { ioFor } from '../io';
import { changedSourceError } from './sources/errors';
import { FileHasher, type FileDigest } from './hasher';
import { limitOf, sizeLimit, type SizeLimit } from './space';
import type { Progress } from './progress';
import type { IncomingEntry } from './types';

/** Large local files are copied in chunks of this size: big enough to be fast, small enough to stop at once. */
const CHUNK = 4 * 1024 * 1024;
/** Up to this size a local file is copied by the kernel in one call (tens of ms at most). */
const COPY_FILE_MAX = 16 * 1024 * 1024;
/**
 * Up to this size, between local filesystems, a file is read once, hashed and written with
 * synchronous calls: for the many small files of a build, a few syscalls of microseconds beat
 * thread-pool round trips and a message to a hash worker, and the event loop is held well
 * under a millisecond each time.
 */
const SMALL_SYNC_MAX = 1024 * 1024;

export interface Written {
  size: number;
  sha256: string;
}

/** The bytes one call has written, against its limit. */
export class Budget {
  used = 0;
  /** The limit in force: the caller's maximum, lowered at the start to keep the disk's safety margin. */
  private limit: SizeLimit;

  constructor(
    max: number,
    private readonly dir: string,
  ) {
    this.limit = limitOf(max, undefined);
  }

  /** Lowers the limit to what the filesystem can take while keeping its safety margin (space.ts). */
  async fitToDisk(): Promise<void> {
    this.limit = await sizeLimit(this.dir, this.limit.bytes);
  }

  get max(): number {
    return this.limit.bytes;
  }

  get remaining(): number {
    return this.limit.bytes - this.used;
  }

  /** The error for `source` going past the limit, naming which limit it is. */
  tooBig(source: string): StagingError {
    return this.limit.tooBig(source, this.dir);
  }

  /** Counts bytes against the limit; throws ETOOBIG past it. */
  count(n: number, source: string): void {
    this.used += n;
    if (this.used > this.limit.bytes) throw this.tooBig(source);
  }
}

export class Copier {
  /** Workers that hash local files beside the copy; started on the first local file. */
  private fileHasher?: FileHasher;
  private areaSync?: Promise<boolean>;
  private readonly sourceSync = new Map<number, boolean>();

  constructor(
    private readonly dir: string,
    private readonly signal: AbortSignal,
    private readonly budget: Budget,
    private readonly progress: Progress,
  ) {}

  async close(): Promise<void> {
    await this.fileHasher?.close();
  }

  private check(): void {
    if (this.signal.aborted) throw this.signal.reason;
  }

  /**
   * A local file, opened once: everything copied and hashed is read through that descriptor, and
   * it must be the regular file the source saw (device and inode), so that nothing exchanged for it
   * since (a link to another file, a FIFO) is ever read. Up to 16 MiB the kernel copies it
   * (copy_file_range) while a worker hashes it; larger files are copied in chunks, so that a cancel
   * stops within 100 ms. Its size and mtime before and after make sure it did not change in
   * between, so the hash is the copy's.
   */
  async local(name: string, src: string, part: string, e: IncomingEntry): Promise<Written> {
    const sourceError = (err: unknown): StagingError =>
      new StagingError('ESOURCE', `Cannot read ${src}: ${(err as Error).message}.`, { path: src, cause: err });
    // The many small files of a build, between local filesystems: all of it synchronously, a few
    // microseconds a call, where each round trip through the thread pool costs tens.
    const seen = e.localStat;
    if (seen !== undefined && (e.size ?? seen.size) <= SMALL_SYNC_MAX && (await this.bothLocal(src, seen.dev))) {
      return this.smallSync(name, src, part, e, seen, sourceError);
    }
    const { handle, st } = await openChecked(src, e.localStat, sourceError);
    let hashing: Promise<FileDigest> | undefined;
    try {
      // The size as the source saw it (its directory walk); the worker's look at the open file decides.
      const size = e.size ?? st.size;
      // The limit is known to be broken before a byte is copied.
      if (this.budget.used + size > this.budget.max) this.budget.count(size, e.source);
      if (size <= SMALL_SYNC_MAX && (await this.bothLocal(src, st.dev))) return this.small(name, handle, src, part, e);
      let copied = 0;
      let hashed = 0;
      const report = (): void => this.progress.update(name, Math.min(copied, hashed), size);
      this.fileHasher ??= new FileHasher();
      hashing = this.fileHasher.hash(handle.fd, (n) => {
        hashed = n;
        report();
      });
      hashing.catch(() => undefined); // awaited below; a copy failure must not leave it unobserved
      const whole = size <= COPY_FILE_MAX ? fdPath(handle.fd) : undefined;
      if (whole !== undefined) {
        // Counted before the copy: several run at once, and each must see the others' bytes.
        this.budget.count(size, e.source);
        await fs.promises.copyFile(whole, part, fs.constants.COPYFILE_EXCL);
        this.check();
        copied = size;
        report();
      } else {
        await this.chunks(handle, part, e, (n) => {
          copied += n;
          report();
        });
      }
      // The file as the source saw it before the copy began (else as it was opened), as the worker
      // found it, as it is now, and what was hashed and copied must agree: otherwise it changed
      // while it was staged and the hash might not be the copy's.
      const digest = await untilAborted(hashing, this.signal);
      const after = await handle.stat();
      const seen = e.localStat ?? st;
      const same = (a: { ino: number; size: number; mtimeMs: number }): boolean => a.ino === after.ino && a.size === after.size && a.mtimeMs === after.mtimeMs;
      if (!same(seen) || !same(digest.opened) || digest.size !== after.size || copied !== after.size) throw changedSourceError(src);
      return { size: digest.size, sha256: digest.sha256 };
    } catch (err) {
      if (this.signal.aborted) throw this.signal.reason;
      if (isStagingError(err)) throw err;
      const errno = errnoCode(err);
      const at = (err as { path?: string }).path;
      if ((errno === 'ENOENT' || errno === 'EACCES' || errno === 'EPERM' || errno === 'EISDIR') && (at === src || at === fdPath(handle.fd))) throw sourceError(err);
      throw asStagingError(err, 'copy into', part);
    } finally {
      // A worker may still be reading it (a failed copy, a cancel): closed once it has let go.
      void (hashing ?? Promise.resolve())
        .catch(() => undefined)
        .then(() => handle.close())
        .catch(() => undefined);
    }
  }

  /** Whether the filesystem of the source `src` (device `dev`) and the area's are both local (see io.ts). */
  private async bothLocal(src: string, dev: number): Promise<boolean> {
    this.areaSync ??= ioFor(this.dir, (await fs.promises.stat(this.dir)).dev).then((io) => io.sync);
    if (!(await this.areaSync)) return false;
    let known = this.sourceSync.get(dev);
    if (known === undefined) {
      known = (await ioFor(src, dev).catch(() => ({ sync: false }))).sync;
      this.sourceSync.set(dev, known);
    }
    return known;
  }

  /** A small local file: read once, hashed, written, all synchronously: the hash is of what was written. */
  private small(name: string, handle: fs.promises.FileHandle, src: string, part: string, e: IncomingEntry): Written {
    this.check();
    let data: Buffer;
    try {
      data = fs.readFileSync(handle.fd);
    } catch (err) {
      throw new StagingError('ESOURCE', `Cannot read ${src}: ${(err as Error).message}.`, { path: src, cause: err });
    }
    return this.writeRead(name, part, data, e);
  }

  /** Writes what was read of a small file, which is what is hashed: a change since the walk cannot split them. */
  private writeRead(name: string, part: string, data: Buffer, e: IncomingEntry): Written {
    this.budget.count(data.length, e.source);
    try {
      fs.writeFileSync(part, data, { flag: 'wx' });
    } catch (err) {
      throw asStagingError(err, `write ${name} into`, this.dir);
    }
    this.progress.update(name, data.length, data.length);
    return { size: data.length, sha256: crypto.createHash('sha256').update(data).digest('hex') };
  }

  /**
   * A small local file, synchronously: opened once without following a link or waiting on a FIFO,
   * checked to be the file the source saw, read whole through that descriptor, hashed and written.
   */
  private smallSync(name: string, src: string, part: string, e: IncomingEntry, seen: NonNullable<IncomingEntry['localStat']>, sourceError: (err: unknown) => StagingError): Written {
    this.check();
    let fd: number;
    try {
      fd = fs.openSync(src, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
    } catch (err) {
      if (errnoCode(err) === 'ELOOP') throw changedSourceError(src);
      throw sourceError(err);
    }
    let data: Buffer;
    try {
      const st = fs.fstatSync(fd);
      if (!st.isFile() || st.dev !== seen.dev || st.ino !== seen.ino || st.size > SMALL_SYNC_MAX) throw changedSourceError(src);
      // One byte more than its size: a file that grew since is read to its end and still told.
      const buf = Buffer.allocUnsafe(st.size + 1);
      let n = 0;
      for (let got = -1; got !== 0 && n < buf.length; n += got) got = fs.readSync(fd, buf, n, buf.length - n, n);
      if (n > st.size) throw changedSourceError(src);
      data = buf.subarray(0, n);
    } catch (err) {
      throw isStagingError(err) ? err : sourceError(err);
    } finally {
      fs.closeSync(fd);
    }
    return this.writeRead(name, part, data, e);
  }

  /** Copies through the open `input`, at explicit offsets: a hash worker reads the same descriptor. */
  private async chunks(input: fs.promises.FileHandle, part: string, e: IncomingEntry, onCopied: (n: number) => void): Promise<void> {
    let output: fs.promises.FileHandle | undefined;
    try {
      output = await fs.promises.open(part, 'wx');
      const buf = Buffer.allocUnsafe(CHUNK);
      for (let position = 0; ; ) {
        this.check();
        const { bytesRead } = await input.read(buf, 0, CHUNK, position);
        if (bytesRead === 0) break;
        position += bytesRead;
        this.budget.count(bytesRead, e.source);
        await output.write(buf, 0, bytesRead);
        onCopied(bytesRead);
      }
    } finally {
      await output?.close().catch(() => undefined);
    }
  }

  /** Content from a stream (an archive's entry, a download): counted and hashed as it passes. */
  async stream(name: string, content: Readable, part: string, e: IncomingEntry): Promise<Written> {
    const hash = crypto.createHash('sha256');
    let size = 0;
    const total = e.size;
    const meter = new Transform({
      transform: (chunk: Buffer, _enc, done) => {
        try {
          this.budget.count(chunk.length, e.source);
        } catch (err) {
          return done(err as Error);
        }
        hash.update(chunk);
        size += chunk.length;
        this.progress.update(name, size, total);
        done(null, chunk);
      },
    });
    const out = fs.createWriteStream(part, { flags: 'wx' });
    let writeError: unknown;
    out.once('error', (err) => (writeError = err));
    try {
      await pipeline(content, meter, out, { signal: this.signal });
    } catch (err) {
      if (this.signal.aborted) throw this.signal.reason;
      if (isStagingError(err)) throw err;
      // Writing failed (a full disk, permissions): the area's problem, not the source's.
      if (writeError !== undefined) throw asStagingError(writeError, `write ${name} into`, this.dir);
      throw new StagingError('ESOURCE', `Could not stage ${e.name} from ${e.source}: ${(err as Error).message}.`, { cause: err });
    }
    return { size, sha256: hash.digest('hex') };
  }
}

/**
 * Opens the local source file `src` once, without following a link in its place and without
 * waiting on a FIFO, and checks that it is a regular file and the one the source saw (`seen`).
 */
async function openChecked(
  src: string,
  seen: IncomingEntry['localStat'],
  sourceError: (err: unknown) => StagingError,
): Promise<{ handle: fs.promises.FileHandle; st: fs.Stats }> {
  let handle: fs.promises.FileHandle;
  try {
    handle = await fs.promises.open(src, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (err) {
    // A link where the file was: exchanged since the source saw it.
    if (errnoCode(err) === 'ELOOP') throw changedSourceError(src);
    throw sourceError(err);
  }
  try {
    const st = await handle.stat();
    if (!st.isFile() || (seen !== undefined && (st.dev !== seen.dev || st.ino !== seen.ino))) throw changedSourceError(src);
    return { handle, st };
  } catch (err) {
    await handle.close().catch(() => undefined);
    throw isStagingError(err) ? err : sourceError(err);
  }
}

/** `p`, or the signal's reason as soon as it aborts (a worker mid-file is stopped separately). */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

export async function hashFile(p: string): Promise<Written> {
  const hash = crypto.createHash('sha256');
  let size = 0;
  for await (const chunk of fs.createReadStream(p, { highWaterMark: CHUNK })) {
    hash.update(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return { size, sha256: hash.digest('hex') };
}
