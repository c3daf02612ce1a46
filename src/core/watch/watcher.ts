/**
 * Where news of other processes' locks comes in: one inotify watch (Node's `fs.watch`) per
 * directory the tree shows. VS Code's own file watcher is not used for this: it waits 75 ms
 * before delivering anything, loses every event inside a tree made with `mkdir -p` while it runs
 * (a newly staged build is exactly that), and is dropped for folders inside the workspace.
 */
import * as fs from 'fs';
import type { Disposable } from './emitter';

export type WatchEvent = { dir: string; name: string | null; kind: 'rename' | 'change' };

export class DirectoryWatcher implements Disposable {
  private readonly watchers = new Map<string, fs.FSWatcher>();
  private failedOnce = false;

  constructor(
    private readonly onEvent: (e: WatchEvent) => void,
    private readonly onError: (dir: string, err: unknown) => void,
  ) {}

  /** Starts watching `dir` unless it is already watched. False if it could not be watched. */
  watch(dir: string): boolean {
    if (this.watchers.has(dir)) return true;
    let w: fs.FSWatcher;
    try {
      w = fs.watch(dir, { persistent: false }, (kind, name) => {
        this.onEvent({ dir, name: name === null ? null : String(name), kind: kind === 'change' ? 'change' : 'rename' });
      });
    } catch (err) {
      // ENOSPC here means the inotify watch limit; the rest of the tree still works, only
      // without live updates for this directory.
      if (!this.failedOnce) this.onError(dir, err);
      this.failedOnce = true;
      return false;
    }
    w.on('error', () => this.unwatch(dir));
    this.watchers.set(dir, w);
    return true;
  }

  unwatch(dir: string): void {
    this.watchers.get(dir)?.close();
    this.watchers.delete(dir);
  }

  /** Stops watching `dir` and everything below it. */
  unwatchTree(dir: string): void {
    for (const d of [...this.watchers.keys()]) if (d === dir || d.startsWith(`${dir}/`)) this.unwatch(d);
  }

  dispose(): void {
    for (const w of this.watchers.values()) w.close();
    this.watchers.clear();
  }
}
