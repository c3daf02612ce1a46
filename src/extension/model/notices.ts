/**
 * What the user is to be told, as plain data: their reservation nearing its end (ten minutes
 * before, by the filesystem's clock) or ended, their reservation gone from under them (the core's
 * `explainLoss` then says how and by whom), and a build they asked to hear about become free.
 * Each notice fires once: a reservation's end once per end its owner set (extending it sets a new
 * one, which warns again), a loss once per lock, a free build once per wish, which is then forgotten.
 *
 * "Your" reservation is one the kernel says is this user's (`reservation.mine`: the user owns its
 * work directory), as the view and Extend Reservation… decide it, never what a record claims.
 */
import { Emitter, keyOf, type AreaRef, type Disposable, type LockInfo, type LockLoss, type LostLease } from '../../core';

/** How long before a reservation's end its owner is warned. */
export const WARN_BEFORE_MS = 10 * 60_000;

/** Losses of a reservation that are told: the ones someone recorded doing. */
const TOLD_LOSSES: ReadonlySet<LockLoss['kind']> = new Set(['force-released', 'taken-over', 'destroyed']);

export type Notice =
  /** The user's reservation ends at `until` (ISO 8601, the filesystem's clock), within `WARN_BEFORE_MS`. */
  | (AreaRef & { kind: 'ending'; until: string })
  /** The user's reservation has ended at `until`: anyone may take the build now. */
  | (AreaRef & { kind: 'ended'; until: string })
  /** The user's reservation was force-released, taken over or destroyed, by `loss.by`. */
  | (AreaRef & { kind: 'lost'; loss: LockLoss })
  /** A build the user asked to hear about is free (or stale: anyone may take it). */
  | (AreaRef & { kind: 'free' });

/** The clock and timers the notices run on (tests give their own). */
export interface Timers {
  now(): number;
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

export const realTimers: Timers = { now: () => Date.now(), set: (fn, ms) => setTimeout(fn, ms), clear: (h) => clearTimeout(h as NodeJS.Timeout) };

/** A reservation of the user's as last seen: its lock, and the timers set for its end. */
interface Watched {
  ref: AreaRef;
  lock: LockInfo;
  until: string;
  handles: unknown[];
}

const reservationOfUser = (lock: LockInfo | undefined): boolean => lock !== undefined && lock.state !== 'free' && lock.reservation?.mine === true && lock.holder !== undefined;

/** Node's timers take at most this (about 24.8 days); a later end is set again when it is near. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class Notices implements Disposable {
  private readonly told = new Set<string>();
  private readonly reservations = new Map<string, Watched>();
  private readonly wanted = new Map<string, AreaRef>();
  private readonly _onNotice = new Emitter<Notice>();
  /** Each notice, once. */
  readonly onNotice = this._onNotice.event;
  private readonly _onGone = new Emitter<LostLease>();
  /** A reservation of the user's that is no longer the lock there: how it went is for the history to say (then `lost`). */
  readonly onGone = this._onGone.event;
  private readonly _onDidChangeWishes = new Emitter<void>();
  readonly onDidChangeWishes = this._onDidChangeWishes.event;

  constructor(private readonly timers: Timers = realTimers) {}

  /** The areas whose changes matter here: the user's reservations and the wished builds. */
  refs(): AreaRef[] {
    return [...[...this.reservations.values()].map((w) => w.ref), ...this.wanted.values()];
  }

  /** Asks to hear once when the build is free; false if it was asked already. */
  wish(ref: AreaRef): boolean {
    const key = keyOf(ref.staticDir, ref.tag);
    if (this.wanted.has(key)) return false;
    this.wanted.set(key, { staticDir: ref.staticDir, tag: ref.tag });
    this._onDidChangeWishes.fire();
    return true;
  }

  /** No longer; false if there was no such wish. */
  unwish(ref: AreaRef): boolean {
    const gone = this.wanted.delete(keyOf(ref.staticDir, ref.tag));
    if (gone) this._onDidChangeWishes.fire();
    return gone;
  }

  /** The builds the user asked to hear about. */
  wishes(): AreaRef[] {
    return [...this.wanted.values()];
  }

  wished(ref: AreaRef): boolean {
    return this.wanted.has(keyOf(ref.staticDir, ref.tag));
  }

  /**
   * What the model sees of an area now: its lock (undefined once the build is gone), judged at
   * `judgedAt` (this machine's clock), when its reservation had `reservation.leftMs` left by the
   * filesystem's clock.
   */
  update(ref: AreaRef, lock: LockInfo | undefined, judgedAt: number): void {
    const key = keyOf(ref.staticDir, ref.tag);
    const before = this.reservations.get(key);
    if (before !== undefined && (lock === undefined || lock.state === 'free' || lock.holder?.token !== before.lock.holder?.token)) {
      this.forget(key);
      const fence = before.lock.holder?.fence;
      if (fence !== undefined && this.once(`gone\0${key}\0${fence}`)) {
        const h = before.lock.holder!;
        this._onGone.fire({ staticDir: ref.staticDir, tag: ref.tag, dir: before.lock.dir, fence, holder: { pid: h.pid, hostname: h.hostname, token: h.token } });
      }
    }
    if (reservationOfUser(lock)) this.follow(key, ref, lock!, judgedAt);
    const wish = this.wanted.get(key);
    if (wish !== undefined) {
      if (lock === undefined) this.unwish(wish);
      else if (lock.state === 'free' || lock.state === 'stale') {
        this.unwish(wish);
        this._onNotice.fire({ ...wish, kind: 'free' });
      }
    }
  }

  /** How a reservation of the user's went (`explainLoss` of an `onGone` lease): told if someone recorded breaking it. */
  lost(loss: LockLoss): void {
    if (TOLD_LOSSES.has(loss.kind)) this._onNotice.fire({ staticDir: loss.staticDir, tag: loss.tag, kind: 'lost', loss });
  }

  dispose(): void {
    for (const key of [...this.reservations.keys()]) this.forget(key);
    this._onNotice.dispose();
    this._onGone.dispose();
    this._onDidChangeWishes.dispose();
  }

  private follow(key: string, ref: AreaRef, lock: LockInfo, judgedAt: number): void {
    const r = lock.reservation!;
    const known = this.reservations.get(key);
    if (known !== undefined && known.until === r.until) {
      known.lock = lock;
      if (r.ended) this.tell(ref, 'ended', r.until);
      return;
    }
    if (known !== undefined) this.forget(key);
    const w: Watched = { ref: { staticDir: ref.staticDir, tag: ref.tag }, lock, until: r.until, handles: [] };
    this.reservations.set(key, w);
    if (r.ended) {
      this.tell(ref, 'ended', r.until);
      return;
    }
    // The end by this machine's clock: the filesystem's time left, counted from when it was judged.
    const endsAt = judgedAt + r.leftMs;
    const left = endsAt - this.timers.now();
    this.at(w, left - WARN_BEFORE_MS, () => this.tell(ref, 'ending', r.until));
    this.at(w, left, () => this.tell(ref, 'ended', r.until));
  }

  private at(w: Watched, ms: number, fn: () => void): void {
    if (ms <= 0) {
      fn();
      return;
    }
    const step = Math.min(ms, MAX_TIMER_MS);
    w.handles.push(this.timers.set(() => (step < ms ? this.at(w, ms - step, fn) : fn()), step));
  }

  private tell(ref: AreaRef, kind: 'ending' | 'ended', until: string): void {
    if (this.once(`${kind}\0${keyOf(ref.staticDir, ref.tag)}\0${until}`)) this._onNotice.fire({ staticDir: ref.staticDir, tag: ref.tag, kind, until });
  }

  private forget(key: string): void {
    const w = this.reservations.get(key);
    if (w === undefined) return;
    for (const h of w.handles) this.timers.clear(h);
    this.reservations.delete(key);
  }

  /** True the first time a key is seen. */
  private once(key: string): boolean {
    if (this.told.has(key)) return false;
    this.told.add(key);
    return true;
  }
}
