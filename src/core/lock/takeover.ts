/**
 * Removing a lock that is not ours (a stale one, or on force-release), so that it is removed exactly
 * once and no newer lock in the same place is ever moved, whatever this process's pauses.
 *
 * A lock of this version holds its holder's work directory `work.<token>`, a name no other instance
 * has. It is taken apart by that name (unlock.ts), each step a rename or rmdir the file server
 * arbitrates: of several processes removing the same instance, each step succeeds for exactly one,
 * and a step aimed at an instance that is no longer in place fails having moved nothing. The work
 * directory is deleted, or kept as `devserver.lock.fenced.*` when it holds a commit its holder did
 * not finish (the next holder undoes it, see commit.ts); the fencing counter, if its holder took it
 * and never published it, is put back first (fence.ts).
 *
 * A lock without such a directory is foreign: an earlier build's, another tool's, or one planted.
 * Its removal takes a claim first: `mkdir devserver.lock.claim.<instance>.<n>` succeeds for exactly
 * one process per instance, named from the instance (its record's token, or its mtime), so a claim
 * on an old instance says nothing about a new one. The winner opens the lock, checks through that
 * descriptor that it is the instance judged, moves its entries out through it and removes the
 * emptied lock with `rmdir`, so that even a winner paused past its claim never moves the lock that
 * took its place. A claim left by a process that died goes stale like a lock; the next contender
 * then claims generation n+1.
 */
import * as fs from 'fs';
import * as path from 'path';
import { openBelow, readRecord, removeTree, type Dir } from '../fs/anchored';
import { StagingError, errnoCode } from '../base/errors';
import { raiseCounter } from './fence';
import { parseHolder, sideName } from '../base/holder';
import { asyncIo, type Io } from '../fs/io';
import type { LockIdentity } from './judge';
import { rmTreeSoon } from './lockfs';
import { CLAIM_PREFIX, LOCK_FENCED_PREFIX, LOCK_NAME, LOCK_TRASH_PREFIX, MAX_OWNER_BYTES, OWNER_FILE, WORK_PREFIX } from '../base/protocol';
import { step } from '../base/steps';
import { holdsUnfinishedCommit, putAside, removeEmptyLock } from './unlock';

/** The sticky bit of a directory's mode (S_ISVTX), which Node's constants do not name. */
const STICKY = 0o1000;

/** More generations than this means something keeps dying mid-takeover; give up rather than loop. */
const MAX_GENERATIONS = 16;

function instanceName(id: LockIdentity): string {
  return id.token ?? `m${Math.round(id.mtimeMs * 1000)}`;
}

/**
 * Claims the right to remove one foreign lock instance. Returns the claim's name in the area, or
 * undefined when another process holds a live claim on it (it is removing it right now).
 */
async function claimInstance(area: Dir, id: LockIdentity, claimStaleMs: number, nowFsMs: number): Promise<string | undefined> {
  const base = CLAIM_PREFIX + instanceName(id);
  for (let gen = 0; gen < MAX_GENERATIONS; gen++) {
    const claim = `${base}.${gen}`;
    try {
      await fs.promises.mkdir(area.at(claim));
      return claim;
    } catch (err) {
      if (errnoCode(err) !== 'EEXIST') throw err;
    }
    const st = await fs.promises.lstat(area.at(claim)).catch(() => undefined);
    // Gone already: its owner finished, and so the instance is gone too.
    if (st === undefined) return undefined;
    if (nowFsMs - st.mtimeMs <= claimStaleMs) return undefined;
  }
  return undefined;
}

async function dropClaim(area: Dir, claim: string): Promise<void> {
  const dot = claim.lastIndexOf('.');
  const gen = Number(claim.slice(dot + 1));
  // Earlier generations are claims of processes that died; with the instance gone they are litter.
  for (let g = gen; g >= 0; g--) {
    await fs.promises.rmdir(area.at(`${claim.slice(0, dot)}.${g}`)).catch(() => undefined);
  }
}

/** The owner token of the lock at `lockPath`, where its record can be read. */
function readToken(lockPath: string): Promise<string | undefined> {
  return readRecord(`${lockPath}/${OWNER_FILE}`, `${lockPath}/${OWNER_FILE}`, MAX_OWNER_BYTES).then(
    (text) => parseHolder(text)?.token || undefined,
    () => undefined,
  );
}

/** Whether what stands at `lockPath` now is the instance `id`, as this process sees it (its own client's inode numbers). */
async function isSameInstance(lockPath: string, id: LockIdentity, requireSameMtime: boolean): Promise<boolean> {
  const st = await asyncIo.lstatOrNull(lockPath).catch(() => null);
  if (st === null || st.ino !== id.ino || st.isDirectory() !== id.isDirectory) return false;
  if (requireSameMtime && st.mtimeMs !== id.mtimeMs) return false;
  if (!id.isDirectory) return true;
  // Inodes are reused at once on many filesystems; the owner token tells instances apart.
  return (await readToken(lockPath)) === id.token;
}

/**
 * Someone else's lock can only be taken apart as a user who may change what is inside it: as one
 * who may not (another user's lock in an area without group write), refuse before moving anything,
 * so that a failed takeover leaves the lock exactly where and as it was.
 */
async function checkRemovable(lockPath: string, shown: string): Promise<void> {
  const uid = process.getuid?.();
  if (uid === undefined || uid === 0) return;
  // In a sticky area (mode 1777, as shared directories often are) only an entry's owner, the
  // area's owner or root may remove or rename it: the lock's insides could be taken apart, but
  // not the lock itself, which would be left empty and the holder cut off. Refused whole instead.
  const areaSt = await fs.promises.stat(path.dirname(lockPath)).catch(() => undefined);
  if (areaSt !== undefined && (areaSt.mode & STICKY) !== 0 && areaSt.uid !== uid) {
    const lockSt = await fs.promises.lstat(lockPath).catch(() => undefined);
    if (lockSt !== undefined && lockSt.uid !== uid) {
      throw new StagingError(
        'ELOCKED',
        `Cannot remove the lock ${shown}: its directory is sticky (only an entry's owner may remove it there) and the lock belongs to another user. Ask its owner or root to remove it.`,
        { path: shown },
      );
    }
  }
  const entries = await fs.promises.readdir(lockPath, { withFileTypes: true }).catch(() => []);
  const dirs = [lockPath, ...entries.filter((e) => e.isDirectory()).map((e) => `${lockPath}/${e.name}`)];
  for (const d of dirs) {
    try {
      await fs.promises.access(d, fs.constants.W_OK | fs.constants.X_OK);
    } catch {
      throw new StagingError('ELOCKED', `Cannot remove the lock ${shown}: this user may not delete what is inside it (its holder's files). Ask its owner or root to remove it.`, {
        path: shown,
      });
    }
  }
}

export interface RemoveOptions {
  /** The judged lock was stale: its mtime must not have moved since (a heartbeat means its holder lives). */
  requireSameMtime: boolean;
  /** For a foreign lock's claim: how long a claim lives, and now by the filesystem's clock. */
  staleMs: number;
  nowFsMs: number;
  /** The removed lock's fencing token, from its record. */
  fence?: number;
}

/**
 * Removes the lock instance `id` from the area. True when this process removed it; false when it
 * is no longer in place (released, removed by another, replaced), has a heartbeat since it was
 * judged, or another process is removing it right now.
 */
export async function removeInstance(area: Dir, shownArea: string, id: LockIdentity, options: RemoveOptions, io: Io = asyncIo): Promise<boolean> {
  const lockPath = area.at(LOCK_NAME);
  const shown = path.join(shownArea, LOCK_NAME);
  if (id.isDirectory && id.hasWork === true && id.token !== undefined) {
    const workName = `${WORK_PREFIX}${id.token}`;
    if (options.requireSameMtime) {
      const st = await io.lstatOrNull(lockPath).catch(() => null);
      if (st === null || st.mtimeMs !== id.mtimeMs) return false;
    }
    await checkRemovable(lockPath, shown);
    step('takeover.checked');
    const aside = await putAside(io, area, workName, { restoreCounter: true, ...(options.fence !== undefined ? { raiseTo: { shownArea, token: options.fence } } : {}) });
    if (aside === 'lost') return false;
    await removeEmptyLock(io, area);
    step('takeover.removed');
    if (aside.kind === 'trash') await rmTreeSoon(io, area, aside.name).catch(() => undefined);
    return true;
  }
  return removeForeign(area, shown, id, options);
}

/** A lock without a work directory of its own: claimed, then taken apart through what was checked. */
async function removeForeign(area: Dir, shown: string, id: LockIdentity, options: RemoveOptions): Promise<boolean> {
  const claim = await claimInstance(area, id, options.staleMs, options.nowFsMs);
  if (claim === undefined) return false;
  try {
    return id.isDirectory ? await emptyForeign(area, shown, id, options) : await removeForeignFile(area, shown, id, options);
  } finally {
    await dropClaim(area, claim);
  }
}

/**
 * A foreign lock directory, opened and checked to be the instance judged, is emptied through that
 * descriptor into a side directory, then removed with `rmdir` by name. A claim only keeps out
 * contenders that look while it is fresh: one paused past it may resume after another contender
 * removed the lock and a new holder's took its place. Renaming `devserver.lock` by name would then
 * move that live lock; through the descriptor it only ever moves what this instance held, and the
 * `rmdir` fails on the live lock, which is never empty.
 */
async function emptyForeign(area: Dir, shown: string, id: LockIdentity, options: RemoveOptions): Promise<boolean> {
  let lock: Dir;
  try {
    lock = await openBelow(area, LOCK_NAME);
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP') return false;
    throw err;
  }
  let aside: string;
  let unfinished: boolean;
  try {
    if (!(await isSameInstance(lock.at('.'), id, options.requireSameMtime))) return false;
    step('takeover.foreignChecked');
    await checkRemovable(area.at(LOCK_NAME), shown);
    // Its token is never handed out again, even where the counter was set back meanwhile.
    if (options.fence !== undefined) await raiseCounter(asyncIo, area, path.dirname(shown), options.fence);
    unfinished = await holdsAnyUnfinished(lock.at('.'));
    aside = sideName(unfinished ? LOCK_FENCED_PREFIX : LOCK_TRASH_PREFIX);
    await fs.promises.mkdir(area.at(aside));
    // The record last: until it goes, what is left is still this instance, known by its token.
    const names = (await fs.promises.readdir(lock.at('.'))).sort((a, b) => Number(a === OWNER_FILE) - Number(b === OWNER_FILE));
    for (const name of names) {
      await fs.promises.rename(lock.at(name), area.at(`${aside}/${name}`)).catch((err: unknown) => {
        // Moved already by another contender taking this same instance apart.
        if (errnoCode(err) !== 'ENOENT') throw err;
      });
    }
  } finally {
    lock.close();
  }
  await removeEmptyLock(asyncIo, area);
  // Kept whole for the next holder, who undoes its commit first (commit.ts).
  if (unfinished) return true;
  // Retries: on FUSE, an owner record someone is reading lingers as `.fuse_hidden…` until closed.
  for (let tries = 3; ; tries--) {
    try {
      await removeTree(area, aside);
      return true;
    } catch (err) {
      if (tries === 0) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/**
 * A foreign lock that is a file (the Python devserver's, met by a force-release): moved aside whole
 * onto a placeholder file, checked, deleted. A rename onto a file fails for a directory, so should a
 * lock of this protocol have taken its place since the check, it is not moved.
 */
async function removeForeignFile(area: Dir, shown: string, id: LockIdentity, options: RemoveOptions): Promise<boolean> {
  const lockPath = area.at(LOCK_NAME);
  if (!(await isSameInstance(lockPath, id, options.requireSameMtime))) return false;
  step('takeover.foreignChecked');
  if (options.fence !== undefined) await raiseCounter(asyncIo, area, path.dirname(shown), options.fence);
  const aside = sideName(LOCK_TRASH_PREFIX);
  await fs.promises.writeFile(area.at(aside), '', { flag: fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW });
  try {
    await fs.promises.rename(lockPath, area.at(aside));
  } catch (err) {
    await fs.promises.unlink(area.at(aside)).catch(() => undefined);
    if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR' || errnoCode(err) === 'EISDIR') return false;
    throw err;
  }
  const st = await fs.promises.lstat(area.at(aside));
  if (st.ino !== id.ino) {
    // Only another file, put there by a process outside this protocol in the last instant: put it back.
    await fs.promises.rename(area.at(aside), lockPath).catch(() => undefined);
    return false;
  }
  await fs.promises.unlink(area.at(aside));
  return true;
}

/** Whether a foreign lock holds, in any of its work directories, a commit its holder did not finish. */
async function holdsAnyUnfinished(lockPath: string): Promise<boolean> {
  const entries = await fs.promises.readdir(lockPath).catch(() => [] as string[]);
  for (const name of entries) {
    if (name.startsWith(WORK_PREFIX) && (await holdsUnfinishedCommit(asyncIo, `${lockPath}/${name}`))) return true;
  }
  return false;
}

/** The removed lock's token, for `RemoveOptions`. */
export function fenceOf(info: { holder?: { fence?: number } }): { fence?: number } {
  return info.holder?.fence !== undefined ? { fence: info.holder.fence } : {};
}
