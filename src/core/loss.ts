/**
 * Why a lock a holder had is no longer its own, said in words: who broke it and when, as the
 * static directory's history recorded it, or else what is found where the lock was. A heartbeat
 * that fails meets an errno on a path through a descriptor (`/proc/self/fd/…`), which tells the
 * user nothing; front ends show this instead.
 */
import { errnoCode } from './base/errors';
import { printable, printableTime } from './base/format';
import { AHEAD_MS, history, type HistoryActor, type HistoryEvent } from './log/history';
import { inspect } from './lock/inspect';
import { UNREACHED_ERRNOS } from './lock/lease';
import { describeHolder } from './lock/refusals';
import type { Holder, LockInfo, Timing } from './base/types';

/**
 * How the lock went. `force-released`, `taken-over` (judged stale), `destroyed` (force-released
 * with its build): recorded in the history by whoever did it. `replaced`: another holder has it
 * now, and nobody recorded how. `removed`: it is gone, and nobody recorded how (an older tool, a
 * hand, the build removed). `unreachable`: the static directory could not be reached.
 */
export type LossKind = 'force-released' | 'taken-over' | 'destroyed' | 'replaced' | 'removed' | 'unreachable';

export interface LockLoss {
  staticDir: string;
  tag: string;
  /** `<staticDir>/<tag>` */
  dir: string;
  kind: LossKind;
  /** Who did it, where the history says: the process that force-released, took over or destroyed. */
  by?: HistoryActor;
  /** When (ISO 8601): the history's time where it was recorded, else when the holder found out. */
  at: string;
  /** Whether `at` is the history's record of the event (else only when it was found). */
  recorded: boolean;
  /** Who holds the area's lock now, for `replaced`. */
  now?: LockInfo;
}

/** The lease whose lock went: enough to find its end in the history. */
export interface LostLease {
  staticDir: string;
  tag: string;
  dir: string;
  fence: number;
  holder: Pick<Holder, 'pid' | 'hostname' | 'token'>;
}

export interface ExplainOptions extends Partial<Timing> {
  /**
   * How long to look for the history's record of it: the breaker writes it right after the
   * removal, and the holder may find its lock gone first. Default 2 s.
   */
  waitMs?: number;
}

const LOOK_EVERY_MS = 200;
/** A destroy that follows the force-release it began with, by the same process, within this. */
const DESTROY_WITHIN_MS = 60_000;

/** Whether `e`'s record of the lock it broke names `holder` (where it names one at all). */
function brokeHolder(e: HistoryEvent, holder: Pick<Holder, 'pid' | 'hostname'>): boolean {
  const p = e.previous;
  return p === undefined || ((p.pid === undefined || p.pid === holder.pid) && (p.hostname === undefined || p.hostname === holder.hostname));
}

const sameActor = (a: HistoryActor, b: HistoryActor): boolean => a.pid === b.pid && a.hostname === b.hostname && a.user === b.user;

/** How a lock ended, as the history recorded it, and who ended it. */
export interface RecordedEnd {
  kind: 'released' | 'force-released' | 'taken-over' | 'destroyed';
  by: HistoryActor;
  at: string;
}

export interface RecordedEndOptions {
  /** Only a force-release, a takeover or a destroy that began with one (a holder's own release or loss is not its end). */
  breaksOnly?: boolean;
  /** The lock's holder: a break recorded as of another holder's lock with that token is not this one's. */
  holder?: Pick<Holder, 'pid' | 'hostname'>;
}

/**
 * How the lock with fencing token `fence` ended, as the history recorded it, if it has yet: the
 * newest record of that token. A force-release followed by a destroy from the same process (what
 * `destroy --force` does) is the destroy it was.
 */
export async function recordedEnd(staticDir: string, tag: string, fence: number, options: RecordedEndOptions = {}): Promise<RecordedEnd | undefined> {
  // Not a line dated far ahead: planted once, it would be the newest record of the token for good.
  const events = await history(staticDir, { tag, limit: 50, untilMs: Date.now() + AHEAD_MS, warn: () => undefined }).catch(() => []);
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i];
    if (e.fence !== fence) continue;
    if (e.kind === 'force-released' || e.kind === 'taken-over') {
      if (options.holder !== undefined && !brokeHolder(e, options.holder)) continue;
      const t = Date.parse(e.time);
      const destroyed = events.slice(i + 1).some((d) => d.kind === 'destroyed' && sameActor(d.holder, e.holder) && Math.abs(Date.parse(d.time) - t) <= DESTROY_WITHIN_MS);
      return { kind: destroyed ? 'destroyed' : e.kind, by: e.holder, at: e.time };
    }
    if (options.breaksOnly === true) continue;
    if (e.kind === 'released' || e.kind === 'lost') return { kind: 'released', by: e.holder, at: e.time };
    if (e.kind === 'destroyed') return { kind: 'destroyed', by: e.holder, at: e.time };
  }
  return undefined;
}

/**
 * How a lease's lock was lost, and by whom: from the history (waiting up to `waitMs` for its
 * record), else from what is found at the area now. Never rejects.
 */
export async function explainLoss(lease: LostLease, options: ExplainOptions = {}): Promise<LockLoss> {
  const base = { staticDir: lease.staticDir, tag: lease.tag, dir: lease.dir };
  const deadline = Date.now() + (options.waitMs ?? 2_000);
  for (;;) {
    const found = await recordedEnd(lease.staticDir, lease.tag, lease.fence, { breaksOnly: true, holder: lease.holder });
    if (found !== undefined) return { ...base, kind: found.kind === 'released' ? 'removed' : found.kind, by: found.by, at: found.at, recorded: true };
    let now: LockInfo | undefined;
    try {
      now = await inspect(lease.staticDir, lease.tag, options);
    } catch (err) {
      const code = errnoCode(err);
      if (code !== undefined && UNREACHED_ERRNOS.has(code)) return { ...base, kind: 'unreachable', at: new Date().toISOString(), recorded: false };
    }
    if (Date.now() >= deadline) {
      const at = new Date().toISOString();
      if (now !== undefined && now.exists && now.state !== 'free' && now.holder?.token !== lease.holder.token) return { ...base, kind: 'replaced', at, recorded: false, now };
      return { ...base, kind: 'removed', at, recorded: false };
    }
    await new Promise((resolve) => setTimeout(resolve, LOOK_EVERY_MS));
  }
}

/** Who did it, for text: `user@host (pid 42, purpose)`, as the history recorded them. */
export function describeActor(a: HistoryActor): string {
  return describeHolder({ state: 'held', holder: { ...a, acquiredAt: '', token: '', staleMs: 0, refreshMs: 0 } });
}

/**
 * How the lock went, in words that follow "it was", for text output and logs (the editor words its
 * own): `force-released by bob@vm (pid 42) at 2026-…Z`. Co-users' fields go through `printable`.
 */
export function lossWords(l: LockLoss): string {
  const who = l.by !== undefined ? describeActor(l.by) : 'another process';
  const when = printableTime(l.at);
  switch (l.kind) {
    case 'force-released':
      return `force-released by ${who} at ${when}`;
    case 'taken-over':
      return `taken over by ${who} at ${when}, who found it stale (its heartbeat had stopped for longer than the stale threshold)`;
    case 'destroyed':
      return `force-released by ${who} at ${when}, who destroyed the build`;
    case 'replaced':
      return `removed by another process, which recorded nothing; ${l.now !== undefined ? describeHolder(l.now) : 'another process'} holds it now (found at ${when})`;
    case 'removed':
      return `removed by another process, which recorded nothing (found at ${when})`;
    case 'unreachable':
      return `not refreshed, because ${printable(l.staticDir)} could not be reached (found at ${when})`;
  }
}

/** One sentence for the command line: `Lost the lock on <dir>: it was <how>. Work done under it may be incomplete.` */
export function lossSentence(l: LockLoss): string {
  return `Lost the lock on ${printable(l.dir)}: it was ${lossWords(l)}. Work done under it may be incomplete.`;
}
