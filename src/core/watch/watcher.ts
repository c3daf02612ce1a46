/**
 * Where news of other processes' locks comes in: one inotify watch (Node's `fs.watch`) per
 * directory the tree shows. VS Code's own file watcher is not used for this: it waits 75 ms
 * before delivering anything, loses every event inside a tree made with `mkdir -p` while it runs
 * (a newly staged build is exactly that), and is dropped for folders inside the workspace.
 */
import * as fs from 'fs';
import type { Disposable } from './emitter';
import { fsPath } from '../base/rawNames';
import { pause } from '../base/slices';

/** `data`: what the directory was watched with (the model's area for it). */
export type WatchEvent<T> = { dir: string; data: T; name: string | null; kind: 'rename' | 'change' };

/** Where the model's watches are kept: in this thread (`DirectoryWatcher`) or another (threadWatcher.ts). */
export interface Watcher<T> extends Disposable {
  /**
   * Starts watching `dir` unless it is already watched (then `data` replaces what it was
   * watched with). False if it could not be watched; a watcher that learns of that later tells
   * its `onError` instead.
   */
  watch(dir: string, data: T): boolean;
  unwatch(dir: string): void;
  /** Stops every watch; the watcher stays usable. */
  unwatchAll(): void;
  /** Resolves once every watch asked for so far is in place: a change made after it is seen. */
  ready(): Promise<void>;
  /** Gets ready to watch before the first watch is asked for (a thread starts meanwhile). */
  prepare(): void;
}

/**
 * The code of the error a watcher gives `onError` when the thread its watches were kept in has
 * stopped and they are kept in this one instead: nothing is unwatched, unlike for other errors.
 */
export const WATCH_THREAD_STOPPED = 'EWATCHTHREAD';

/** Makes the model's watcher: the seam where the extension puts its watches in a thread of their own. */
export type WatcherFactory = <T>(onEvent: (e: WatchEvent<T>) => void, onError: (dir: string, err: unknown) => void) => Watcher<T>;

/** A watch knows its directory and data itself: one shared listener serves them all. */
type Watch<T> = fs.FSWatcher & { dir: string; data: T; owner: DirectoryWatcher<T> | undefined };

export class DirectoryWatcher<T> implements Watcher<T> {
  private watchers = new Map<string, Watch<T>>();
  private failedOnce = false;

  /** `onDrop`: a watch that failed after it started (its directory went) and was let go. */
  constructor(
    private readonly onEvent: (e: WatchEvent<T>) => void,
    private readonly onError: (dir: string, err: unknown) => void,
    private readonly onDrop?: (dir: string) => void,
  ) {}

  /**
   * Starts watching `dir` unless it is already watched (then `data` replaces what it was
   * watched with). False if it could not be watched.
   */
  watch(dir: string, data: T): boolean {
    const known = this.watchers.get(dir);
    if (known !== undefined) {
      known.data = data;
      return true;
    }
    let w: Watch<T>;
    try {
      // A directory whose name is not UTF-8 is watched by its bytes (rawNames.ts).
      w = fs.watch(fsPath(dir), { persistent: false }, onChange) as Watch<T>;
    } catch (err) {
      // ENOSPC here means the inotify watch limit; the rest of the tree still works, only
      // without live updates for this directory.
      if (!this.failedOnce) this.onError(dir, err);
      this.failedOnce = true;
      return false;
    }
    w.dir = dir;
    w.data = data;
    w.owner = this;
    w.on('error', onError);
    this.watchers.set(dir, w);
    return true;
  }

  unwatch(dir: string): void {
    const w = this.watchers.get(dir);
    if (w === undefined) return;
    w.owner = undefined;
    w.close();
    this.watchers.delete(dir);
  }

  /** A watch that failed: let go, as its directory is no longer there to watch. */
  drop(w: Watch<T>): void {
    this.unwatch(w.dir);
    this.onDrop?.(w.dir);
  }

  ready(): Promise<void> {
    // fs.watch has added the inotify watch before it returns.
    return Promise.resolve();
  }

  prepare(): void {
    // Nothing to start: the watches are made in this thread.
  }

  unwatchAll(): void {
    this.dispose();
  }

  /** What a watch reports, as long as it is this watcher's. */
  report(w: Watch<T>, kind: string, name: string | Buffer | null): void {
    this.onEvent({ dir: w.dir, data: w.data, name: name === null ? null : String(name), kind: kind === 'change' ? 'change' : 'rename' });
  }

  /**
   * Stops every watch. They are closed in slices (slices.ts), 100,000 of them at once would hold
   * the event loop for a second; none reports anything from now on. The watcher stays usable.
   */
  dispose(): void {
    const old = this.watchers;
    this.watchers = new Map();
    for (const w of old.values()) w.owner = undefined;
    void (async () => {
      let n = 0;
      for (const w of old.values()) {
        w.close();
        if (++n % 256 === 0) {
          const p = pause();
          if (p !== undefined) await p;
        }
      }
    })();
  }
}

// Shared by every watch, each called with the watch as `this`: a pair of closures for each of
// 100,000 directories would cost more than the model's record of them.
function onChange(this: Watch<unknown>, kind: string, name: string | Buffer | null): void {
  // A watch closed, or being closed after `dispose`, reports nothing.
  this.owner?.report(this, kind, name);
}

function onError(this: Watch<unknown>): void {
  const owner = this.owner;
  if (owner !== undefined) owner.drop(this);
  else this.close();
}

/** The watches in this thread: what the command line and the library use. */
export const inThreadWatcher: WatcherFactory = (onEvent, onError) => new DirectoryWatcher(onEvent, onError);
