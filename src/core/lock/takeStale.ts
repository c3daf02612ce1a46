/**
 * Taking a stale lock out of the way: the area's own, met by an attempt, or one above or inside
 * the area, met by the nesting check. Either way exactly one contender removes that instance
 * (takeover.ts), which fences its holder: its work directory leaves the lock, so a holder that was
 * only paused can write nothing through it when it resumes. The takeover is recorded in history.
 */
import * as path from 'path';
import { openDir, openPath, type Dir } from '../fs/anchored';
import { StagingError, errnoCode } from '../base/errors';
import { step } from '../base/steps';
import { recordHistory, removalEvent } from '../log/history';
import { ioFor } from '../fs/io';
import { judgeLock, type Judged } from './judge';
import { fenceOf, removeInstance } from './takeover';
import type { AcquireOptions } from './options';
import type { Area } from '../fs/tags';
import type { LockInfo, Timing } from '../base/types';

/**
 * Removes the stale lock judged in `opened` (the area's directory, opened by the caller). True once
 * that instance is gone; false when it is not ours to remove (its holder beat since, another
 * contender is removing it). A failure of the filesystem comes back as the lock with why in its
 * stale reason.
 */
export async function takeOverStale(
  opened: Dir,
  area: Pick<Area, 'staticDir' | 'tag' | 'dir'>,
  judged: Judged,
  timing: Timing,
  nowFsMs: number,
  options: AcquireOptions,
): Promise<boolean | LockInfo> {
  const { info, identity } = judged;
  if (info.state !== 'stale' || identity === undefined) return false;
  step('takeover.judged');
  try {
    // A heartbeat since we judged it means its holder lives: then the lock is not ours to take.
    const requireSameMtime = info.holderAlive !== false;
    const io = await ioFor(opened.at('.'), opened.dev);
    if (!(await removeInstance(opened, area.dir, identity, { requireSameMtime, staleMs: timing.staleMs, nowFsMs, ...fenceOf(info) }, io))) return false;
    await recordHistory(area.staticDir, removalEvent(area.tag, 'taken-over', info, options), options.warn);
    return true;
  } catch (err) {
    if (err instanceof StagingError) return { ...info, staleReason: `${info.staleReason ?? 'stale'}; ${err.message}` };
    throw err;
  }
}

/**
 * Takes over the stale lock of `dir`, an area above or inside the one being locked, opened level by
 * level from the static directory as any area is (a link only to inside it). True once no stale
 * lock is there (taken over, or gone already); false when it could not be taken or the way there
 * cannot be opened (then it keeps standing in the way).
 */
export async function takeOverNested(area: Pick<Area, 'staticDir' | 'realStaticDir'>, dir: string, timing: Timing, nowFsMs: number, options: AcquireOptions): Promise<boolean> {
  const segments = path.relative(area.staticDir, dir).split(path.sep);
  if (segments.length === 0 || segments.some((s) => s === '' || s === '.' || s === '..')) return false;
  const tag = segments.join('/');
  let current: Dir | undefined;
  try {
    const root = await openDir(area.realStaticDir, true);
    try {
      current = await openPath(root, area.realStaticDir, segments, tag);
    } finally {
      root.close();
    }
    const judged = await judgeLock({ staticDir: area.staticDir, tag, dir, opened: current }, timing, nowFsMs);
    if (judged.info.state === 'free') return true;
    return (await takeOverStale(current, { staticDir: area.staticDir, tag, dir }, judged, timing, nowFsMs, options)) === true;
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT') return true;
    if (code === 'ENOTDIR' || code === 'ELOOP' || code === 'EACCES' || code === 'EPERM' || err instanceof StagingError) return false;
    throw err;
  } finally {
    current?.close();
  }
}
