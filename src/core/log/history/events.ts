/**
 * What a line of the history says: the transitions, who made them, the lock a takeover removed,
 * and the events the operations record, built from what they know.
 */
import type { StagingError } from '../../base/errors';
import { thisProcess } from '../../base/holder';
import type { Holder, LockInfo } from '../../base/types';

/** The transitions of an area that the history records. */
export type HistoryKind = 'acquired' | 'released' | 'lost' | 'taken-over' | 'force-released' | 'destroyed' | 'staged' | 'verified' | 'reserved' | 'extended';

export const HISTORY_KINDS: readonly HistoryKind[] = ['acquired', 'released', 'lost', 'taken-over', 'force-released', 'destroyed', 'staged', 'verified', 'reserved', 'extended'];

/** A process that made a transition. */
export interface HistoryActor {
  user: string;
  hostname: string;
  pid: number;
  clientId: string;
  /** What the lock was for (the holder's purpose), where there was one. */
  purpose?: string;
}

/** The lock a takeover or force-release removed: as much as its record told. */
export interface HistoryPrevious {
  user?: string;
  hostname?: string;
  pid?: number;
  clientId?: string;
  purpose?: string;
  /** When it was taken (ISO 8601, the filesystem's clock). */
  acquiredAt?: string;
  /** The Python devserver's lock. */
  legacy?: boolean;
}

/** One line of the history. */
export interface HistoryEvent {
  /** The area's tag (normalised). */
  tag: string;
  kind: HistoryKind;
  /** When, ISO 8601 in the filesystem's clock (as a holder's `acquiredAt`), so hosts agree on the order. */
  time: string;
  /**
   * Who: the lock's holder for `acquired`, `released`, `lost`, `staged`, `destroyed` and `reserved`
   * (`extended`, and `released` of a reservation: the process of its owner that did it); the process
   * that removed the lock for `taken-over` and `force-released` (the holder it removed is
   * `previous`); the process that checked the build for `verified`.
   */
  holder: HistoryActor;
  /** The fencing token of the lock concerned (for `taken-over` and `force-released`: of the lock removed). */
  fence?: number;
  /** How long the lock was held: `released`, `lost`, `destroyed`, and (the removed lock's) `taken-over`, `force-released`. */
  heldMs?: number;
  /** `acquired`: how long the caller waited for the lock. */
  waitedMs?: number;
  /** `taken-over`, `force-released`: the holder of the lock removed. */
  previous?: HistoryPrevious;
  /** `lost`: why; `taken-over` of a reservation that had ended: when it ended. */
  reason?: string;
  /** `reserved`, `extended`: when the reservation ends (ISO 8601, the filesystem's clock); its note is the holder's `purpose`. */
  reservedUntil?: string;
  /** `staged`: artifacts written (added or replaced), artifacts found identical, bytes written. */
  artifacts?: number;
  skipped?: number;
  bytes?: number;
  /** `verified`: intact or not, the number of problems, the artifacts and bytes checked. */
  ok?: boolean;
  problems?: number;
  files?: number;
}

export interface HistoryOptions {
  /**
   * Hears what history could not do: a record that could not be written (the operation itself
   * went through), a segment skipped when reading (a link or FIFO in its place). Default:
   * `process.emitWarning`. Called at most once per record.
   */
  warn?: (warning: StagingError) => void;
}

/** The longest text kept from a purpose or reason: lines stay small, and reading them bounded. */
const MAX_TEXT = 500;

export function clip(text: string): string {
  return text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT)}…` : text;
}


/** The actor of an event from a holder record (or `thisProcess`). */
export function actorOf(h: Pick<Holder, 'user' | 'hostname' | 'pid' | 'clientId' | 'purpose'>): HistoryActor {
  const a: HistoryActor = { user: h.user, hostname: h.hostname, pid: h.pid, clientId: h.clientId };
  if (h.purpose !== undefined && h.purpose !== '') a.purpose = clip(h.purpose);
  return a;
}

/** This process as the actor of an event it records without holding the lock. */
export function thisActor(clientId?: string, purpose?: string): HistoryActor {
  return actorOf({ ...thisProcess(clientId), ...(purpose !== undefined ? { purpose } : {}) });
}

/** The removed lock of a takeover or force-release, from its judged state. */
export function previousOf(info: Pick<LockInfo, 'holder' | 'legacy'>): HistoryPrevious {
  if (info.legacy !== undefined) return { hostname: info.legacy.hostname, ...(info.legacy.pid !== undefined ? { pid: info.legacy.pid } : {}), legacy: true };
  if (info.holder === undefined) return {};
  const p: HistoryPrevious = actorOf(info.holder);
  if (info.holder.acquiredAt !== '') p.acquiredAt = info.holder.acquiredAt;
  return p;
}

/**
 * The event of a takeover or force-release: by this process, of the lock judged as `info` (its
 * token, its holder, how long it had been held where that is known).
 */
export function removalEvent(tag: string, kind: 'taken-over' | 'force-released', info: Pick<LockInfo, 'holder' | 'legacy' | 'ageMs' | 'reservation'>, by: { clientId?: string; purpose?: string }): NewHistoryEvent {
  return {
    tag,
    kind,
    holder: thisActor(by.clientId, by.purpose),
    ...(info.holder?.fence !== undefined ? { fence: info.holder.fence } : {}),
    ...(info.ageMs !== undefined ? { heldMs: Math.round(info.ageMs) } : {}),
    previous: previousOf(info),
    ...(info.reservation !== undefined ? { reason: `a reservation ${info.reservation.ended ? 'that ended' : 'until'} ${info.reservation.until}` } : {}),
  };
}

export type NewHistoryEvent = Omit<HistoryEvent, 'time'>;
