/**
 * What belongs to this window: locks it holds (taken for the window, or by a staging it runs,
 * both under its client id) and the stagings it is running, with their progress.
 */
import { Emitter, keyOf, type AreaRef, type Disposable, type LockInfo } from '../core';

export interface Staging {
  /** 0..1 where the total is known (a folder, a download with Content-Length). */
  fraction?: number;
}

export class Mine implements Disposable {
  private readonly stagings = new Map<string, { ref: AreaRef; s: Staging }>();
  private readonly _onDidChange = new Emitter<AreaRef | undefined>();
  /** Fires with the area whose staging started, moved on or ended; undefined when locks changed. */
  readonly onDidChange = this._onDidChange.event;

  constructor(
    /** How this window names itself in the locks it takes. */
    readonly clientId: string,
    private readonly holds: (staticDir: string, tag: string) => boolean,
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

  /** Whether the area's lock is this window's, or this window is staging into it. */
  has(ref: AreaRef, lock?: LockInfo): boolean {
    if (this.stagings.has(keyOf(ref.staticDir, ref.tag)) || this.holds(ref.staticDir, ref.tag)) return true;
    return lock !== undefined && lock.state !== 'free' && lock.holder?.clientId === this.clientId;
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
