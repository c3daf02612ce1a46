/**
 * Reservations (lock/reservation.ts): a build's lock taken for a person, held until an end its
 * owner names, moved or released by that owner only; others break it only by force-release.
 * "Its owner" is the user the kernel says owns the reservation's work directory, never a field of
 * its record, which a co-user can copy.
 */
import { ioFor } from './fs/io';
import { resolveArea, type Area } from './fs/tags';
import type { Dir } from './fs/anchored';
import { fsClockSkew } from './fs/clock';
import { StagingError } from './base/errors';
import { step } from './base/steps';
import { clampTiming, WORK_PREFIX } from './base/protocol';
import { printable, printableTime } from './base/format';
import { recordHistory, thisActor, type HistoryOptions } from './log/history';
import { acquire } from './lock/lock';
import { inspect } from './lock/inspect';
import { judgeLock } from './lock/judge';
import { describeHolder } from './lock/refusals';
import { checkReservationMs, moveReservationEnd, stillWhole, touchLock, withReservation } from './lock/reservation';
import { putAside, removeEmptyLock } from './lock/unlock';
import { rmTreeSoon } from './lock/lockfs';
import { openExisting } from './remove';
import type { OnQueue } from './lock/queue';
import type { Holder, LockInfo, ReservationInfo, Timing } from './base/types';

/** The longest note kept: it is shown on one line beside the build. */
const MAX_NOTE = 200;

export interface ReserveOptions extends Partial<Timing>, HistoryOptions {
  /** How long the reservation lasts, in ms: above zero, at most 30 days. */
  forMs: number;
  /** What it is for, shown to others (the lock's purpose). */
  note?: string;
  /** How long to wait, in line, while someone else holds the lock. Default 0: fail at once. */
  waitMs?: number;
  clientId?: string;
  signal?: AbortSignal;
  onQueue?: OnQueue;
}

/**
 * Takes the lock of the existing build `tag` as any lock is taken (its line, its nesting, its
 * fencing token), with an end in its record, and leaves it held: the lock outlives this process
 * until that end. Returns the lock as judged once left.
 */
export async function reserve(staticDir: string, tag: string, options: ReserveOptions): Promise<LockInfo> {
  const forMs = checkReservationMs(options.forMs);
  const { note, forMs: _forMs, ...rest } = options;
  const area = await resolveArea(staticDir, tag);
  if (!area.exists) throw new StagingError('ENOENT', `There is no build ${area.dir} to reserve.`, { path: area.dir });
  const lease = await acquire(staticDir, tag, {
    ...rest,
    createOnce: false,
    reserveForMs: forMs,
    ...(note !== undefined && note.trim() !== '' ? { purpose: note.trim().slice(0, MAX_NOTE) } : {}),
  });
  await lease.leaveReserved();
  return inspect(staticDir, tag, options);
}

export interface ReservationOptions extends Partial<Timing>, HistoryOptions {
  clientId?: string;
  /**
   * The reservation meant, as its caller was shown it (`LockInfo.holder.token`): if another lock
   * instance is there now, nothing is done.
   */
  token?: string;
}

/** The owner's reservation in an opened area, as judged now, checked to be this user's. */
interface Own {
  info: LockInfo & { holder: Holder; reservation: ReservationInfo };
  workName: string;
  nowFs: number;
}

function goneError(area: Area): StagingError {
  return new StagingError('ENOTHELD', `The reservation of ${area.dir} that was meant is no longer there: it was released, force-released or taken over since. The lock there now was not touched.`, {
    path: area.dir,
    next: [{ kind: 'reserve-again', staticDir: area.staticDir, tag: area.tag }],
  });
}

function endedError(area: Area, lockPath: string, until: string): StagingError {
  return new StagingError('ENOTHELD', `The reservation of ${area.dir} ended at ${printableTime(until)}; an ended one is not moved, since another may take the build now.`, {
    path: lockPath,
    next: [{ kind: 'reserve-again', staticDir: area.staticDir, tag: area.tag }],
  });
}

/**
 * The reservation on the opened area, judged now and checked to be this user's, handed to `fn`
 * with its lock opened (see `withReservation`): refused when it is not a reservation, not the one
 * meant (`token`), gone, or another user's.
 */
async function onOwnReservation<T>(area: Area, dir: Dir, timing: Timing, token: string | undefined, what: string, fn: (own: Own, lock: Dir) => Promise<T>): Promise<T> {
  const nowFs = Date.now() + (await fsClockSkew(area.realStaticDir));
  const { info } = await judgeLock({ ...area, opened: dir }, timing, nowFs);
  const at = { staticDir: area.staticDir, tag: area.tag };
  if (token !== undefined && info.holder?.token !== token) throw goneError(area);
  if (info.state === 'free') throw new StagingError('ENOTHELD', `${area.dir} is not reserved; nothing to ${what}.`, { path: info.lockPath });
  if (info.reservation === undefined || info.holder === undefined) {
    throw new StagingError('ENOTHELD', `${area.dir} is not reserved: it is locked by ${describeHolder(info)}, which only its holder releases.`, {
      path: info.lockPath,
      lock: info,
      next: [{ kind: 'force-release', ...at }],
    });
  }
  const own: Own = { info: info as Own['info'], workName: `${WORK_PREFIX}${info.holder.token}`, nowFs };
  const done = await withReservation(dir, own.workName, async (lock, uid) => {
    if (uid !== process.getuid?.()) {
      throw new StagingError(
        'ENOTOWNER',
        `${area.dir} is reserved by another user (uid ${uid}, whose record says ${describeHolder(info)}): only that user can ${what} it.`,
        { path: info.lockPath, lock: info, next: [{ kind: 'ask-owner', ...at }] },
      );
    }
    // Checked: from here on only the names of this instance are acted on (a pause here must not matter).
    step('reservation.checked');
    return { value: await fn(own, lock) };
  });
  if (done === 'gone') throw goneError(area);
  return done.value;
}

/** Opens the existing area and hands it to `fn`, closing it after. */
async function inArea<T>(staticDir: string, tag: string, fn: (area: Area, dir: Dir) => Promise<T>): Promise<T> {
  const area = await resolveArea(staticDir, tag);
  if (!area.exists) throw new StagingError('ENOENT', `There is no staging area ${area.dir}.`, { path: area.dir });
  const dir = await openExisting(area);
  try {
    return await fn(area, dir);
  } finally {
    dir.close();
  }
}

/**
 * Moves the end of this user's reservation of `tag` to `forMs` from now (sooner or later). Refused
 * for a reservation that has ended (reserve anew), another user's (ENOTOWNER), a lock that is not
 * a reservation, and one that was released, force-released or taken over since (ENOTHELD).
 */
export async function extendReservation(staticDir: string, tag: string, options: ReservationOptions & { forMs: number }): Promise<LockInfo> {
  const forMs = checkReservationMs(options.forMs);
  return inArea(staticDir, tag, (area, dir) =>
    onOwnReservation(area, dir, clampTiming(options), options.token, 'extend', async (own, lock) => {
      const { info } = own;
      if (info.reservation.ended) throw endedError(area, info.lockPath, info.reservation.until);
      // The end checked above may have passed during a pause since: a taker may judge it ended
      // from then on, and take the lock apart while the move is written. So the move must be
      // seen whole before the old end, by the filesystem's clock, or it is not reported as done.
      const oldEnd = Date.parse(info.reservation.until);
      const nowFs = async (): Promise<number> => Date.now() + (await fsClockSkew(area.realStaticDir));
      if ((await nowFs()) >= oldEnd) throw endedError(area, info.lockPath, info.reservation.until);
      const untilMs = own.nowFs + forMs;
      const io = await ioFor(dir.at('.'), dir.dev);
      if ((await moveReservationEnd(io, dir, own.workName, info.holder.token, untilMs, own.nowFs)) === 'gone') throw goneError(area);
      // A take-apart begun before the move landed would carry the new end away with the lock.
      if (!(await stillWhole(io, dir, own.workName))) throw goneError(area);
      touchLock(lock, own.nowFs);
      const until = new Date(untilMs).toISOString();
      await recordHistory(
        area.staticDir,
        { tag: area.tag, kind: 'extended', holder: thisActor(options.clientId, info.holder.purpose), ...(info.holder.fence !== undefined ? { fence: info.holder.fence } : {}), reservedUntil: until },
        options.warn,
      );
      if ((await nowFs()) >= oldEnd) {
        throw new StagingError(
          'ENOTHELD',
          `The end of the reservation of ${area.dir} was moved only after its old end (${printableTime(info.reservation.until)}) had passed, when another could already have taken the build: it may no longer be yours, so look at who holds it now.`,
          { path: info.lockPath, next: [{ kind: 'reserve-again', staticDir: area.staticDir, tag: area.tag }] },
        );
      }
      return { ...info, reservation: { ...info.reservation, until, leftMs: forMs } };
    }),
  );
}

/**
 * Releases this user's reservation of `tag`, ended or not, by the names only that lock instance
 * has (unlock.ts): one released, force-released or taken over since is never touched.
 */
export async function releaseReservation(staticDir: string, tag: string, options: ReservationOptions = {}): Promise<LockInfo> {
  return inArea(staticDir, tag, (area, dir) =>
    onOwnReservation(area, dir, clampTiming(options), options.token, 'release', async ({ info, workName }) => {
      const io = await ioFor(dir.at('.'), dir.dev);
      const aside = await putAside(io, dir, workName, { restoreCounter: true });
      if (aside === 'lost') throw goneError(area);
      await removeEmptyLock(io, dir);
      if (aside.kind === 'trash') await rmTreeSoon(io, dir, aside.name).catch(() => undefined);
      await recordHistory(
        area.staticDir,
        {
          tag: area.tag,
          kind: 'released',
          holder: thisActor(options.clientId, info.holder.purpose),
          ...(info.holder.fence !== undefined ? { fence: info.holder.fence } : {}),
          ...(info.ageMs !== undefined ? { heldMs: Math.round(info.ageMs) } : {}),
          reservedUntil: info.reservation.until,
        },
        options.warn,
      );
      return info;
    }),
  );
}

/** "alice until 2026-11-27T16:00:00Z: flashing DUT-3", for messages. */
export function describeReservation(info: Pick<LockInfo, 'holder' | 'reservation'>): string {
  const h = info.holder;
  const until = info.reservation !== undefined ? printableTime(info.reservation.until) : '?';
  return `${h !== undefined ? printable(h.user) : '?'} until ${until}${h?.purpose !== undefined ? `: ${printable(h.purpose)}` : ''}`;
}
