/**
 * SHA-256 of local files in worker threads. Hashing every staged byte on the main thread made
 * staging a directory CPU-bound at about a third of `cp -r`'s speed; in workers it runs beside the
 * copy (which the kernel does), and the main thread stays free for the editor. What a worker
 * runs is hashWorker.ts, its messages hashProtocol.ts.
 */
import * as os from 'os';
import { StagingError } from '../base/errors';
import { startThread, workerFile, type Thread } from '../base/threads';
import type { FileIdentity, HashJob, HashReply } from './hashProtocol';

/** Where the build puts the worker (base/threads.ts). */
const WORKER_SCRIPT = workerFile(__dirname, 'hashWorker');

/**
 * A hashing thread that failed to start or stopped: the tool's own fault (a damaged installation,
 * the worker file missing), never the file's. Callers rethrow it rather than report the file.
 */
export class HashThreadFailed extends StagingError {
  constructor(why: string, cause?: unknown) {
    super('EIO', `A hashing thread of this tool stopped (${why}): its installation may be damaged; reinstall it.`, cause !== undefined ? { cause } : {});
  }
}

export interface FileDigest {
  size: number;
  sha256: string;
  opened: FileIdentity;
}

export class FileHasher {
  private readonly workers: Thread<HashJob>[] = [];
  private readonly pending = new Map<
    number,
    { resolve: (r: FileDigest) => void; reject: (e: Error) => void; onProgress?: (bytes: number) => void }
  >();
  private nextId = 0;
  private turn = 0;
  private closed = false;

  /** Two workers where there are two cores or more: one per core beside the main thread's I/O. */
  constructor(private readonly size = Math.max(1, Math.min(2, os.cpus().length))) {}

  /**
   * The size and SHA-256 of the file open as `fd`; `onProgress` hears bytes hashed so far, now
   * and then. The caller keeps `fd` open until this settles. `limit`: read no more than this many
   * bytes (the size and hash are then of those), for a file that may keep growing while it is read.
   */
  hash(fd: number, onProgress?: (bytes: number) => void, limit = Number.MAX_SAFE_INTEGER): Promise<FileDigest> {
    if (this.closed) return Promise.reject(new Error('the hasher was closed'));
    if (this.workers.length < this.size) this.spawn();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, onProgress === undefined ? { resolve, reject } : { resolve, reject, onProgress });
      this.workers[this.turn++ % this.workers.length].postMessage({ id, fd, limit });
    });
  }

  private spawn(): void {
    const w = startThread<HashJob, HashReply>(WORKER_SCRIPT, (r) => {
      const p = this.pending.get(r.id);
      if (p === undefined) return;
      if ('progress' in r) {
        p.onProgress?.(r.progress);
        return;
      }
      this.pending.delete(r.id);
      if ('error' in r) p.reject(Object.assign(new Error(r.error), r.code !== undefined ? { code: r.code } : {}));
      else {
        p.onProgress?.(r.size);
        p.resolve({ size: r.size, sha256: r.sha256, opened: r.opened });
      }
    });
    w.on('error', (err) => this.failAll(new HashThreadFailed(err.message, err)));
    // A thread that ends on its own (not closed by us) would leave its hashes waiting for ever.
    w.on('exit', (code) => {
      if (this.closed) return;
      const at = this.workers.indexOf(w);
      if (at >= 0) this.workers.splice(at, 1);
      this.failAll(new HashThreadFailed(`exit ${code}`));
    });
    // Not unref'd: while a hash is awaited the worker may be all that keeps the process alive
    // (a command-line staging would exit silently). The stager closes them when it is done.
    this.workers.push(w);
  }

  private failAll(err: Error): void {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }

  /**
   * Stops the workers, even mid-file: a cancelled staging must not keep reading. Hashes still
   * pending fail only once the workers are gone, since their callers then close the descriptors.
   */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.workers.map((w) => w.terminate()));
    this.workers.length = 0;
    this.failAll(new Error('the hasher was closed'));
  }
}
