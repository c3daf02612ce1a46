/**
 * The model's watches kept in a worker thread of their own. In the extension host, 100,000 builds
 * mean 100,000 `fs.watch` handles, each about 470 bytes of JavaScript heap: made on the host's
 * thread, they were half of what its young-generation collections had to copy while a large
 * static directory was first listed (those collections were the longest pauses of the scan: see
 * bench/README.md), and their making was a large share of the scan's CPU there. In a worker they live
 * in another heap, collected without stopping the host, and this thread keeps a map from each
 * watched directory to its data.
 *
 * Requests are sent in batches (one message per turn of work, however many watches it asks for),
 * and news comes back in batches. `ready()` resolves once the worker has made every watch asked
 * for before it: the model waits for that before it lists a directory, as it does with watches
 * made in its own thread, so that no change between the two is lost.
 *
 * If the worker cannot start or stops, the watches are made in this thread instead
 * (`DirectoryWatcher`), and `onError` says so once.
 */
import { pause } from '../base/slices';
import { startThread, workerFile, type Thread } from '../base/threads';
import { DirectoryWatcher, WATCH_THREAD_STOPPED, type WatchEvent, type Watcher, type WatcherFactory } from './watcher';
import type { FromWatches, ToWatches } from './watchProtocol';

/** Where the build puts the worker (base/threads.ts). */
const WORKER_SCRIPT = workerFile(__dirname, 'watchWorker');

export class ThreadWatcher<T> implements Watcher<T> {
  private readonly data = new Map<string, T>();
  private worker: Thread<ToWatches> | undefined;
  /** Set once the worker has failed: the watches are in this thread from then on. */
  private here: DirectoryWatcher<T> | undefined;
  /** After a failure: the watches still to be made again here, and when they all are. */
  private readonly rewatching = new Map<string, T>();
  private rewatched: Promise<void> = Promise.resolve();
  private batch: ToWatches | undefined;
  private readonly syncs = new Map<number, () => void>();
  private nextSync = 0;
  private disposed = false;

  constructor(
    private readonly onEvent: (e: WatchEvent<T>) => void,
    private readonly onError: (dir: string, err: unknown) => void,
    private readonly script = WORKER_SCRIPT,
  ) {}

  watch(dir: string, data: T): boolean {
    if (this.disposed) return false;
    if (this.here !== undefined) {
      this.rewatching.delete(dir);
      return this.here.watch(dir, data);
    }
    const known = this.data.has(dir);
    this.data.set(dir, data);
    if (!known) this.request().ops.push(`+${dir}`);
    return true;
  }

  unwatch(dir: string): void {
    if (this.here !== undefined) {
      this.rewatching.delete(dir);
      return this.here.unwatch(dir);
    }
    if (!this.data.delete(dir)) return;
    this.request().ops.push(`-${dir}`);
  }

  unwatchAll(): void {
    if (this.here !== undefined) {
      this.rewatching.clear();
      return this.here.unwatchAll();
    }
    this.data.clear();
    // Whatever was asked before is undone by the clear. (No batch waits with a `sync` in it:
    // `ready()` sends its batch at once.)
    this.batch = undefined;
    if (this.worker !== undefined) this.request().clear = true;
  }

  ready(): Promise<void> {
    if (this.here !== undefined) return this.rewatched;
    if (this.worker === undefined && this.batch === undefined) return Promise.resolve();
    const id = ++this.nextSync;
    this.request().sync = id;
    this.send();
    // Someone waits for the answer: until it comes, the process must not end under them.
    this.worker?.ref();
    return new Promise((resolve) => this.syncs.set(id, resolve));
  }

  /** Starts the worker: its start then overlaps what the model does before its first watch. */
  prepare(): void {
    if (!this.disposed && this.here === undefined) this.start();
  }

  dispose(): void {
    this.disposed = true;
    this.data.clear();
    this.batch = undefined;
    this.here?.dispose();
    const worker = this.worker;
    this.worker = undefined;
    this.settleSyncs();
    // Terminating the worker closes its watches there, without this thread's help.
    if (worker !== undefined) void worker.terminate();
  }

  /** The batch being gathered, sent at the end of this turn of work. */
  private request(): ToWatches {
    if (this.batch === undefined) {
      this.batch = { ops: [] };
      queueMicrotask(() => this.send());
    }
    return this.batch;
  }

  private send(): void {
    const batch = this.batch;
    if (batch === undefined || this.disposed || this.here !== undefined) return;
    this.batch = undefined;
    this.start()?.postMessage(batch);
  }

  /** The worker, started if need be; undefined when it cannot start (the watches are then made here). */
  private start(): Thread<ToWatches> | undefined {
    if (this.worker !== undefined) return this.worker;
    let worker: Thread<ToWatches>;
    try {
      worker = startThread<ToWatches, FromWatches>(this.script, (m) => this.receive(m));
    } catch (err) {
      // No thread to be had (the system's limit on threads, say): as when one stops.
      this.watchHere(err);
      return undefined;
    }
    worker.on('error', (err) => this.fail(worker, err));
    worker.on('exit', (code) => this.fail(worker, new Error(`the watcher thread exited with code ${code}`)));
    // The watches keep nothing alive: neither the extension host nor another process waits for
    // them. (After the listeners: adding a 'message' listener refs the worker's port again.)
    worker.unref();
    this.worker = worker;
    return worker;
  }

  private receive(m: FromWatches): void {
    if (this.disposed || this.here !== undefined) return;
    if ('events' in m) {
      for (const { dir, name, kind } of m.events) {
        // A directory unwatched since is no longer of interest (as with watches in this thread).
        const data = this.data.get(dir);
        if (data !== undefined || this.data.has(dir)) this.onEvent({ dir, data: data as T, name, kind });
      }
    } else if ('failed' in m) {
      this.onError(m.failed.dir, Object.assign(new Error(m.failed.message), m.failed.code !== undefined ? { code: m.failed.code } : {}));
    } else if ('dropped' in m) {
      this.data.delete(m.dropped);
    } else {
      this.syncs.get(m.synced)?.();
      this.syncs.delete(m.synced);
      if (this.syncs.size === 0) this.worker?.unref();
    }
  }

  /** The worker could not start or stopped: its watches are made again here, in slices. */
  private fail(worker: Thread<ToWatches>, err: unknown): void {
    if (this.worker !== worker || this.disposed) return;
    this.worker = undefined;
    void worker.terminate();
    this.watchHere(err);
  }

  /** The watches made in this thread from now on, those asked for so far made again here. */
  private watchHere(err: unknown): void {
    const stopped = new Error(`The watcher thread stopped (${err instanceof Error ? err.message : String(err)}); watching in this thread instead.`);
    this.onError(this.script, Object.assign(stopped, { code: WATCH_THREAD_STOPPED }));
    const here = new DirectoryWatcher<T>(this.onEvent, this.onError);
    this.here = here;
    for (const [dir, data] of this.data) this.rewatching.set(dir, data);
    this.data.clear();
    this.batch = undefined;
    // Those waiting for `ready()` are answered once the watches are made again.
    this.rewatched = (async () => {
      let n = 0;
      for (const dir of [...this.rewatching.keys()]) {
        if (this.disposed) return;
        const data = this.rewatching.get(dir);
        // (Unwatched or watched anew meanwhile: nothing left to do for it.)
        if (!this.rewatching.delete(dir)) continue;
        here.watch(dir, data as T);
        if (++n % 256 === 0) {
          const p = pause();
          if (p !== undefined) await p;
        }
      }
    })().finally(() => this.settleSyncs());
  }

  private settleSyncs(): void {
    for (const resolve of this.syncs.values()) resolve();
    this.syncs.clear();
  }
}

/** The model's watches in a worker thread: what the extension uses. */
export const threadWatcher: WatcherFactory = (onEvent, onError) => new ThreadWatcher(onEvent, onError);
