/**
 * What happened to a build between two lines of `devserver-stage watch`: a lock or reservation
 * taken, released, force-released, taken over, the build destroyed, a reservation extended. What
 * the states alone cannot tell (whether a lock that went was released or broken, and by whom) is
 * read from the static directory's history, which every holder and breaker records: the event
 * whose fencing token is the lock's.
 */
import { AHEAD_MS, history, type HistoryActor, type HistoryEvent } from '../core/log/history';
import { recordedEnd } from '../core/loss';
import type { WatchActor, WatchKind, WatchLine } from './watchLines';

/** What the states tell, and whether the history must say how the previous lock ended. */
export interface Classified {
  kind: WatchKind;
  /** The fencing token of the lock that ended, when the history is to say how (a build gone: the last destroy, if none). */
  ended?: number;
  /** The holder of the lock that ended. */
  previous?: WatchActor;
}

const actorOfLine = (l: WatchLine): WatchActor => ({ user: l.user ?? '', host: l.host ?? '', ...(l.pid !== undefined ? { pid: l.pid } : {}), ...(l.purpose !== undefined ? { purpose: l.purpose } : {}) });

const held = (l: WatchLine | undefined): boolean => l !== undefined && l.event !== 'gone' && l.state !== undefined && l.state !== 'free';

/** The kind of a change from `before` (undefined: not seen yet) to `now`, from the states alone. */
export function classify(before: WatchLine | undefined, now: WatchLine): Classified {
  const ended = held(before) && before!.token !== undefined ? { ended: before!.token, previous: actorOfLine(before!) } : {};
  if (now.event === 'gone') return { kind: 'gone', ...ended };
  if (before === undefined || before.event === 'gone') return { kind: held(now) ? (now.reservedUntil !== undefined ? 'reserved' : 'taken') : 'appeared' };
  if (!held(now)) return held(before) ? { kind: 'released', ...ended } : { kind: 'changed' };
  if (!held(before)) return { kind: now.reservedUntil !== undefined ? 'reserved' : 'taken' };
  const sameLock = before.token === now.token && before.holder === now.holder && before.pid === now.pid;
  if (sameLock) {
    if (before.reservedUntil !== now.reservedUntil && now.reservedUntil !== undefined) return { kind: 'extended' };
    if (now.state === 'stale' && before.state !== 'stale') return { kind: 'stale' };
    return { kind: 'changed' };
  }
  // Another lock is there now: the previous one ended first, and the history says how.
  return { kind: now.reservedUntil !== undefined ? 'reserved' : 'taken', ...ended };
}

/** A destroy of a free build is news only this soon after it was recorded. */
const DESTROY_WITHIN_MS = 60_000;
const LOOK_EVERY_MS = 200;

const actor = (a: HistoryActor): WatchActor => ({ user: a.user, host: a.hostname, pid: a.pid, ...(a.purpose !== undefined ? { purpose: a.purpose } : {}) });

/** How the lock with fencing token `fence` ended (core/loss.ts), or for none, whether the build was destroyed just now. */
async function endOf(staticDir: string, tag: string, fence: number | undefined): Promise<{ kind: WatchKind; by?: WatchActor } | undefined> {
  if (fence !== undefined) {
    const end = await recordedEnd(staticDir, tag, fence);
    return end === undefined ? undefined : end.kind === 'released' ? { kind: 'released' } : { kind: end.kind, by: actor(end.by) };
  }
  // A build that went while free: destroyed, if that was the last thing recorded of it.
  const events = await history(staticDir, { tag, limit: 50, untilMs: Date.now() + AHEAD_MS, warn: () => undefined }).catch(() => []);
  let e: HistoryEvent | undefined;
  for (let i = events.length - 1; i >= 0 && e === undefined; i--) if (events[i].kind === 'destroyed') e = events[i];
  return e !== undefined && Date.now() - Date.parse(e.time) <= DESTROY_WITHIN_MS ? { kind: 'destroyed', by: actor(e.holder) } : undefined;
}

/**
 * The line with what the history says of the lock that ended (`c.ended`): released, force-released
 * or taken over and by whom, or the build destroyed. The breaker records right after the removal,
 * so this looks for up to `waitMs`; a lock whose end nobody recorded (an older tool, a hand) is
 * `removed`, but a line that is `taken` or `reserved` stays so. A `waitMs` below 0 reads no history.
 */
export async function withHistory(staticDir: string, line: WatchLine, c: Classified, waitMs: number): Promise<WatchLine> {
  const previous = c.previous !== undefined ? { previous: c.previous } : {};
  if (waitMs < 0) return { ...line, kind: c.kind, ...previous };
  if (c.ended === undefined && c.kind !== 'gone') return { ...line, kind: c.kind };
  const deadline = Date.now() + waitMs;
  for (;;) {
    const found = await endOf(staticDir, line.tag ?? '', c.ended);
    if (found !== undefined) {
      // A lock released and taken again before the watch looked: the news is the new holder.
      const kind = found.kind === 'released' && c.kind !== 'released' ? c.kind : c.kind === 'gone' && found.kind !== 'destroyed' ? 'gone' : found.kind;
      return { ...line, kind, ...previous, ...(found.by !== undefined && kind !== 'taken' && kind !== 'reserved' ? { by: found.by } : {}) };
    }
    if (Date.now() >= deadline) return { ...line, kind: c.kind === 'released' ? 'removed' : c.kind, ...previous };
    await new Promise((resolve) => setTimeout(resolve, LOOK_EVERY_MS));
  }
}
