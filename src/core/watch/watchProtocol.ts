/**
 * The messages between the model's thread and the thread that holds its watches
 * (threadWatcher.ts, watchWorker.ts). Plain data, cloned by `postMessage`.
 */

/** To the watches' thread, in order: `+dir` watch, `-dir` unwatch; `clear` first; then `sync`. */
export interface ToWatches {
  clear?: true;
  ops: string[];
  /** Answered with `synced` once every op before it is done. */
  sync?: number;
}

export interface WatchNews {
  dir: string;
  name: string | null;
  kind: 'rename' | 'change';
}

/** From the watches' thread: news of watched directories, failures, and answers to `sync`. */
export type FromWatches =
  | { events: WatchNews[] }
  | { failed: { dir: string; message: string; code?: string } }
  | { dropped: string }
  | { synced: number };
