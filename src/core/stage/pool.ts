/**
 * Copying and hashing local files in worker threads.
 *
 * Staging a build copies thousands of small files and a few large ones, and hashes every byte.
 * On the main thread each small file cost a dozen calls in sequence (open, read, create, write,
 * close, and the hash between them) and held the event loop for all of it; a large one went
 * through the thread pool chunk by chunk while another thread read it a second time to hash it.
 * Here each worker takes a file (or a batch of small ones, so that one message carries many),
 * opens it once, reads each chunk once, hashes it and writes it to its place in the work
 * directory, all with synchronous calls of microseconds: two workers copy two files at a time,
 * and the main thread only walks the source and keeps the books. What a worker runs is
 * copyWorker.ts (its messages, copyProtocol.ts); how files are handed to the workers, copyWorkers.ts.
 */
import { SMALL_MAX, type CopyJob, type FailSide, type Result } from './copyProtocol';
import { busyWith, workers, type Job } from './copyWorkers';
import type { TreeSize } from './types';

export { SMALL_MAX };

export type { Copied, CopyTask, SeenFile } from './copyTypes';
import type { Copied, CopyTask } from './copyTypes';

/**
 * Why a copy failed: `changed` (the source is not the file the walk saw, or changed while it was
 * read), `source` (reading it failed), `dest` (writing the copy failed), `stopped` (the pool was
 * stopped), `lost` (the lock no longer holds the work directory). `cause` is the system error,
 * where there was one.
 */
export class CopyFailure extends Error {
  constructor(
    readonly side: FailSide,
    override readonly cause?: NodeJS.ErrnoException,
  ) {
    super(cause?.message ?? side);
  }
}

/** Starts the copying workers ahead of a staging (they take a while to start). */
export function warmCopyWorkers(): void {
  workers().warm();
}

let pools = 0;

/** One staging call's use of the copying workers. */
export class CopyPool {
  readonly id = pools++;
  /** Set to 1 when this call stops: the workers look at it between files and chunks. */
  readonly stopFlag = new SharedArrayBuffer(4);
  private stopped?: Error;

  /** Whether it was stopped (its jobs are failed already). */
  get stopping(): boolean {
    return this.stopped !== undefined;
  }
  private drained?: () => void;

  /** Copies one file (see the module's comment); `onProgress` hears the bytes of a large one now and then. */
  copy(task: CopyTask, onProgress?: (bytes: number) => void): Promise<Copied> {
    const message: CopyJob = { id: 0, src: task.src, dest: task.dest };
    if (task.seen !== undefined) message.seen = task.seen;
    if (task.fence !== undefined) message.fence = task.fence;
    return this.submit(message, task.size > SMALL_MAX, onProgress).then((r) => {
      if ('failed' in r) {
        const cause = r.error === undefined ? undefined : Object.assign(new Error(r.error.message), r.error);
        throw new CopyFailure(r.failed, cause);
      }
      if (!('sha256' in r)) throw new CopyFailure('source');
      return { size: r.size, sha256: r.sha256, end: r.end, ino: r.ino };
    });
  }

  /** What is below the directories `dirs`, not following links (see `TreeSize`); undefined if it takes too long. */
  measure(dirs: string[]): Promise<TreeSize | undefined> {
    return this.submit({ measure: dirs }, true).then((r) => ('total' in r && r.total !== null ? r.total : undefined));
  }

  /**
   * Stops at once: what is queued or being copied fails with `reason` now, and the workers stop
   * at their next file or chunk. `close` waits until they have.
   */
  stop(reason: Error): void {
    if (this.stopped !== undefined) return;
    this.stopped = reason;
    Atomics.store(new Int32Array(this.stopFlag), 0, 1);
    workers().drop(this, reason);
  }

  /** Stops, and resolves once no worker writes anything for this call any more. */
  async close(): Promise<void> {
    this.stop(new CopyFailure('stopped'));
    if (!busyWith(this)) return;
    await new Promise<void>((resolve) => (this.drained = resolve));
  }

  /** @internal A job of this call has been answered (or its worker lost). */
  settled(): void {
    if (this.drained !== undefined && !busyWith(this)) {
      const done = this.drained;
      this.drained = undefined;
      done();
    }
  }

  private submit(message: Job['message'], large: boolean, onProgress?: (bytes: number) => void): Promise<Result> {
    if (this.stopped !== undefined) return Promise.reject(this.stopped);
    return workers().submit(this, message, large, onProgress);
  }
}
