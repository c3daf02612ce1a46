/**
 * Reservations: a lock held for a person, not a process. Its owner record says when it ends
 * (`reservedUntil`, in the filesystem's clock); until then a judge calls it held whatever its
 * holder's process and heartbeat say, after it stale, as a dead holder's lock is. Nobody refreshes
 * it: the process that reserved it has gone.
 *
 * The owner record is never rewritten (a holder tells its own lock by those bytes, and a rewrite
 * racing a force-release could put a record back into a lock being taken apart). A moved end goes
 * into the instance's work directory instead, `devserver.lock/work.<token>/reservation.json`, made
 * by name through the lock: once the reservation is force-released or taken over, that name leads
 * nowhere and the move fails, and whatever was written leaves with the work directory.
 *
 * Whose reservation it is, is what the kernel says: the owner of its work directory, which only
 * the process that made it (or root) could have made. Record fields are a co-user's text.
 */
import * as fs from 'fs';
import { openBelow, type Dir } from '../fs/anchored';
import { randomHex } from '../base/crypto';
import { StagingError, errnoCode } from '../base/errors';
import { parseObject } from '../base/holder';
import type { Io } from '../fs/io';
import { LOCK_NAME, MAX_RESERVATION_MS, OWNER_FILE, RESERVATION_FILE, WORK_PREFIX } from '../base/protocol';
import { parseDuration } from '../base/units';
import { step } from '../base/steps';
import { fsPath } from '../base/rawNames';
import type { Holder, ReservationInfo } from '../base/types';

/** A moved end is a few dozen bytes; anything larger is not one. */
const MAX_RECORD_BYTES = 4_096;

/** "4h", "1d", "90m" as a reservation's length: refused unless it is one, above zero and at most 30 days. */
export function reservationDuration(text: string): number {
  const ms = parseDuration(text);
  const max = MAX_RESERVATION_MS / 86_400_000;
  const next = [{ kind: 'give-duration', maxDays: max } as const];
  if (ms === undefined) {
    throw new StagingError('EBADDURATION', `${JSON.stringify(text)} is not a duration: a reservation lasts a number with a unit, such as 90m, 4h or 1d.`, { next });
  }
  if (ms <= 0) throw new StagingError('EBADDURATION', `A reservation of ${JSON.stringify(text)} would end at once.`, { next });
  if (ms > MAX_RESERVATION_MS) throw new StagingError('EBADDURATION', `A reservation of ${JSON.stringify(text)} is longer than ${max} days.`, { next });
  return ms;
}

/** The same check for a length given in milliseconds (the library's callers). */
export function checkReservationMs(ms: number): number {
  if (!Number.isFinite(ms) || ms <= 0 || ms > MAX_RESERVATION_MS) {
    throw new StagingError('EBADDURATION', `A reservation of ${String(ms)} ms is not between 1 ms and ${MAX_RESERVATION_MS / 86_400_000} days.`, {
      next: [{ kind: 'give-duration', maxDays: MAX_RESERVATION_MS / 86_400_000 }],
    });
  }
  return ms;
}

/** A recorded time in ms, or undefined when it is none (the epoch is a time). */
function timeOf(text: unknown): number | undefined {
  const t = typeof text === 'string' ? Date.parse(text) : NaN;
  return Number.isFinite(t) ? t : undefined;
}

/**
 * How a reservation stands, judged at `nowFsMs` (the filesystem's clock), for the lock at
 * `lockPath` whose record is `holder`. Undefined when the record's end is not a time: then the lock
 * is judged as any other, by its heartbeat. An end further than 30 days past when the lock was taken
 * (or its end was moved) is a planted one, and counts as ending then.
 */
export async function judgeReservation(lockPath: string, holder: Holder, nowFsMs: number): Promise<ReservationInfo | undefined> {
  const recorded = timeOf(holder.reservedUntil);
  if (recorded === undefined || holder.token === '') return undefined;
  const acquired = timeOf(holder.acquiredAt) ?? recorded;
  let untilMs = Math.min(recorded, acquired + MAX_RESERVATION_MS);
  const work = `${lockPath}/${WORK_PREFIX}${holder.token}`;
  const st = await fs.promises.lstat(fsPath(work)).catch(() => undefined);
  const ownerUid = st?.isDirectory() === true ? st.uid : undefined;
  const moved = ownerUid !== undefined ? await readMovedEnd(work, holder.token, ownerUid) : undefined;
  if (moved !== undefined) untilMs = Math.min(moved.untilMs, moved.movedAtMs + MAX_RESERVATION_MS);
  const info: ReservationInfo = { until: new Date(untilMs).toISOString(), ended: nowFsMs >= untilMs, leftMs: Math.max(0, untilMs - nowFsMs) };
  if (ownerUid !== undefined) {
    info.ownerUid = ownerUid;
    info.mine = ownerUid === process.getuid?.();
  }
  return info;
}

/**
 * The end its owner moved the reservation to, if it was moved: a record of this instance, in a
 * file the owner of its work directory owns. A work directory that others may write (made under
 * a permissive umask) may hold a co-user's file there, which moves nothing.
 */
async function readMovedEnd(work: string, token: string, ownerUid: number): Promise<{ untilMs: number; movedAtMs: number } | undefined> {
  const text = await readOwnedRecord(`${work}/${RESERVATION_FILE}`, ownerUid).catch(() => undefined);
  const r = text === undefined ? undefined : parseObject(text);
  if (r === undefined || r.token !== token) return undefined;
  const untilMs = timeOf(r.reservedUntil);
  const movedAtMs = timeOf(r.movedAt);
  return untilMs !== undefined && movedAtMs !== undefined ? { untilMs, movedAtMs } : undefined;
}

/** A small regular file's text, opened without following a link or waiting on a FIFO, if `uid` owns it (by `fstat` of what was opened). */
async function readOwnedRecord(p: string, uid: number): Promise<string | undefined> {
  const fh = await fs.promises.open(fsPath(p), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  try {
    const st = await fh.stat();
    if (!st.isFile() || st.uid !== uid || st.size > MAX_RECORD_BYTES) return undefined;
    const buf = Buffer.alloc(MAX_RECORD_BYTES + 1);
    let n = 0;
    for (let got = -1; got !== 0 && n < buf.length; n += got) got = (await fh.read(buf, n, buf.length - n, n)).bytesRead;
    return n > MAX_RECORD_BYTES ? undefined : buf.subarray(0, n).toString('utf8');
  } finally {
    await fh.close();
  }
}

/**
 * Opens the lock in `area` and, inside it, the work directory `workName`, each without following
 * a link, and hands `fn` the lock and the user id owning that work directory by `fstat` of it:
 * whose reservation it is, as the kernel says. 'gone' when that instance is not in place.
 */
export async function withReservation<T>(area: Dir, workName: string, fn: (lock: Dir, ownerUid: number) => Promise<T>): Promise<T | 'gone'> {
  let lock: Dir | undefined;
  let work: Dir | undefined;
  try {
    try {
      lock = await openBelow(area, LOCK_NAME);
      work = await openBelow(lock, workName);
    } catch (err) {
      const code = errnoCode(err);
      if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP') return 'gone';
      throw err;
    }
    return await fn(lock, fs.fstatSync(work.fd).uid);
  } finally {
    work?.close();
    lock?.close();
  }
}

/**
 * Sets the lock's mtime, through the descriptor of the very lock whose end was moved: watchers
 * hear of the new end, and a contender that judged the reservation ended just before sees the
 * lock changed and judges it again rather than take it.
 */
export function touchLock(lock: Dir, nowFsMs: number): void {
  const t = new Date(nowFsMs);
  fs.futimesSync(lock.fd, t, t);
}

/**
 * Moves the end of the reservation whose work directory is `workName`, by names through the lock:
 * 'gone' (nothing written anywhere) when that instance is no longer in place.
 */
export async function moveReservationEnd(io: Io, area: Dir, workName: string, token: string, untilMs: number, nowFsMs: number): Promise<'moved' | 'gone'> {
  const work = `${LOCK_NAME}/${workName}`;
  const temp = `${work}/${RESERVATION_FILE}.${randomHex(6)}`;
  const text = `${JSON.stringify({ token, reservedUntil: new Date(untilMs).toISOString(), movedAt: new Date(nowFsMs).toISOString() })}\n`;
  try {
    await io.writeNewFile(area.at(temp), text, 0o644);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return 'gone';
    throw err;
  }
  step('reservation.written');
  try {
    await io.rename(area.at(temp), area.at(`${work}/${RESERVATION_FILE}`));
  } catch (err) {
    await fs.promises.unlink(area.at(temp)).catch(() => undefined);
    if (errnoCode(err) === 'ENOENT') return 'gone';
    throw err;
  }
  return 'moved';
}

/**
 * Whether the instance whose work directory is `workName` is still whole, by names only it has: a
 * release, takeover or force-release takes it apart by first moving its owner record into that
 * directory, then moving the directory out (unlock.ts). Looked at in that order, so that a
 * take-apart between the two looks is seen by one of them.
 */
export async function stillWhole(io: Io, area: Dir, workName: string): Promise<boolean> {
  const work = `${LOCK_NAME}/${workName}`;
  if ((await io.lstatOrNull(area.at(`${work}/${OWNER_FILE}`))) !== null) return false;
  // A file made in the directory, not a look at it: a network client can answer a look from its
  // cache for a while after another client moved the directory out; a file made is the server's word.
  const probe = `${work}/${RESERVATION_FILE}.${randomHex(6)}`;
  try {
    await io.writeNewFile(area.at(probe), '', 0o644);
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT' || code === 'ENOTDIR') return false;
    throw err;
  }
  await fs.promises.unlink(area.at(probe)).catch(() => undefined);
  return true;
}
