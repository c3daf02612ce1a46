/**
 * The tickets of a line (see queue.ts): read, judged and removed. A ticket is whatever stands at a
 * ticket's name, written by a waiter or planted by a co-user, so nothing about it is believed that
 * a co-user could set to hold the line for good:
 *
 * - its record's own stale threshold counts only up to a bound (`MAX_CLAIMED_STALE` times the
 *   judge's own);
 * - an mtime set in the future says nothing of when it was last refreshed: such a ticket is
 *   judged only by a waiter that has watched it (`unchangedMs`: how long this judge has seen it
 *   without any change, by its own clock), never by its age;
 * - a live pid in its record does not keep it either: a live waiter refreshes its ticket, and
 *   one that has not for the threshold is stale whoever it names (its waiter, if it lives, takes
 *   a new place: a fault in the line costs fairness, never exclusion).
 */
import * as fs from 'fs';
import * as path from 'path';
import { type Dir } from '../fs/anchored';
import { callsFor } from '../fs/calls';
import { errnoCode } from '../base/errors';
import { printable } from '../base/format';
import { isHolderAlive, isOnThisMachine, isPidAlive, parseHolder, parseObject, parseSideName, sideName, thisMachine } from '../base/holder';
import type { Io } from '../fs/io';
import { QUEUE_PROBE_PREFIX, TICKET_ASIDE_PREFIX, TICKET_DIGITS, MAX_OWNER_BYTES } from '../base/protocol';
import { pause } from '../base/slices';
import type { QueueEntry, Timing, Waiter } from '../base/types';

export const TICKET_NAME = new RegExp(`^\\d{${TICKET_DIGITS}}$`);
export const MAX_TICKET = 10 ** TICKET_DIGITS - 1;
export const ticketName = (n: number): string => String(n).padStart(TICKET_DIGITS, '0');

/** Litter of a queue (a ticket moved aside, a cache probe) whose owner cannot be told is removed after this. */
const LITTER_MS = 60_000;
/**
 * A ticket whose mtime is further ahead of the filesystem's clock than this was not set by a
 * heartbeat (hosts' offsets are measured to the second, with a dead band of 2 s each way).
 */
export const AHEAD_SLACK_MS = 5_000;
/** A waiter's own stale threshold counts up to this many times the judge's. */
export const MAX_CLAIMED_STALE = 6;

/** A ticket as read from the queue: its name, number, what it is (identity), its mtime, and its record or why it cannot be read. */
export interface Ticket {
  name: string;
  number: number;
  ino: number;
  mtimeMs: number;
  /** Inode, size, modification and change times: any change of these is a sign of life. */
  identity: string;
  waiter?: Waiter;
  unreadable?: string;
  /** Its record was not read: stale by its age whatever it says (`ReadOptions.skipRecord`). */
  unread?: true;
}

/** What a ticket's record says; tickets are written once, so it is kept per name while its inode and size stay. */
export type Parsed = { waiter: Waiter } | { unreadable: string };

/** Records read, by ticket name: only the names still there are kept. */
export type RecordCache = Map<string, { key: string; parsed: Parsed }>;

function describeType(st: fs.Stats): string {
  if (st.isSymbolicLink()) return 'a symbolic link';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isDirectory()) return 'a directory';
  return 'not a regular file';
}

/** A ticket's record: a holder record's fields with `queuedAt`; undefined when it is not one. */
export function parseWaiter(text: string): Waiter | undefined {
  const holder = parseHolder(text);
  if (holder === undefined) return undefined;
  const { acquiredAt: _acquiredAt, fence: _fence, ...rest } = holder;
  const queuedAt = parseObject(text)?.queuedAt;
  return { ...rest, queuedAt: typeof queuedAt === 'string' ? queuedAt : '' };
}

/** The stale threshold of a ticket: the judge's, or the waiter's own where larger, up to its bound. */
export function ticketThreshold(w: Pick<Waiter, 'staleMs'> | undefined, timing: Timing): number {
  return Math.max(timing.staleMs, Math.min(w?.staleMs ?? 0, MAX_CLAIMED_STALE * timing.staleMs));
}

/** Whether a ticket of this mtime is stale by its age whatever its record says (then it need not be read). */
export function staleWhateverItSays(mtimeMs: number, timing: Timing, nowFsMs: number): boolean {
  return mtimeMs - nowFsMs <= AHEAD_SLACK_MS && nowFsMs - mtimeMs > MAX_CLAIMED_STALE * timing.staleMs;
}

export interface ReadOptions {
  /** Records read before (kept by ticket name, pruned to the names found); a fresh map reads every one. */
  records?: RecordCache;
  /** Tickets whose record need not be read (stale whatever it says). */
  skipRecord?: (st: fs.Stats) => boolean;
}

/**
 * Reads the tickets of a queue, lowest number first, and the names of everything else in it.
 * The event loop has its turns between tickets: a queue may hold hundreds of thousands.
 */
export async function readTickets(io: Io, q: Dir, shown: string, options: ReadOptions = {}): Promise<{ tickets: Ticket[]; others: string[] }> {
  const records: RecordCache = options.records ?? new Map<string, { key: string; parsed: Parsed }>();
  const tickets: Ticket[] = [];
  const others: string[] = [];
  const names = await callsFor(io.sync).readdir(q.at('.'));
  for (const name of names) {
    const turn = pause();
    if (turn !== undefined) await turn;
    if (!TICKET_NAME.test(name)) {
      others.push(name);
      continue;
    }
    const st = await io.lstatOrNull(q.at(name)).catch(() => null);
    if (st === null) continue;
    const ticket: Ticket = { name, number: Number(name), ino: st.ino, mtimeMs: st.mtimeMs, identity: `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}` };
    if (options.skipRecord?.(st) === true) {
      ticket.unread = true;
      tickets.push(ticket);
      continue;
    }
    const key = `${st.ino}:${st.size}`;
    const cached = records.get(name);
    let parsed = cached?.key === key ? cached.parsed : undefined;
    if (parsed === undefined) {
      parsed = await readTicket(io, q, name, st, path.join(shown, name));
      // A ticket is written once, right after it is created: an empty one may still be filled in.
      if (st.size > 0) records.set(name, { key, parsed });
    }
    if ('waiter' in parsed) ticket.waiter = parsed.waiter;
    else ticket.unreadable = parsed.unreadable;
    tickets.push(ticket);
  }
  if (records.size > tickets.length) {
    const present = new Set(tickets.map((t) => t.name));
    for (const name of records.keys()) if (!present.has(name)) records.delete(name);
  }
  return { tickets: tickets.sort((a, b) => a.number - b.number), others };
}

/** A ticket's record, never through a link or from a FIFO (see anchored/readRecord.ts). */
async function readTicket(io: Io, q: Dir, name: string, st: fs.Stats, shown: string): Promise<Parsed> {
  if (!st.isFile()) return { unreadable: `${shown} is ${describeType(st)}` };
  let text: string;
  try {
    text = await io.readRecord(q.at(name), shown, MAX_OWNER_BYTES);
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'EACCES' || code === 'EPERM') return { unreadable: `${shown} cannot be read by this user (permission denied)` };
    return { unreadable: err instanceof Error ? err.message : String(err) };
  }
  const waiter = parseWaiter(text);
  return waiter === undefined ? { unreadable: `${shown} is not a waiter's record` } : { waiter };
}

/**
 * Judges a ticket: stale at once when its waiter is on this machine and gone; else when its
 * heartbeat (mtime, unless set in the future) is older than its threshold, or when this judge has
 * watched it unchanged for longer than that (`unchangedMs`; undefined for a judge that looks
 * once). A ticket that cannot be read counts as waiting until then.
 */
export function judgeTicket(t: Ticket, timing: Timing, nowFsMs: number, unchangedMs?: number): QueueEntry {
  const aheadMs = t.mtimeMs - nowFsMs;
  const byAge = aheadMs <= AHEAD_SLACK_MS;
  const heartbeatAgeMs = Math.max(0, nowFsMs - t.mtimeMs);
  const entry: QueueEntry = { ticket: t.number, state: 'waiting', heartbeatAgeMs };
  if (!byAge) entry.heartbeatAheadMs = Math.round(aheadMs);
  const w = t.waiter;
  if (w === undefined) {
    entry.unreadable = t.unreadable ?? (t.unread === true ? 'not read: stale by its age' : 'unreadable');
  } else {
    entry.waiter = w;
    const queued = Date.parse(w.queuedAt);
    if (Number.isFinite(queued)) entry.ageMs = Math.max(0, nowFsMs - queued);
    if (isOnThisMachine(w)) {
      entry.waiterAlive = isHolderAlive(w);
      if (!entry.waiterAlive) {
        entry.state = 'stale';
        entry.staleReason = `its waiter (pid ${w.pid} on ${w.hostname}) is no longer running`;
        return entry;
      }
    }
  }
  const threshold = ticketThreshold(w, timing);
  const s = (ms: number): number => Math.round(ms / 1000);
  if (byAge && heartbeatAgeMs > threshold) {
    entry.state = 'stale';
    entry.staleReason = `no heartbeat for ${s(heartbeatAgeMs)} s (stale after ${s(threshold)} s)`;
  } else if (unchangedMs !== undefined && unchangedMs > threshold) {
    entry.state = 'stale';
    const ahead = byAge ? '' : `, its mtime set ${s(aheadMs)} s in the future`;
    entry.staleReason = `unchanged for ${s(unchangedMs)} s while watched (stale after ${s(threshold)} s${ahead})`;
  }
  return entry;
}

/** Numbers the entries that count: 1 for the next to enter. */
export function numbered(entries: QueueEntry[]): QueueEntry[] {
  let position = 0;
  for (const e of entries) if (e.state === 'waiting') e.position = ++position;
  return entries;
}

/**
 * Removes a ticket judged stale, and no other: moves whatever has its name aside in one rename,
 * and if that was not the ticket judged (its waiter left and a newcomer took the same number in
 * the meantime), links it back. A planted directory is removed only when empty. True when the
 * ticket judged is gone from the line (by this call or another's).
 */
export async function removeTicket(io: Io, q: Dir, t: Pick<Ticket, 'name' | 'ino'>): Promise<boolean> {
  const aside = q.at(sideName(TICKET_ASIDE_PREFIX));
  try {
    await io.rename(q.at(t.name), aside);
  } catch (err) {
    // Gone already; or not ours to remove (another user's, in a sticky directory): skipped all the same.
    return errnoCode(err) === 'ENOENT';
  }
  const st = await io.lstatOrNull(aside).catch(() => null);
  if (st !== null && st.ino !== t.ino) await callsFor(io.sync).link(aside, q.at(t.name)).catch(() => undefined);
  await removeEntry(io, aside);
  return true;
}

async function removeEntry(io: Io, p: string): Promise<void> {
  await io.unlink(p).catch((err: unknown) => (errnoCode(err) === 'EISDIR' || errnoCode(err) === 'EPERM' ? io.rmdir(p) : undefined)).catch(() => undefined);
}

/**
 * Tickets moved aside and cache probes whose process is gone (at once on this host, after a minute
 * elsewhere). One whose mtime is in the future was never a step in flight: it goes at once.
 */
export async function clearLitter(io: Io, q: Dir, names: readonly string[], nowFsMs: number): Promise<void> {
  for (const name of names) {
    const prefix = name.startsWith(TICKET_ASIDE_PREFIX) ? TICKET_ASIDE_PREFIX : name.startsWith(QUEUE_PROBE_PREFIX) ? QUEUE_PROBE_PREFIX : undefined;
    if (prefix === undefined) continue;
    const turn = pause();
    if (turn !== undefined) await turn;
    const who = parseSideName(name, prefix);
    let litter: boolean;
    if (who !== undefined && who.hostname === thisMachine().hostname) litter = !isPidAlive(who.pid);
    else litter = await io.lstat(q.at(name)).then((st) => nowFsMs - st.mtimeMs > LITTER_MS || st.mtimeMs - nowFsMs > AHEAD_SLACK_MS, () => false);
    if (litter) await removeEntry(io, q.at(name));
  }
}

/** How a waiter is named in messages: `user@host (pid N, purpose)`, or why its ticket cannot be read; and a heartbeat set in the future. */
export function describeWaiter(e: Pick<QueueEntry, 'waiter' | 'unreadable' | 'heartbeatAheadMs'>): string {
  const w = e.waiter;
  const who =
    w === undefined
      ? `an unknown waiter (${printable(e.unreadable ?? 'its ticket cannot be read')})`
      : `${printable(w.user)}@${printable(w.hostname)} (pid ${w.pid}${w.purpose !== undefined ? `, ${printable(w.purpose)}` : ''})`;
  if (e.heartbeatAheadMs === undefined) return who;
  return `${who}, whose ticket's mtime is set ${Math.round(e.heartbeatAheadMs / 1000)} s in the future (only a waiter that watches it can judge it)`;
}
