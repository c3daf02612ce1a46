/**
 * What belongs to this window: locks it holds (taken for the window) and the stagings it is
 * running, with their progress. Known only from this window's own leases (their lock instances'
 * tokens, kept with descriptors the core checks) and stagings, never from what a lock's record
 * says: a co-user can write any client id, any name, into a record of their own.
 */
import { Emitter, keyOf, type AreaRef, type Disposable, type LockInfo } from '../core';

export interface Staging {
  /** 0..1 where the total is known (a folder, a download with Content-Length). */
  fraction?: number;
}

/** This window's lease on an area, as `Mine` needs it: the token of the lock instance it holds. */
export interface OwnLease {
  readonly holder: { readonly token: string };
}

export class Mine implements Disposable {
  private readonly stagings = new Map<string, { ref: AreaRef; s: Staging }>();
  private readonly _onDidChange = new Emitter<AreaRef | undefined>();
  /** Fires with the area whose staging started, moved on or ended; undefined when locks changed. */
  readonly onDidChange = this._onDidChange.event;

  constructor(
    /** This window's lease on an area, if it holds one. */
    private readonly leaseOf: (staticDir: string, tag: string) => OwnLease | undefined,
    /** The areas whose locks this window holds. */
    private readonly held: () => Iterable<AreaRef> = () => [],
  ) {}

  /**
   * The areas this window holds or stages into, as it knows them: some may not show as locked
   * in the model yet (its watcher has not seen the lock), so counts ask about these too.
   */
  refs(): AreaRef[] {
    return [...[...this.stagings.values()].map((v) => v.ref), ...this.held()];
  }

  /**
   * Whether this window is staging into the area, or holds a lease on it whose lock is the one
   * judged (`lock`; a lock not seen yet, judged free, counts as the lease's). A lock of another
   * instance in its place (the lease was lost, and someone took the area) is not this window's.
   */
  has(ref: AreaRef, lock?: LockInfo): boolean {
    if (this.stagings.has(keyOf(ref.staticDir, ref.tag))) return true;
    const lease = this.leaseOf(ref.staticDir, ref.tag);
    if (lease === undefined) return false;
    return lock === undefined || lock.state === 'free' || lock.holder?.token === lease.holder.token;
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
    this._onDidChange.fire(ref);
    let shown = -1;
    const report = (fraction: number | undefined): void => {
      if (fraction === undefined) return;
      s.fraction = fraction;
      // Whole percents only: a row redrawn per chunk would cost more than the copy.
      const pct = Math.floor(fraction * 100);
      if (pct !== shown) {
        shown = pct;
        this._onDidChange.fire(ref);
      }
    };
    try {
      return await work(report);
    } finally {
      if (this.stagings.get(key) === entry) this.stagings.delete(key);
      this._onDidChange.fire(ref);
    }
  }

  /** Which locks this window holds changed. */
  locksChanged(): void {
    this._onDidChange.fire(undefined);
  }

  dispose(): void {
    this._onDidChange.dispose();
  }
}
