/**
 * A line of the history as an event, keeping only an event's fields of the right types: the files
 * are writable by co-users, so a line may be anything.
 */
import { type HistoryActor, type HistoryEvent, type HistoryKind, type HistoryPrevious, HISTORY_KINDS, clip } from './events';

const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isText = (v: unknown): v is string => typeof v === 'string';

function parseActor(v: unknown): HistoryActor | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const r = v as Record<string, unknown>;
  if (!isText(r.hostname) || !isCount(r.pid)) return undefined;
  const a: HistoryActor = { user: isText(r.user) ? r.user : 'unknown', hostname: r.hostname, pid: r.pid, clientId: isText(r.clientId) ? r.clientId : `${r.hostname}:${r.pid}` };
  if (isText(r.purpose)) a.purpose = clip(r.purpose);
  return a;
}

function parsePrevious(v: unknown): HistoryPrevious | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const r = v as Record<string, unknown>;
  const p: HistoryPrevious = {};
  for (const k of ['user', 'hostname', 'clientId', 'purpose', 'acquiredAt'] as const) if (isText(r[k])) p[k] = clip(r[k]);
  if (isCount(r.pid)) p.pid = r.pid;
  if (r.legacy === true) p.legacy = true;
  return p;
}

/**
 * One line as an event, keeping only the fields of an event and of the right types: the files are
 * writable by co-users, so a line may be anything. Undefined for a line that is not an event.
 */
export function parseEvent(text: string): HistoryEvent | undefined {
  return parseTimed(text)?.e;
}

/** `parseEvent`, with the event's time in milliseconds since the epoch: readers order by it, and parse it once. */
export function parseTimed(text: string): { e: HistoryEvent; t: number } | undefined {
  if (text === '' || text[0] !== '{') return undefined;
  let r: Record<string, unknown>;
  try {
    r = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (typeof r !== 'object' || r === null || !isText(r.tag) || !isText(r.time) || !HISTORY_KINDS.includes(r.kind as HistoryKind)) return undefined;
  const t = Date.parse(r.time);
  if (!Number.isFinite(t)) return undefined;
  const holder = parseActor(r.holder);
  if (holder === undefined) return undefined;
  const e: HistoryEvent = { tag: r.tag, kind: r.kind as HistoryKind, time: r.time, holder };
  for (const k of ['fence', 'heldMs', 'waitedMs', 'artifacts', 'skipped', 'bytes', 'problems', 'files'] as const) if (isCount(r[k])) e[k] = r[k];
  const previous = parsePrevious(r.previous);
  if (previous !== undefined) e.previous = previous;
  if (isText(r.reason)) e.reason = clip(r.reason);
  // Written anew from its value: the text is a co-user's, and may hide a line in a comment that Date.parse skips.
  const until = isText(r.reservedUntil) ? Date.parse(r.reservedUntil) : NaN;
  if (Number.isFinite(until) && Math.abs(until) <= 8.64e15) e.reservedUntil = new Date(until).toISOString();
  if (typeof r.ok === 'boolean') e.ok = r.ok;
  return { e, t };
}
