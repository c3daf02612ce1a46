/**
 * Why a lock cannot be taken, in words: who holds it (`describeHolder`), ELOCKED for a lock held,
 * a line that goes first, or an area held above or below, and ECANCELED for a wait given up.
 */
import * as path from 'path';
import { fsClockSkew } from '../fs/clock';
import { StagingError, type NextStep } from '../base/errors';
import { printable, printableTime } from '../base/format';
import { judgeLock, lockPathOf } from './judge';
import type { OpenedLockArea } from './options';
import type { NestingConflict } from './nesting';
import { describeWaiter } from './queue';
import type { Area } from '../fs/tags';
import type { LockInfo, QueueEntry, ReservationInfo, Timing } from '../base/types';

export function describeHolder(info: Pick<LockInfo, 'state' | 'holder' | 'legacy' | 'unreadable'> & { reservation?: ReservationInfo }): string {
  if (info.holder !== undefined) {
    const h = info.holder;
    const note = h.purpose !== undefined ? `, ${printable(h.purpose)}` : '';
    if (info.reservation !== undefined) return `${printable(h.user)}@${printable(h.hostname)} (reserved until ${printableTime(info.reservation.until)}${note})`;
    return `${printable(h.user)}@${printable(h.hostname)} (pid ${h.pid}${note})`;
  }
  if (info.legacy !== undefined) {
    return `the Python devserver on ${printable(info.legacy.hostname)}${info.legacy.pid !== undefined ? ` (pid ${info.legacy.pid})` : ''}`;
  }
  if (info.unreadable !== undefined) return `another process (${printable(info.unreadable)})`;
  return 'another process (no holder record)';
}

export function lockedError(info: LockInfo, line?: { shown: string; ahead: readonly QueueEntry[] }): StagingError {
  const reserved = info.state === 'held' && info.reservation !== undefined;
  const what = info.state === 'legacy' ? 'a legacy devserver lock' : reserved ? 'a reservation' : 'a lock';
  const at = { staticDir: info.staticDir, tag: info.tag };
  const legacy = info.state === 'legacy' ? ' Legacy locks are never taken over automatically.' : '';
  // A reservation's holder is a person, not a process that may be gone: ask them, or break it knowingly.
  const last: NextStep = reserved ? { kind: 'ask-owner', ...at } : { kind: 'force-release', ...at };
  const next: NextStep[] = info.state === 'legacy' ? [{ kind: 'force-release', ...at }] : [{ kind: 'wait', ...at }, last];
  // A stale lock stands in the way only when it could not be taken over: say why.
  const stale = info.state === 'stale' && info.staleReason !== undefined ? ` It is stale (${info.staleReason}).` : '';
  const waiting = line !== undefined && line.ahead.length > 0 ? ` ${capitalized(inLine(line))}.` : '';
  return new StagingError('ELOCKED', `${info.dir} is held: ${what} by ${describeHolder(info)}.${stale}${waiting}${legacy}`, { path: info.lockPath, lock: info, next });
}

/** `2 are waiting for it in line (<queue>), the first user@host (pid 42)`. */
function inLine({ shown, ahead }: { shown: string; ahead: readonly QueueEntry[] }): string {
  const n = ahead.length;
  return `${n} ${n === 1 ? 'is' : 'are'} waiting for it in line (${shown}), the first ${describeWaiter(ahead[0])}`;
}

const capitalized = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1);

/**
 * Why a caller that does not wait may not take a lock that others wait for: a free lock belongs
 * to the first in line, and one who comes later and does not wait must not take it in the moment
 * between a release and the next in line's taking it.
 */
export async function queuedError(area: Area, opened: OpenedLockArea, timing: Timing, line: { shown: string; ahead: readonly QueueEntry[] }, waitedMs: number): Promise<StagingError> {
  const nowFs = Date.now() + (await fsClockSkew(area.realStaticDir));
  const { info } = await judgeLock({ ...area, opened: opened.dir }, timing, nowFs);
  if (info.state !== 'free') return lockedError(info, line);
  const then = waitedMs > 0 ? ` This one waited ${Math.round(waitedMs / 1000)} s and they were still ahead of it.` : ' Those who wait go first.';
  const next: NextStep[] = waitedMs > 0 ? [] : [{ kind: 'join-line', staticDir: area.staticDir, tag: area.tag }];
  return new StagingError('ELOCKED', `${area.dir} is free, but ${inLine(line)}.${then}`, { path: line.shown, lock: info, next });
}

export function nestingError(area: Area, { info, relation }: NestingConflict): StagingError {
  const where = relation === 'above' ? 'which contains it' : 'inside it';
  const tag = path.relative(area.staticDir, info.dir).split(path.sep).join('/');
  return new StagingError(
    'ELOCKED',
    info.state === 'stale'
      ? `${area.dir} cannot be locked yet: ${tag}, ${where}, has a stale lock of ${describeHolder(info)} that another process is taking over, and holding an area covers everything below it.`
      : `${area.dir} cannot be locked: ${tag}, ${where}, is held by ${describeHolder(info)}, and holding an area covers everything below it.`,
    {
      path: info.lockPath,
      lock: info,
      next: [
        { kind: 'wait', staticDir: area.staticDir, tag: area.tag },
        { kind: 'force-release', staticDir: area.staticDir, tag },
      ],
    },
  );
}

export function cancelled(area: Area, signal: AbortSignal): StagingError {
  return new StagingError('ECANCELED', `Stopped waiting for the lock on ${area.dir}.`, { path: lockPathOf(area.dir), cause: signal.reason });
}
