/**
 * Watch events turned into work for the model: what each event means for an area (a look at its
 * lock's identity, a judgement, a listing), gathered for a moment so that a burst of events is one
 * piece of work, and handed back to be run.
 */
import { BUILD_MARKS, LOCK_NAME, isProtocolName } from '../base/protocol';
import { keyOf, parentTag, type AreaKind, type AreaRef } from './records';
import type { WatchEvent } from './watcher';

/** What an area needs after events: a look at its lock's identity, a judgement, a listing. */
export interface Pending extends AreaRef {
  probe: boolean;
  lock: boolean;
  children: boolean;
}

/** Lock events in one directory within this window count as one. */
const SETTLE_MS = 15;
/**
 * Files coming and going (a build being staged) are gathered for longer: each listing reads every
 * file's size, and a staging of thousands of files must not turn into thousands of listings.
 */
const SETTLE_LISTING_MS = 200;

export class PendingWork {
  private readonly pending = new Map<string, Pending>();
  private settleTimer: NodeJS.Timeout | undefined;
  private listingTimer: NodeJS.Timeout | undefined;

  /** `kindOf` and `isListed` say what the model knows of an area (by key); `run` does one area's work. */
  constructor(
    private readonly kindOf: (key: string) => AreaKind | undefined,
    private readonly isListed: (key: string) => boolean,
    private readonly run: (p: Pending) => void,
  ) {}

  onWatchEvent(e: WatchEvent<AreaRef>): void {
    const ref = e.data;
    const kind = this.kindOf(keyOf(ref.staticDir, ref.tag));
    if (e.name === LOCK_NAME) {
      // Taken, released, or only a heartbeat: inotify reports a directory's utimes like a
      // rename, so a look at the lock's identity tells which before any real work is done.
      if (ref.tag !== '') this.mark(ref, { probe: true });
      return;
    }
    // Writes into files (artifacts being staged) change no lock state and no listing.
    if (e.kind === 'change') return;
    if (e.name !== null && ref.tag !== '' && kind === 'folder' && BUILD_MARKS.includes(e.name)) {
      // A folder gained a manifest or timestamp: it is a build now, which its parent's listing tells.
      this.mark({ staticDir: ref.staticDir, tag: parentTag(ref.tag) }, { children: true });
      return;
    }
    if (e.name !== null && isProtocolName(e.name)) {
      // Claims of a takeover, legacy lock files: the lock itself may have changed.
      if (ref.tag !== '') this.mark(ref, { lock: true });
      return;
    }
    const listed = this.isListed(keyOf(ref.staticDir, ref.tag));
    this.mark(ref, { lock: e.name === null && ref.tag !== '', children: listed || e.name === null });
  }

  mark(ref: AreaRef, what: Partial<Pending>): void {
    if (what.lock !== true && what.children !== true && what.probe !== true) return;
    const key = keyOf(ref.staticDir, ref.tag);
    const p = this.pending.get(key) ?? { staticDir: ref.staticDir, tag: ref.tag, lock: false, children: false, probe: false };
    p.lock ||= what.lock === true;
    p.children ||= what.children === true;
    p.probe ||= what.probe === true;
    this.pending.set(key, p);
    if (this.waitsLonger(p)) this.listingTimer ??= setTimeout(() => this.flush(true), SETTLE_LISTING_MS);
    else this.settleTimer ??= setTimeout(() => this.flush(false), SETTLE_MS);
  }

  /**
   * Whether pending work may wait the longer settle time: only a listing of a build's files (a
   * build being staged). A lock, or a folder gaining a build, is news to show at once.
   */
  private waitsLonger(p: Pending): boolean {
    return !p.lock && !p.probe && this.kindOf(keyOf(p.staticDir, p.tag)) === 'build';
  }

  /** Runs what is pending: everything, or (`listingsOnly`) just what waits the longer time. */
  private flush(listingsOnly: boolean): void {
    if (listingsOnly) this.listingTimer = undefined;
    else this.settleTimer = undefined;
    const jobs = [...this.pending.values()].filter((p) => !listingsOnly || this.waitsLonger(p));
    for (const p of jobs) this.pending.delete(keyOf(p.staticDir, p.tag));
    for (const p of jobs) this.run(p);
  }

  /** Forgets what is pending (a reset). */
  clear(): void {
    this.pending.clear();
  }

  dispose(): void {
    clearTimeout(this.settleTimer);
    clearTimeout(this.listingTimer);
  }
}
