/**
 * What belongs to this window: locks it holds (taken for the window) and the stagings it is
 * running, with their progress. Known only from this window's own leases (their lock instances'
 * tokens) and stagings, never from what a lock's record says (a co-user can write any client id,
 * any name, into a record of their own); whether a lock is still this window's is derived, each
 * time it is asked, from the window's lease and what the disk last showed.
 */
import { Emitter, keyOf, type AreaRef, type Disposable, type LockInfo, type Owner } from '../../core';

export interface Staging {
  /** 0..1 where the total is known (a folder, a download with Content-Length). */
  fraction?: number;
}

/** A lease of this window: its lock's token, and when it was taken (Date.now()). */
export interface WindowLease {
  token: string;
  since: number;
}

/** This window's place in an area's line, while it waits for the lock. */
export interface InLine {
  /** 1: next to take it. */
  position: number;
  waiting: number;
}

/** An area with what the model last saw of its lock, and when it looked (Date.now()). */
export type Seen = AreaRef & { lock?: LockInfo | undefined; judgedAt?: number };

/**
 * Whether the disk leaves a lease's lock this window's: a judgement made after the lease was
 * taken must show the lease's own lock (held, or stale while its heartbeat is late); one made
 * before cannot know of it. A lock force-released, taken over, destroyed or gone with its
 * filesystem stops being this window's as soon as the model sees it, whatever the lease knows.
 */
export function onDisk(lease: WindowLease, seen: Seen): boolean {
  if (seen.lock === undefined || seen.judgedAt === undefined || seen.judgedAt < lease.since) return true;
  return seen.lock.state !== 'free' && seen.lock.holder?.token === lease.token;
}

export class Mine implements Disposable, Owner {
  private changes = 0;
  private readonly stagings = new Map<string, { ref: AreaRef; s: Staging }>();
  private readonly _onDidChange = new Emitter<AreaRef>();
  /** Fires with the area whose lease, place in line or staging changed. */
  readonly onDidChange = this._onDidChange.event;

  constructor(
    /** This window's lease on an area, if it holds one. */
    private readonly leaseOf: (staticDir: string, tag: string) => WindowLease | undefined,
    /** The areas whose locks this window holds. */
    private readonly held: () => Iterable<AreaRef> = () => [],
    private readonly placeOf: (staticDir: string, tag: string) => InLine | undefined = () => undefined,
  ) {}

  /**
   * The areas this window holds or stages into, as it knows them: some may not show as locked
   * in the model yet (its watcher has not seen the lock), so counts ask about these too.
   */
  refs(): AreaRef[] {
    return [...[...this.stagings.values()].map((v) => v.ref), ...this.held()];
  }

  /** Grows with every change of what is this window's: the model's counts are kept until it does. */
  get version(): number {
    return this.changes;
  }

  /** Whether the area's lock is this window's (see `onDisk`), or this window is staging into it. */
  has(area: Seen): boolean {
    if (this.stagings.has(keyOf(area.staticDir, area.tag))) return true;
    const lease = this.leaseOf(area.staticDir, area.tag);
    return lease !== undefined && onDisk(lease, area);
  }

  /** This window's place in the area's line, while it waits for its lock. */
  inLine(ref: AreaRef): InLine | undefined {
    return this.placeOf(ref.staticDir, ref.tag);
  }

  staging(ref: AreaRef): Staging | undefined {
    return this.stagings.get(keyOf(ref.staticDir, ref.tag))?.s;
  }

  get stagingCount(): number {
    return this.stagings.size;
  }

  /** Runs a staging into `ref`, known as this window's while it runs. */
  async track<T>(ref: AreaRef, work: (report: (fraction: number | undefined) => void) => Promise<T>): Promise<T> {
    const key = keyOf(ref.staticDir, ref.tag);
    const s: Staging = {};
    const entry = { ref: { staticDir: ref.staticDir, tag: ref.tag }, s };
    this.stagings.set(key, entry);
    this.changed(ref);
    let shown = -1;
    const report = (fraction: number | undefined): void => {
      if (fraction === undefined) return;
      s.fraction = fraction;
      // Whole percents only: a row redrawn per chunk would cost more than the copy.
      const pct = Math.floor(fraction * 100);
      if (pct !== shown) {
        shown = pct;
        this.changed(ref);
      }
    };
    try {
      return await work(report);
    } finally {
      if (this.stagings.get(key) === entry) this.stagings.delete(key);
      this.changed(ref);
    }
  }

  /** This window took, let go or lost the lock of `ref`, or its place in that lock's line. */
  locksChanged(ref: AreaRef): void {
    this.changed(ref);
  }

  private changed(ref: AreaRef): void {
    this.changes++;
    this._onDidChange.fire(ref);
  }

  dispose(): void {
    this._onDidChange.dispose();
  }
}
