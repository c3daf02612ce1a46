/**
 * Removing things: a whole staging area (destroy) and another holder's lock (force-release).
 * Both are recorded in the static directory's audit log before they act, and do not act when
 * that record cannot be written.
 */
import * as fs from 'fs';
import * as path from 'path';
import { fenceOf, removeInstance } from './lock/takeover';
import { ioFor } from './fs/io';
import { step } from './base/steps';
import { resolveArea, type Area } from './fs/tags';
import type { LockInfo, LockState, Timing } from './base/types';
import { openDir, openPath, type Dir } from './fs/anchored';
import { type AuditEntry, recordFailure, recordIntent } from './log/audit';
import { fsClockSkew } from './fs/clock';
import { recordHistory, removalEvent, type HistoryOptions } from './log/history';
import { StagingError, asStagingError } from './base/errors';
import { judgeLock, lockPathOf } from './lock/judge';
import { acquire } from './lock/lock';
import { describeHolder } from './lock/refusals';
import { findHeldInside } from './lock/nesting';
import { STAGING_MARKS, TIMESTAMP_FILE, clampTiming } from './base/protocol';

function previousOf(info: LockInfo): NonNullable<AuditEntry['previous']> {
  const p: NonNullable<AuditEntry['previous']> = { state: info.state };
  if (info.holder !== undefined) p.holder = info.holder;
  if (info.legacy !== undefined) p.legacy = info.legacy;
  if (info.heartbeatAgeMs !== undefined) p.heartbeatAgeMs = Math.round(info.heartbeatAgeMs);
  if (info.ageMs !== undefined) p.ageMs = Math.round(info.ageMs);
  return p;
}

export interface ForceReleaseOptions extends Partial<Timing>, HistoryOptions {
  clientId?: string;
  /**
   * The lock instance to remove, as the caller saw it (`LockInfo.holder.token`, or `LockInfo.lockId`
   * for a lock without a record): if another instance is there by the time it acts, nothing is
   * removed. Without it, the instance found first; a force-release never goes on to one that took
   * its place meanwhile.
   */
  expect?: { token?: string; lockId?: string };
}

/** The same lock instance as `expect` names. */
function isExpected(info: LockInfo, expect: NonNullable<ForceReleaseOptions['expect']>): boolean {
  if (expect.token !== undefined) return info.holder?.token === expect.token;
  return expect.lockId !== undefined && info.lockId === expect.lockId;
}

/**
 * A lock as someone was shown it before they agreed to act on it (a dialog): none (`free`), or one
 * instance in a state, named by its record's token (`LockInfo.holder.token`) or, for a lock without
 * a record, by `LockInfo.lockId`.
 */
export type ShownLock = { state: 'free' } | { state: Exclude<LockState, 'free'>; token?: string; lockId?: string };

/** What was shown of a judged lock, to be carried to the action (see `DestroyOptions.expect`). */
export function shownLock(info: LockInfo): ShownLock {
  if (info.state === 'free') return { state: 'free' };
  const token = info.holder?.token;
  return { state: info.state, ...(token !== undefined && token !== '' ? { token } : info.lockId !== undefined ? { lockId: info.lockId } : {}) };
}

/**
 * Why the lock found now is not the one shown (undefined when it is): another instance, a lock
 * where none was, or a stale lock whose holder came back. A lock that went stale since, or went
 * away, is no change: acting on it does no more than was agreed to.
 */
function unlikeShown(now: LockInfo, shown: ShownLock): boolean {
  if (now.state === 'free') return false;
  if (shown.state === 'free') return true;
  if (!isExpected(now, shown)) return true;
  return now.state === 'held' && shown.state === 'stale';
}

function changedError(area: Area, info: LockInfo): StagingError {
  return new StagingError(
    'ELOCKED',
    `The lock on ${area.dir} changed before it could be removed: the one meant is gone, and ${describeHolder(info)} holds it now. Nothing was removed; force-release again if that holder is gone too.`,
    { path: info.lockPath, lock: info, changed: true },
  );
}

/** The lock on an area is not the one its caller was shown: nothing was done. */
function notAsShownError(area: Area, info: LockInfo): StagingError {
  return new StagingError(
    'ELOCKED',
    `The lock on ${area.dir} is not the one that was shown: ${describeHolder(info)} holds it now (${info.state}). Nothing was removed.`,
    { path: info.lockPath, lock: info, changed: true },
  );
}

/**
 * Removes whoever's lock is on the area (ours, another process's, or the Python devserver's) and
 * records it in the audit log. Returns what the lock was. ENOTHELD when there is no lock.
 * A holder of ours learns of it within one refresh interval: its signal aborts.
 */
export async function forceRelease(staticDir: string, tag: string, options: ForceReleaseOptions = {}): Promise<LockInfo> {
  const timing = clampTiming(options);
  const area = await resolveArea(staticDir, tag);
  if (!area.exists) throw new StagingError('ENOENT', `There is no staging area ${area.dir}.`, { path: area.dir });
  const dir = await openExisting(area);
  try {
    return await forceReleaseIn(area, dir, timing, options);
  } finally {
    dir.close();
  }
}

/** Opens an existing area through descriptors, following links only to directories inside the static directory. */
export async function openExisting(area: Area): Promise<Dir> {
  const root = await openDir(area.realStaticDir, true);
  try {
    return await openPath(root, area.realStaticDir, area.segments, area.tag);
  } catch (err) {
    throw asStagingError(err, 'open', area.dir);
  } finally {
    root.close();
  }
}

async function forceReleaseIn(area: Area, dir: Dir, timing: Timing, options: ForceReleaseOptions): Promise<LockInfo> {
  const io = await ioFor(dir.at('.'), dir.dev);
  let expect = options.expect;
  for (let attempt = 0; attempt < 50; attempt++) {
    const skew = await fsClockSkew(area.realStaticDir);
    const nowFs = Date.now() + skew;
    const { info, identity } = await judgeLock({ ...area, opened: dir }, timing, nowFs);
    if (identity === undefined) {
      if (!info.exists) throw new StagingError('ENOENT', `There is no staging area ${area.dir}.`, { path: area.dir });
      throw new StagingError('ENOTHELD', `${area.dir} is not locked; nothing to release.`, { path: info.lockPath });
    }
    if (expect !== undefined && !isExpected(info, expect)) throw changedError(area, info);
    expect = info.holder !== undefined ? { token: info.holder.token } : info.lockId !== undefined ? { lockId: info.lockId } : undefined;
    // Recorded before it happens: a removal that cannot be recorded does not happen.
    const entry = { action: 'force-release', tag: area.tag, previous: previousOf(info) } as const;
    await recordIntent(area.staticDir, entry, options.clientId);
    step('forceRelease.recorded');
    let removed: boolean;
    try {
      removed = await removeInstance(dir, area.dir, identity, { requireSameMtime: false, staleMs: timing.staleMs, nowFsMs: nowFs, ...fenceOf(info) }, io);
      if (removed && info.legacy?.uniqueFile !== undefined) {
        // The Python holder's unique file: with the lock gone it only litters the area.
        await fs.promises.unlink(dir.at(info.legacy.uniqueFile)).catch(() => undefined);
      }
    } catch (err) {
      const e = asStagingError(err, 'remove the lock', info.lockPath);
      await recordFailure(area.staticDir, entry, e, options.clientId);
      throw e;
    }
    if (!removed) {
      // It changed under us (released, taken anew, or being removed by another): judge again.
      await recordFailure(area.staticDir, entry, 'the lock changed before it was removed; looking again', options.clientId);
      await new Promise((r) => setTimeout(r, 20));
      continue;
    }
    await recordHistory(area.staticDir, removalEvent(area.tag, 'force-released', info, options), options.warn);
    return info;
  }
  throw new StagingError('ELOCKED', `Could not force-release ${lockPathOf(area.dir)}: it kept changing. Try again.`, { path: lockPathOf(area.dir) });
}

/** Whether the opened directory holds a staging's bookkeeping (manifest or timestamp). */
async function isStaged(dir: Dir): Promise<boolean> {
  for (const name of STAGING_MARKS) {
    if ((await fs.promises.lstat(dir.at(name)).catch(() => null)) !== null) return true;
  }
  return false;
}

export interface DestroyOptions extends Partial<Timing>, HistoryOptions {
  /** Force-release a lock held by someone else first (recorded in the audit log). */
  force?: boolean;
  clientId?: string;
  /**
   * Only a staged build (a manifest or `staged.timestamp` in it, checked in the directory that
   * was locked): prune's choice was made from a listing that a co-user could have shown another
   * directory through a swapped link, and must not become the removal of, say, a whole board.
   */
  onlyStaged?: boolean;
  /**
   * The area's lock as the caller showed it before the user agreed (see `shownLock`): if another
   * lock is there now (another instance, a lock where there was none, a stale lock whose holder is
   * back), nothing is done (ELOCKED, with `changed`). Only that lock is broken with `force`, never
   * one below the area, which was not shown.
   */
  expect?: ShownLock;
}

/**
 * Removes a staging area: takes its lock, then releases it with destroy. Refused (ELOCKED) while
 * someone else holds it or a lock below it, unless `force`.
 */
export async function destroy(staticDir: string, tag: string, options: DestroyOptions = {}): Promise<void> {
  const timing = clampTiming(options);
  const area = await resolveArea(staticDir, tag);
  if (!area.exists) throw new StagingError('ENOENT', `There is no staging area ${area.dir}.`, { path: area.dir });
  const lst = await fs.promises.lstat(area.dir);
  if (lst.isSymbolicLink()) {
    throw new StagingError('EBADTAG', `${area.dir} is a symbolic link; destroy the area it points to instead.`, { path: area.dir });
  }
  const { expect, ...rest } = options;
  if (options.force === true || expect !== undefined) {
    const { info } = await judgeLock(area, timing, Date.now() + (await fsClockSkew(area.realStaticDir)));
    if (expect !== undefined && unlikeShown(info, expect)) throw notAsShownError(area, info);
    if (options.force === true && (info.state === 'held' || info.state === 'legacy')) {
      // The instance that was shown, and no other that took its place meanwhile.
      const instance = expect !== undefined && expect.state !== 'free' ? { expect: { ...(expect.token !== undefined ? { token: expect.token } : {}), ...(expect.lockId !== undefined ? { lockId: expect.lockId } : {}) } } : {};
      await forceRelease(staticDir, tag, { ...rest, ...instance });
    }
  }
  // With force, clear locks below it too: taking the area's lock is refused while one is held.
  for (let n = 0; options.force === true && expect === undefined && n < 1_000; n++) {
    const nested = await findHeldInside(area.dir, timing);
    if (nested === undefined) break;
    await forceRelease(staticDir, path.relative(area.staticDir, nested.dir), rest).catch(() => undefined);
  }
  const lease = await acquire(staticDir, tag, {
    ...timing,
    createOnce: false,
    purpose: 'destroy',
    ...(options.clientId !== undefined ? { clientId: options.clientId } : {}),
    ...(options.warn !== undefined ? { warn: options.warn } : {}),
  });
  if (options.onlyStaged === true && !(await isStaged(lease.area))) {
    await lease.release().catch(() => undefined);
    throw new StagingError('ENOENT', `Did not destroy ${area.dir}: it holds no manifest or ${TIMESTAMP_FILE}, so it is not a staged build.`, { path: area.dir });
  }
  // Recorded before it happens, under the lock: a destroy that cannot be recorded does not happen.
  const entry = { action: 'destroy', tag: area.tag } as const;
  try {
    await recordIntent(area.staticDir, entry, options.clientId);
  } catch (err) {
    await lease.release().catch(() => undefined);
    throw err;
  }
  try {
    await lease.release({ destroy: true });
  } catch (err) {
    await recordFailure(area.staticDir, entry, err, options.clientId);
    throw err;
  }
}
