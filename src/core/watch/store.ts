/**
 * The model's records, one per area, and what is kept from them as they change rather than counted
 * again: the tally of every root and folder by state, the builds whose lock is not free, the builds
 * found damaged, and the counts asked of them. `LockStates` decides what the records say.
 */
import { isAtOrBelow, keyOf, parentTag, type AreaRecord, type AreaRef, type Counts, type Owner } from './records';

/** The builds at or below a root or folder, by state: kept as records change, never counted again. */
interface Tally {
  builds: number;
  held: number;
  stale: number;
  legacy: number;
}

/** What one build counts for. */
function tallyOf(r: AreaRecord): Tally {
  const t: Tally = { builds: 1, held: 0, stale: 0, legacy: 0 };
  const state = r.lock?.state ?? 'free';
  if (state !== 'free') t[state] = 1;
  return t;
}

export class AreaStore {
  private readonly map = new Map<string, AreaRecord>();
  /** Every area known, by `keyOf`. */
  readonly records: ReadonlyMap<string, AreaRecord> = this.map;
  /**
   * Builds whose lock is not free, and the tally of every root and folder: what the timers, the
   * counts and the status bar need, without a pass over every record on each event.
   */
  readonly locked = new Set<AreaRecord>();
  /** Builds a verification found damaged (`markDamaged`). */
  readonly damaged = new Set<AreaRecord>();
  private readonly tallies = new Map<string, Tally>();
  /** Grows with every change: what is computed from the records (counts) is kept per version. */
  version = 0;
  private readonly countCache = new Map<string, { version: number; ownerVersion: number; counts: Counts }>();

  /** Records an area, counted in the tallies above it. */
  put(r: AreaRecord): void {
    this.map.set(keyOf(r.staticDir, r.tag), r);
    this.account(r, 1);
  }

  /** Changes an area's kind or lock, its tallies following. */
  update(r: AreaRecord, change: () => void): void {
    this.account(r, -1);
    change();
    this.account(r, 1);
  }

  /** Adds (1) or takes away (-1) what a build counts for in the tallies of the areas above it. */
  private account(r: AreaRecord, sign: 1 | -1): void {
    if (r.kind !== 'build') return;
    const state = r.lock?.state ?? 'free';
    if (state !== 'free') {
      if (sign > 0) this.locked.add(r);
      else this.locked.delete(r);
    }
    for (let t = parentTag(r.tag); ; t = parentTag(t)) {
      const key = keyOf(r.staticDir, t);
      let tally = this.tallies.get(key);
      if (tally === undefined) {
        tally = { builds: 0, held: 0, stale: 0, legacy: 0 };
        this.tallies.set(key, tally);
      }
      tally.builds += sign;
      if (state !== 'free') tally[state] += sign;
      if (t === '') break;
    }
  }

  /**
   * Forgets an area and everything below it, found through the listings below it; `also` is told
   * each area forgotten (with its key), for what is kept of it elsewhere.
   */
  forget(staticDir: string, tag: string, also: (key: string, staticDir: string, tag: string) => void): void {
    // A stack of its own, not recursion: how deep folders go is up to whoever makes them. Found
    // parents first, forgotten children first (a build's tally goes from folders still there).
    const found: string[] = [];
    const todo = [tag];
    for (let t = todo.pop(); t !== undefined; t = todo.pop()) {
      found.push(t);
      for (const c of this.map.get(keyOf(staticDir, t))?.children ?? []) todo.push(c);
    }
    for (let i = found.length - 1; i >= 0; i--) {
      const key = keyOf(staticDir, found[i]);
      const r = this.map.get(key);
      if (r !== undefined) {
        this.account(r, -1);
        this.damaged.delete(r);
        this.map.delete(key);
      }
      this.tallies.delete(key);
      this.countCache.delete(key);
      also(key, staticDir, found[i]);
    }
  }

  /** Forgets what is below an area, keeping the area itself. */
  forgetBelow(staticDir: string, tag: string, also: (key: string, staticDir: string, tag: string) => void): void {
    for (const t of this.map.get(keyOf(staticDir, tag))?.children ?? []) this.forget(staticDir, t, also);
    this.tallies.delete(keyOf(staticDir, tag));
  }

  /** Forgets every area. */
  clear(): void {
    this.map.clear();
    this.locked.clear();
    this.damaged.clear();
    this.tallies.clear();
    this.countCache.clear();
  }

  /** Every build known that passes `where`, in no particular order. */
  builds(where: (r: AreaRecord) => boolean = () => true): AreaRecord[] {
    const out: AreaRecord[] = [];
    for (const r of this.map.values()) if (r.kind === 'build' && where(r)) out.push(r);
    return out;
  }

  /**
   * Every known build at or below an area (a folder, or a root for tag ''): a folder's are found
   * through the listings below it, not by a look at every record.
   */
  buildsUnder(staticDir: string, tag: string): AreaRecord[] {
    if (tag === '') return this.builds((r) => r.staticDir === staticDir);
    const out: AreaRecord[] = [];
    // A stack of its own, not recursion: how deep folders go is up to whoever makes them.
    const todo = [tag];
    for (let t = todo.pop(); t !== undefined; t = todo.pop()) {
      const r = this.map.get(keyOf(staticDir, t));
      if (r === undefined) continue;
      if (r.kind === 'build') out.push(r);
      // Reversed onto the stack, so that they come off in their order.
      else if (r.children !== undefined) for (let i = r.children.length - 1; i >= 0; i--) todo.push(r.children[i]);
    }
    return out;
  }

  /**
   * The builds at or below an area counted by state. `mine` says which are this window's; they
   * are counted as mine and not as held. Only builds whose lock is not free and the areas in
   * `also` are asked: this window's locks and stagings whose lock the watcher has not seen yet.
   */
  counts(staticDir: string, tag: string, owner: Owner | ((r: AreaRecord) => boolean), also: Iterable<AreaRef> = []): Counts {
    const key = keyOf(staticDir, tag);
    const mine = typeof owner === 'function' ? owner : (r: AreaRecord): boolean => owner.has(r);
    const ownerVersion = typeof owner === 'function' ? -1 : owner.version;
    if (typeof owner !== 'function') also = [...also, ...owner.refs()];
    const cached = this.countCache.get(key);
    // A function says nothing of when its answers change: counted afresh each time.
    if (cached !== undefined && cached.version === this.version && ownerVersion >= 0 && cached.ownerVersion === ownerVersion) return cached.counts;
    const self = this.map.get(key);
    // A build counts itself; a root or folder, what its tally holds.
    const t = self?.kind === 'build' ? tallyOf(self) : this.tallies.get(key);
    const c: Counts = { builds: t?.builds ?? 0, held: t?.held ?? 0, stale: t?.stale ?? 0, legacy: t?.legacy ?? 0, mine: 0 };
    const claimed = new Set<AreaRecord>();
    const claim = (r: AreaRecord | undefined): void => {
      if (r === undefined || r.kind !== 'build' || r.staticDir !== staticDir || !isAtOrBelow(r.tag, tag) || claimed.has(r) || !mine(r)) return;
      claimed.add(r);
      c.mine++;
      const state = r.lock?.state;
      if (state === 'held' || state === 'stale' || state === 'legacy') c[state]--;
    };
    for (const r of this.locked) claim(r);
    for (const ref of also) claim(this.map.get(keyOf(ref.staticDir, ref.tag)));
    this.countCache.set(key, { version: this.version, ownerVersion, counts: c });
    return c;
  }
}
