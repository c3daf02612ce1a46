/**
 * The line as seen by someone not in it (see queue.ts): who waits (`queueOf`), and clearing the
 * whole line on a user's word (`clearLine`), recorded in the audit log first.
 */
import { recordFailure, recordIntent } from '../log/audit';
import { fsClockSkew } from '../fs/clock';
import { asyncIo } from '../fs/io';
import { areaKey, clampTiming } from '../base/protocol';
import { pause } from '../base/slices';
import { resolveArea } from '../fs/tags';
import { closeQueue, dropCachedListing, openExistingQueue, queuePath, areaPathOf } from './lineDirs';
import { clearLitter, judgeTicket, numbered, readTickets, removeTicket } from './tickets';
import type { QueueEntry, Timing } from '../base/types';

/**
 * The queue of `<staticDir>/<tag>`: every ticket, lowest number first, the ones that count with
 * their `position` (1: next to enter), stale ones (a waiter gone, or no longer refreshing) without.
 * Only reads, and looks once: a ticket whose mtime is set in the future counts as waiting here
 * (`heartbeatAheadMs` says so). An area nobody waits for has an empty queue.
 */
export async function queueOf(staticDir: string, tag: string, options: Partial<Timing> = {}): Promise<QueueEntry[]> {
  const timing = clampTiming(options);
  const area = await resolveArea(staticDir, tag);
  const opened = await openExistingQueue(area);
  if (opened === undefined) return [];
  const { q, key } = opened;
  try {
    await dropCachedListing(q);
    const { tickets } = await readTickets(asyncIo, q.dir, queuePath(area.staticDir, key));
    const nowFs = Date.now() + (await fsClockSkew(area.realStaticDir));
    return numbered(tickets.map((t) => judgeTicket(t, timing, nowFs)));
  } finally {
    closeQueue(q);
  }
}

export interface ClearLineOptions extends Partial<Timing> {
  clientId?: string;
}

/** What `clearLine` did. */
export interface ClearedLine {
  /** The area's queue. */
  queue: string;
  /** The tickets removed, as judged just before; one that looked live was a waiter's that takes a new place at the end, if it still waits. */
  removed: QueueEntry[];
  /** Tickets that could not be removed (another user's, in a directory with the sticky bit). */
  kept: QueueEntry[];
}

/** Tickets an audit line names one by one; the rest are counted. */
const AUDIT_TICKETS = 100;

/**
 * Clears the line in front of `<staticDir>/<tag>`'s lock: removes every ticket in it (stale,
 * planted, unreadable, set in the future, or a live waiter's), each only if it is still the one
 * judged, and the litter beside them. Recorded in the audit log first, with what each ticket
 * looked like: if that cannot be written, nothing is removed (EIO). The lock is not touched.
 */
export async function clearLine(staticDir: string, tag: string, options: ClearLineOptions = {}): Promise<ClearedLine> {
  const timing = clampTiming(options);
  const area = await resolveArea(staticDir, tag);
  const opened = await openExistingQueue(area);
  if (opened === undefined) return { queue: queuePath(area.staticDir, areaKey(await areaPathOf(area))), removed: [], kept: [] };
  const { q, key } = opened;
  const shown = queuePath(area.staticDir, key);
  try {
    const io = q.local ? area.io : asyncIo;
    await dropCachedListing(q);
    const { tickets, others } = await readTickets(io, q.dir, shown);
    const nowFs = Date.now() + (await fsClockSkew(area.realStaticDir));
    const entries = numbered(tickets.map((t) => judgeTicket(t, timing, nowFs)));
    const removed: QueueEntry[] = [];
    const kept: QueueEntry[] = [];
    if (tickets.length > 0) {
      const entry = { action: 'clear-line', tag: area.tag, tickets: entries.slice(0, AUDIT_TICKETS), ticketCount: entries.length } as const;
      await recordIntent(area.staticDir, entry, options.clientId);
      for (const [i, t] of tickets.entries()) {
        const turn = pause();
        if (turn !== undefined) await turn;
        ((await removeTicket(io, q.dir, t)) ? removed : kept).push(entries[i]);
      }
      if (kept.length > 0) await recordFailure(area.staticDir, entry, `${kept.length} of ${tickets.length} tickets could not be removed`, options.clientId);
    }
    await clearLitter(io, q.dir, others, nowFs);
    await io.rmdir(q.queue.at(key)).catch(() => undefined);
    return { queue: shown, removed, kept };
  } finally {
    closeQueue(q);
  }
}
