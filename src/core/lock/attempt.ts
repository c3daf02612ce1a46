/**
 * One attempt at taking a lock: a fencing token proposed, the lock taken with proper-lockfile
 * through the lock filesystem, the token settled and nesting checked; or the lock in the way
 * judged, and a stale one taken over by exactly one contender.
 */
import type { Dirent } from 'fs';
import * as path from 'path';
import * as lockfile from 'proper-lockfile';
import type { Dir } from '../fs/anchored';
import { fsClockSkew } from '../fs/clock';
import { StagingError, asStagingError, errnoCode } from '../base/errors';
import { proposeToken, settleToken, stagedToken, type FenceContext } from './fence';
import { floorOf } from './floor';
import { makeHolder } from '../base/holder';
import { history } from '../log/history';
import { ioFor } from '../fs/io';
import { judgeLock, lockPathOf } from './judge';
import { Lease } from './lease';
import { clearLitter } from './litter';
import type { AcquireOptions, OpenedLockArea } from './options';
import { makeLockFs, rememberPrecision, workOf, type LockFsState } from './lockfs';
import { LOCK_TARGET, WORK_PREFIX } from '../base/protocol';
import { findNestingConflict } from './nesting';
import { nestingError } from './refusals';
import { takeOverNested, takeOverStale } from './takeStale';
import type { Area } from '../fs/tags';
import type { LockInfo, Timing } from '../base/types';

/**
 * Holding an area covers everything below it. Checked once our own lock is taken, so that of two
 * processes taking nested areas at once, at least one sees the other (see nesting.ts); on a
 * conflict ours is let go again, and the caller waits or fails as for a held lock.
 */
async function checkNesting(lease: Lease, area: Area, timing: Timing, listing: readonly Dirent[], options: AcquireOptions): Promise<Lease | StagingError> {
  const nowFs = Date.now() + (await fsClockSkew(area.realStaticDir));
  // A stale lock above or inside is taken over, not stepped past: its holder may only be paused,
  // and until its lock is taken apart it could still write below ours when it resumes.
  const conflict = await findNestingConflict(area, timing, nowFs, listing, (dir) => takeOverNested(area, dir, timing, nowFs, options));
  if (conflict === undefined) return lease;
  await lease.release().catch(() => undefined);
  return nestingError(area, conflict);
}

/** Mode of the lock and work directories: readable by all, writable by whoever may write the area. */
function lockModeFor(area: Dir): number {
  return 0o755 | (area.mode & 0o022);
}

/** One attempt: the lease, 'retry', 'vanished' (the area is gone), or the judged lock that stands in the way. */
export async function tryAcquire(
  area: Area,
  opened: OpenedLockArea,
  timing: Timing,
  options: AcquireOptions,
  counter: { hint: number },
): Promise<Lease | StagingError | 'retry' | 'vanished' | LockInfo> {
  const skewMs = await fsClockSkew(area.realStaticDir);
  // The area may be on another filesystem than the static directory (a mount inside it).
  const io = await ioFor(opened.dir.at('.'), opened.dir.dev);
  let fence: number;
  let mode: number;
  let fenceCtx: FenceContext;
  try {
    fenceCtx = {
      io,
      area: opened.dir,
      shownArea: area.dir,
      floor: Math.max(counter.hint, await stagedToken(io, opened.dir, area.dir)),
      recordedElsewhere: (fresh) => tokenRecordedElsewhere(area, fresh),
    };
    fence = await proposeToken(fenceCtx);
    mode = lockModeFor(opened.dir);
  } catch (err) {
    // The opened area was removed meanwhile (a destroy next door).
    if (errnoCode(err) === 'ENOENT' || errnoCode((err as { cause?: unknown }).cause) === 'ENOENT') return 'vanished';
    throw err;
  }
  const holder = makeHolder({
    staleMs: timing.staleMs,
    refreshMs: timing.refreshMs,
    acquiredAtMs: Date.now() + skewMs,
    fence,
    ...(options.clientId !== undefined ? { clientId: options.clientId } : {}),
    ...(options.purpose !== undefined ? { purpose: options.purpose } : {}),
    ...(options.reserveForMs !== undefined ? { reserveForMs: options.reserveForMs } : {}),
  });
  const lockPath = lockPathOf(area.dir);
  const state: LockFsState = {
    io,
    area: opened.dir,
    lockPath,
    ownerJson: `${JSON.stringify(holder, null, 2)}\n`,
    workName: `${WORK_PREFIX}${holder.token}`,
    mode,
    skewMs,
    created: false,
    dev: opened.dir.dev,
  };
  const lease = new Lease(area, opened, holder, timing, state);
  const lockFs = makeLockFs(state);
  try {
    const release = await lockfile.lock(path.join(area.dir, LOCK_TARGET), {
      lockfilePath: lockPath,
      realpath: false,
      stale: timing.staleMs,
      update: timing.refreshMs,
      retries: 0,
      fs: lockFs,
      onCompromised: (err) => lease.lose(err),
    });
    rememberPrecision(lockFs, state);
    lease.attach(release);
  } catch (err) {
    // The area was removed between creating or finding it and locking it (a destroy, or a
    // create-once attempt next door cleaning up after itself).
    if (errnoCode(err) === 'ENOENT') return 'vanished';
    if (errnoCode(err) !== 'EEXIST') throw asStagingError(err, 'take the lock', lockPath);
    return judgeInTheWay(area, opened, timing, skewMs, options);
  }
  try {
    // Whatever holders that died or were fenced left here is ours to clear now (before the token:
    // a counter one of them took is put back); the listing that tells serves the nesting check.
    const listing = await clearLitter(io, opened.dir, timing);
    try {
      await settleToken(fenceCtx, workOf(state), fence);
      state.settled = true;
    } catch (err) {
      const code = errnoCode(err);
      // The counter was not where the proposal expected it (another holder came and went since it
      // was read, or a client's cache answered), or the lock was taken away already: let go, and
      // propose anew above what was found.
      if (code === 'ERETRY' || code === 'ELOST') {
        const hint = (err as { hint?: unknown }).hint;
        if (typeof hint === 'number') counter.hint = Math.max(counter.hint, hint);
        await lease.releaseQuietly();
        return 'retry';
      }
      throw err;
    }
    return await checkNesting(lease, area, timing, listing, options);
  } catch (err) {
    await lease.releaseQuietly();
    throw err;
  }
}

/**
 * The greatest fencing token recorded for the area outside it: by its destroys (floor.ts) and in its
 * history. Where an area has no counter at all (it was destroyed and made again, or its counter was
 * removed), its tokens go on above those.
 */
async function tokenRecordedElsewhere(area: Area, fresh: boolean): Promise<number> {
  // Quietly: what cannot be read there (a link planted in its place) is said by whoever reads the history for itself.
  const events = await history(area.staticDir, { tag: area.tag, limit: 1_000, warn: () => undefined }).catch(() => []);
  let max = await floorOf(area.realStaticDir, area.tag, fresh);
  for (const e of events) if (e.fence !== undefined && e.fence > max) max = e.fence;
  return max;
}

/** The lock exists: judge it, and take it over if it is stale (exactly one contender does). */
async function judgeInTheWay(area: Area, opened: OpenedLockArea, timing: Timing, skewMs: number, options: AcquireOptions): Promise<'retry' | LockInfo> {
  const nowFs = Date.now() + skewMs;
  const judged = await judgeLock({ ...area, opened: opened.dir }, timing, nowFs);
  if (judged.info.state === 'free') return 'retry';
  if (judged.info.state !== 'stale' || judged.identity === undefined) return judged.info;
  const taken = await takeOverStale(opened.dir, area, judged, timing, nowFs, options);
  return taken === true ? 'retry' : taken === false ? judged.info : taken;
}
