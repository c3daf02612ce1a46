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

/**
 * The news of one turn of the watches' thread, each different event once: the model only notes
 * that a directory changed (and how), so a burst of the same event (a co-user's loop touching one
 * file) crosses to it once, and what waits to cross stays as small as the set of names touched.
 */
export class NewsBatch {
  private readonly seen = new Set<string>();
  readonly events: WatchNews[] = [];

  add(e: WatchNews): void {
    const key = `${e.kind}\0${e.dir}\0${e.name ?? '\0'}`;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    this.events.push(e);
  }
}
