/**
 * One area's history, oldest first, as what a timeline draws: each holding of its lock (who, from
 * when to when, how it ended and by whom) and each wait for it. Pure: events in, plain data out.
 */
import type { HistoryActor, HistoryEvent, HistoryPrevious } from './events';

/**
 * How a holding ended: its holder let it go (released, or destroyed the build), lost it, had it
 * force-released, or it expired and was taken over; `unrecorded`: another holder took the lock
 * later, so it ended by then, but no end was recorded (a record not written, a lock removed by
 * hand); `open`: no end recorded yet, and no one took the lock since.
 */
export type HoldEnd = 'released' | 'destroyed' | 'lost' | 'force-released' | 'taken-over' | 'unrecorded' | 'open';

/** Who, as the history names them: a co-user's words, to be shown as text only. */
export interface Who {
  user: string;
  hostname: string;
  pid?: number;
  purpose?: string;
  /** The Python devserver's lock. */
  legacy?: true;
}

export interface Hold {
  tag: string;
  holder: Who;
  /** Milliseconds since the epoch (the filesystem's clock). */
  fromMs: number;
  toMs: number;
  end: HoldEnd;
  /** Who ended it, for `force-released` and `taken-over`. */
  by?: Who;
  fence?: number;
  /** False when the start was worked out from the end's `heldMs` (its `acquired` was not found). */
  startSeen: boolean;
}

/** A wait for the lock that ended in taking it: from `fromMs` to `toMs` (when it was acquired). */
export interface Wait {
  tag: string;
  who: Who;
  fromMs: number;
  toMs: number;
}

/**
 * An acquisition that waited less than this was not held up by anyone: taking a free lock takes a
 * few milliseconds (and more over a network filesystem), which the history records as waited too.
 */
export const WAIT_FLOOR_MS = 1_000;

export interface TagHolds {
  holds: Hold[];
  waits: Wait[];
}

const ENDS = new Set<string>(['released', 'destroyed', 'lost', 'force-released', 'taken-over']);

export function whoOf(a: HistoryActor | HistoryPrevious): Who {
  const w: Who = { user: a.user ?? ('legacy' in a && a.legacy === true ? 'python' : 'unknown'), hostname: a.hostname ?? 'unknown' };
  if (a.pid !== undefined) w.pid = a.pid;
  if (a.purpose !== undefined) w.purpose = a.purpose;
  if ('legacy' in a && a.legacy === true) w.legacy = true;
  return w;
}

/** A lock instance's key: its fencing token where recorded (one per holding), else its client. */
const keyOf = (fence: number | undefined, clientId: string | undefined): string | undefined => (fence !== undefined ? `f${fence}` : clientId !== undefined ? `c${clientId}` : undefined);

/**
 * The holdings and waits in one tag's events, oldest first, as of `nowMs` (a holding with no end
 * yet runs to it). An end whose `acquired` was not read (older than what is kept, or lost) starts
 * `heldMs` before it; a `lost` after the force-release or takeover that ended the same holding
 * adds nothing. Events out of order are taken in the order given: a holding never ends before it
 * starts.
 */
export function holdsOf(events: readonly HistoryEvent[], nowMs: number): TagHolds {
  return holdsOfTimed(events.map((e) => ({ e, t: Date.parse(e.time) })), nowMs);
}

/** `holdsOf`, of events with their times already parsed (as a read keeps them). */
export function holdsOfTimed(events: readonly { e: HistoryEvent; t: number }[], nowMs: number): TagHolds {
  const holds: Hold[] = [];
  const waits: Wait[] = [];
  const open = new Map<string, Hold>();
  const ended = new Set<string>();
  // The lock of one area has one holder at a time: a holding still open when another begins ended by then.
  const superseded = new Map<Hold, number>();
  for (const { e, t } of events) {
    if (e.kind === 'acquired') {
      for (const h of open.values()) if (!superseded.has(h)) superseded.set(h, Math.max(h.fromMs, t));
      const who = whoOf(e.holder);
      if (e.waitedMs !== undefined && e.waitedMs >= WAIT_FLOOR_MS) waits.push({ tag: e.tag, who, fromMs: t - e.waitedMs, toMs: t });
      const hold: Hold = { tag: e.tag, holder: who, fromMs: t, toMs: nowMs, end: 'open', startSeen: true, ...(e.fence !== undefined ? { fence: e.fence } : {}) };
      holds.push(hold);
      const key = keyOf(e.fence, e.holder.clientId);
      if (key !== undefined) {
        open.set(key, hold);
        ended.delete(key);
      }
      continue;
    }
    if (!ENDS.has(e.kind)) continue;
    const removal = e.kind === 'force-released' || e.kind === 'taken-over';
    const ender = removal ? (e.previous ?? {}) : e.holder;
    const key = keyOf(e.fence, ender.clientId);
    const hold = key !== undefined ? open.get(key) : undefined;
    if (hold !== undefined) {
      open.delete(key!);
      ended.add(key!);
      hold.toMs = Math.max(hold.fromMs, t);
      hold.end = e.kind as HoldEnd;
      if (removal) hold.by = whoOf(e.holder);
      continue;
    }
    // Already ended by the removal that its holder learns of later.
    if (key !== undefined && ended.has(key)) continue;
    const fromMs = e.heldMs !== undefined ? t - e.heldMs : t;
    holds.push({
      tag: e.tag,
      holder: whoOf(ender),
      fromMs,
      toMs: t,
      end: e.kind as HoldEnd,
      startSeen: false,
      ...(removal ? { by: whoOf(e.holder) } : {}),
      ...(e.fence !== undefined ? { fence: e.fence } : {}),
    });
    if (key !== undefined) ended.add(key);
  }
  for (const h of open.values()) {
    const endMs = superseded.get(h);
    if (endMs === undefined) continue;
    h.end = 'unrecorded';
    h.toMs = endMs;
  }
  return { holds, waits };
}
