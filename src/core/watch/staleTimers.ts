/**
 * The model's timers for locks that turn stale without any file event: a held lock's heartbeat
 * expiring, and a holder on this machine dying. What is due is handed back to be judged again.
 */
import { isHolderAlive, isOnThisMachine } from '../base/holder';
import { MAX_TIMER_MS, thresholdOf } from '../base/protocol';
import type { ListEntry, Timing } from '../base/types';
import type { AreaRecord } from './records';

/** How often holders on this machine are checked for having died. */
const LIVENESS_MS = 1_000;

export class StaleTimers {
  private staleTimer: NodeJS.Timeout | undefined;
  private livenessTimer: NodeJS.Timeout | undefined;
  private disposed = false;

  /** `locked`: the builds whose lock is not free; `due`: judges one again (which schedules anew). */
  constructor(
    private readonly locked: ReadonlySet<AreaRecord>,
    private readonly timing: () => Timing,
    private readonly due: (r: AreaRecord) => void,
  ) {}

  /**
   * A lock turns stale without any file event: its holder stops refreshing it, or dies. Check
   * held locks when their heartbeat would expire, and holders on this machine every second
   * (a cheap look at /proc), and only while some lock is held.
   */
  schedule(): void {
    if (this.disposed) return;
    clearTimeout(this.staleTimer);
    this.staleTimer = undefined;
    let next = Infinity;
    let local = false;
    for (const r of this.locked) {
      if (r.lock?.state !== 'held') continue;
      next = Math.min(next, this.expiresAt(r.lock, r.judgedAt));
      if (r.lock.holder !== undefined && r.lock.reservation === undefined && isOnThisMachine(r.lock.holder)) local = true;
    }
    if (next !== Infinity) {
      // A little past the expiry, so that the judge agrees it has passed; never past Node's
      // longest timer (a record's times are a co-user's: that one fires again, and looks again).
      this.staleTimer = setTimeout(() => this.checkExpired(), Math.min(MAX_TIMER_MS, Math.max(50, next - Date.now() + 100)));
    }
    if (local && this.livenessTimer === undefined) {
      this.livenessTimer = setInterval(() => this.checkLiveness(), LIVENESS_MS);
    } else if (!local && this.livenessTimer !== undefined) {
      clearInterval(this.livenessTimer);
      this.livenessTimer = undefined;
    }
  }

  /** When a held lock, judged at `at`, turns stale unless a heartbeat comes first. */
  private expiresAt(entry: ListEntry, at: number): number {
    // A reservation ends when it says, whatever its heartbeat.
    if (entry.reservation !== undefined) return at + entry.reservation.leftMs;
    return at + thresholdOf(this.timing(), entry.holder?.staleMs) - (entry.heartbeatAgeMs ?? 0);
  }

  private checkExpired(): void {
    const now = Date.now();
    let due = 0;
    for (const r of [...this.locked]) {
      if (r.lock?.state !== 'held') continue;
      if (this.expiresAt(r.lock, r.judgedAt) <= now) {
        this.due(r);
        due++;
      }
    }
    // Each recheck schedules the next expiry itself.
    if (due === 0) this.schedule();
  }

  private checkLiveness(): void {
    for (const r of this.locked) {
      const h = r.lock?.holder;
      if (r.lock?.state === 'held' && r.lock.reservation === undefined && h !== undefined && isOnThisMachine(h) && !isHolderAlive(h)) this.due(r);
    }
  }

  dispose(): void {
    this.disposed = true;
    clearTimeout(this.staleTimer);
    clearInterval(this.livenessTimer);
  }
}
