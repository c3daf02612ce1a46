/**
 * Copying an artifact's content into its place in the work directory, hashing exactly what was
 * written, and counting it against the call's size limit.
 */
import * as crypto from 'crypto';
import * as fs from 'fs';
import { type Readable } from 'stream';
import { StagingError, asStagingError, isStagingError } from '../base/errors';
import { callsFor } from '../fs/calls';
import { changedSourceError } from './sources/errors';
import { CopyFailure, CopyPool, SMALL_MAX, type CopyTask } from './pool';
import { limitOf, sizeLimit, type SizeLimit } from './space';
import type { Progress } from './progress';
import type { IncomingEntry, TreeSize } from './types';

/** Streams and files hashed again are read in chunks of this size. */
const CHUNK = 4 * 1024 * 1024;

export interface Written {
  size: number;
  sha256: string;
  /** The copy's inode, where known: the commit moves it only if it is still that file. */
  ino?: number;
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
  /** Workers that copy and hash local files (pool.ts); started on the first one. */
  private pool?: CopyPool;
  private readonly onAbort = (): void => this.pool?.stop(this.signal.reason as Error);
  private readonly measured = new Map<string, Promise<TreeSize | undefined>>();

  /**
   * @param sync whether the work directory is on a local filesystem, where streamed content is
   *   written with synchronous calls (microseconds each) rather than through the thread pool (a
   *   round trip each, and an archive of thousands of small files waits for every one in turn)
   */
  constructor(
    private readonly dir: string,
    private readonly signal: AbortSignal,
    private readonly budget: Budget,
    private readonly progress: Progress,
    private readonly sync = false,
  ) {
    signal.addEventListener('abort', this.onAbort, { once: true });
  }

  private get workers(): CopyPool {
    this.pool ??= new CopyPool();
    if (this.signal.aborted) this.onAbort();
    return this.pool;
  }

  /** Ends the workers: once it resolves, nothing of this call is being written any more. */
  async close(): Promise<void> {
    this.signal.removeEventListener('abort', this.onAbort);
    await this.pool?.close();
  }

  private check(): void {
    if (this.signal.aborted) throw this.signal.reason;
  }

  /** What is below the local directory `dir` (see pool.ts), undefined if unknown; measured once, asked for its bytes and its artifacts. */
  measure(dir: string): Promise<TreeSize | undefined> {
    let measured = this.measured.get(dir);
    if (measured === undefined) {
      measured = this.workers.measure([dir]).catch(() => undefined);
      this.measured.set(dir, measured);
    }
    return measured;
  }

  /**
   * A local file, opened once by a worker: everything copied and hashed is read through that
   * descriptor, and it must be the regular file the source saw (device and inode), so that nothing
   * exchanged for it since (a link to another file, a FIFO) is ever read. Each chunk is read once,
   * hashed and written to `dest`, which is created and never replaced. A large file whose inode,
   * size or mtime moved between the source's look at it and the end of the copy is refused, so
   * the hash is the copy's; a small one is read whole at once.
   */
  async local(name: string, src: string, dest: string, e: IncomingEntry, fence?: CopyTask['fence']): Promise<Written> {
    this.check();
    const seen = e.localStat;
    const size = e.size ?? seen?.size ?? 0;
    // Counted before a byte is copied: several files are copied at once, and each must see the others' bytes.
    this.budget.count(size, e.source);
    const large = size > SMALL_MAX;
    let copied;
    try {
      copied = await this.workers.copy(
        { src, dest, size, ...(seen !== undefined ? { seen } : {}), ...(fence !== undefined ? { fence } : {}) },
        large ? (n) => this.progress.update(name, n, size) : undefined,
      );
    } catch (err) {
      if (this.signal.aborted) throw this.signal.reason;
      throw this.failure(err, name, src);
    }
    if (copied.size !== size) this.budget.count(copied.size - size, e.source);
    if (large && seen !== undefined) {
      // Once more, now that the copy is in: a change made while its progress was being told is
      // seen here, however soon after the worker's last look it came.
      const now = await fs.promises.lstat(src).catch(() => undefined);
      if (now === undefined || now.ino !== copied.end.ino || now.size !== copied.end.size || now.mtimeMs !== copied.end.mtimeMs) throw changedSourceError(src);
    }
    this.progress.update(name, copied.size, copied.size);
    return { size: copied.size, sha256: copied.sha256, ino: copied.ino };
  }

  /** The staging error for a failed copy of `src` as `name`. */
  private failure(err: unknown, name: string, src: string): StagingError {
    if (isStagingError(err)) return err;
    if (!(err instanceof CopyFailure)) return asStagingError(err, `copy ${src} into`, this.dir);
    switch (err.side) {
      case 'changed':
        return changedSourceError(src);
      case 'source':
        return new StagingError('ESOURCE', `Cannot read ${src}: ${err.message}.`, { path: src, cause: err.cause });
      case 'dest':
        return asStagingError(err.cause ?? err, `write ${name} into`, this.dir);
      case 'lost':
        return new StagingError('ECOMPROMISED', `Lost the lock on ${this.dir} while staging; nothing of this staging was kept.`, { path: this.dir });
      default:
        return new StagingError('ECANCELED', `Staging into ${this.dir} was stopped; nothing it wrote was kept.`, { path: this.dir });
    }
  }

  /**
   * Content from a stream (an archive's entry, a download): each chunk, as it comes, counted,
   * hashed and written into `part`, which is created and never replaced. The same bytes are hashed
   * and written, in the same order, whichever calls write them (`sync`: see the constructor).
   */
  async stream(name: string, content: Readable, part: string, e: IncomingEntry): Promise<Written> {
    const calls = callsFor(this.sync);
    let fd: number;
    try {
      this.check();
      fd = await calls.open(part, WRITE_NEW, 0o666);
    } catch (err) {
      content.destroy();
      if (this.signal.aborted) throw this.signal.reason;
      throw asStagingError(err, `write ${name} into`, this.dir);
    }
    const hash = crypto.createHash('sha256');
    let size = 0;
    const total = e.size;
    let ino: number;
    try {
      // Breaking out of the loop (a throw) destroys the content, which skips the rest of its entry.
      for await (const chunk of content as AsyncIterable<Buffer>) {
        this.check();
        this.budget.count(chunk.length, e.source);
        hash.update(chunk);
        try {
          for (let off = 0; off < chunk.length; ) off += await calls.write(fd, chunk, off, chunk.length - off);
        } catch (err) {
          throw new WriteFailure(err);
        }
        size += chunk.length;
        this.progress.update(name, size, total);
      }
      ino = (await calls.fstat(fd)).ino;
    } catch (err) {
      // Failed already: what a close says now adds nothing.
      await calls.close(fd).catch(() => undefined);
      if (this.signal.aborted) throw this.signal.reason;
      if (isStagingError(err)) throw err;
      if (err instanceof WriteFailure) throw asStagingError(err.cause, `write ${name} into`, this.dir);
      throw this.sourceFailure(e, err);
    }
    try {
      // A network filesystem may report a failed write only here.
      await calls.close(fd);
    } catch (err) {
      throw asStagingError(err, `write ${name} into`, this.dir);
    }
    return { size, sha256: hash.digest('hex'), ino };
  }

  private sourceFailure(e: IncomingEntry, err: unknown): StagingError {
    return new StagingError('ESOURCE', `Could not stage ${e.name} from ${e.source}: ${(err as Error).message}.`, { cause: err });
  }
}

/** A part is created, never opened through a link or over anything already there. */
const WRITE_NEW = fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW;

/** A write into the work directory failed: the area's problem, not the source's. */
class WriteFailure extends Error {
  constructor(override readonly cause: unknown) {
    super('write failed');
  }
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
