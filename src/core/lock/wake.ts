/**
 * Waking a waiter when what it waits on changes, rather than on a timer: inotify (through
 * `fs.watch`) on the directories whose entries change when a lock is released or taken (the area:
 * its `devserver.lock` entry) and when someone joins or leaves the line (the queue). A release on
 * this machine is heard at once. The kernel only reports what happens on this machine, so the
 * caller also sleeps with a timeout: short on a network filesystem, where other hosts' changes make
 * no event, long on a local one, in case an event is missed.
 */
import * as fs from 'fs';

export class Alarm {
  private readonly watchers = new Map<string, fs.FSWatcher>();
  /** An event came since the last sleep returned: the next sleep returns at once. */
  private rung = false;
  private wakeUp: (() => void) | undefined;

  /**
   * Watches the directory `dir` under `key` (replacing an earlier watch under that key). Only
   * entries for which `relevant(name)` holds wake the sleeper; an unnamed event always does.
   * False where the kernel refuses (out of watches, an unsupported filesystem): then only the
   * timeout wakes.
   */
  watch(key: string, dir: string, relevant: (name: string) => boolean = () => true): boolean {
    this.unwatch(key);
    let watcher: fs.FSWatcher;
    try {
      watcher = fs.watch(dir, { persistent: false }, (_event, name) => {
        if (name === null || relevant(String(name))) this.ring();
      });
    } catch {
      return false;
    }
    // The directory was removed or the watch failed: wake, so the sleeper looks (and watches again).
    watcher.on('error', () => {
      this.unwatch(key);
      this.ring();
    });
    this.watchers.set(key, watcher);
    return true;
  }

  watching(key: string): boolean {
    return this.watchers.has(key);
  }

  unwatch(key: string): void {
    const w = this.watchers.get(key);
    if (w === undefined) return;
    this.watchers.delete(key);
    w.close();
  }

  /** Wakes the sleeper (or the next one). */
  ring(): void {
    this.rung = true;
    const wake = this.wakeUp;
    this.wakeUp = undefined;
    wake?.();
  }

  /**
   * Resolves at the first event since the previous sleep returned, or after `ms`; rejects with the
   * signal's reason when it aborts.
   */
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted === true) return reject(signal.reason);
      if (this.rung || ms <= 0) {
        this.rung = false;
        return resolve();
      }
      const done = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.wakeUp = undefined;
        this.rung = false;
      };
      const onAbort = (): void => {
        done();
        reject(signal!.reason);
      };
      const timer = setTimeout(() => {
        done();
        resolve();
      }, ms);
      this.wakeUp = () => {
        done();
        resolve();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  close(): void {
    for (const key of [...this.watchers.keys()]) this.unwatch(key);
    this.wakeUp = undefined;
  }
}
