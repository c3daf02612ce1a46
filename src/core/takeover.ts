/**
 * Removing a lock that is not ours (a stale one, or on force-release) so that exactly one process
 * does it, and it removes the lock instance it judged, never a newer one in the same place.
 *
 * proper-lockfile's own takeover is `rmdir` then `mkdir`: two contenders that both judged the old
 * lock stale can each remove the lock the other just made, and both win. Here a contender first
 * claims the instance: `mkdir devserver.lock.claim.<instance>.<n>` succeeds for exactly one
 * process per instance, and the name is derived from the instance (inode plus owner token or
 * mtime), so a claim on an old instance says nothing about a new one. The winner checks that the
 * instance is still in place, renames it aside, deletes it and drops the claim. A claim left by a
 * process that died mid-takeover goes stale like a lock; the next contender then claims generation
 * n+1, so no claim is ever removed by two processes at once.
 */
import * as fs from 'fs';
import * as path from 'path';
import { readRecord, removeTree, type Dir } from './anchored';
import { StagingError, errnoCode } from './errors';
import { raiseFence } from './fence';
import { parseHolder, sideName } from './holder';
import { asyncIo } from './io';
import type { LockIdentity } from './judge';
import { CLAIM_PREFIX, COMMIT_FILE, LOCK_FENCED_PREFIX, LOCK_NAME, LOCK_TRASH_PREFIX, MAX_OWNER_BYTES, OWNER_FILE, WORK_PREFIX } from './protocol';

/** More generations than this means something keeps dying mid-takeover; give up rather than loop. */
const MAX_GENERATIONS = 16;

function instanceName(id: LockIdentity): string {
  return `${id.ino}.${id.token ?? `m${Math.round(id.mtimeMs * 1000)}`}`;
}

/**
 * Claims the right to remove one lock instance. Returns the claim's name in the area, or undefined
 * when another process holds a live claim on it (it is taking the lock over right now).
 */
export async function claimInstance(area: Dir, id: LockIdentity, claimStaleMs: number, nowFsMs: number): Promise<string | undefined> {
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

export async function dropClaim(area: Dir, claim: string): Promise<void> {
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

/** Whether what stands at `lockPath` now is the instance `id`. */
export async function isSameInstance(lockPath: string, id: LockIdentity, requireSameMtime: boolean): Promise<boolean> {
  const st = await asyncIo.lstatOrNull(lockPath).catch(() => null);
  if (st === null || st.ino !== id.ino || st.isDirectory() !== id.isDirectory) return false;
  if (requireSameMtime && st.mtimeMs !== id.mtimeMs) return false;
  if (!id.isDirectory) return true;
  // Inodes are reused at once on many filesystems; the owner token tells instances apart.
  return (await readToken(lockPath)) === id.token;
}

/**
 * Someone else's lock can only be removed whole: as a user who may not delete what is inside it
 * (another user's lock in an area without group write), refuse before moving anything, so that a
 * failed takeover leaves the lock exactly where and as it was.
 */
async function checkRemovable(lockPath: string, shown: string): Promise<void> {
  if (process.getuid?.() === 0) return;
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

/** Whether a moved lock instance holds a commit its holder did not finish (see commit.ts). */
async function holdsUnfinishedCommit(lockPath: string): Promise<boolean> {
  const entries = await fs.promises.readdir(lockPath).catch(() => [] as string[]);
  for (const name of entries) {
    if (!name.startsWith(WORK_PREFIX)) continue;
    if ((await asyncIo.lstatOrNull(`${lockPath}/${name}/${COMMIT_FILE}`).catch(() => null)) !== null) return true;
  }
  return false;
}

/**
 * Moves the lock instance aside and deletes it. Returns false (and moves nothing) when the
 * instance in the area is no longer `id`. `requireSameMtime`: the judged lock was stale, so its
 * mtime must not have moved (a heartbeat since means its holder is alive after all).
 *
 * The move is the fence: the holder's work directory lives inside its lock, and every change it
 * makes to the area goes through that directory by name, so from this rename on it can change
 * nothing. A holder cut off in the middle of a commit leaves its commit record in its work
 * directory: that instance is kept (as `devserver.lock.fenced.*`) for the area's next holder, which
 * undoes the commit before anything else (litter.ts), so no one finds half of a staging.
 */
export async function removeInstance(area: Dir, shownArea: string, id: LockIdentity, requireSameMtime: boolean, fence?: number): Promise<boolean> {
  const lockPath = area.at(LOCK_NAME);
  const shown = path.join(shownArea, LOCK_NAME);
  if (!(await isSameInstance(lockPath, id, requireSameMtime))) return false;
  if (id.isDirectory) await checkRemovable(lockPath, shown);
  // Its token must never be handed out again, even if its holder died before writing it down.
  await raiseFence(asyncIo, area, fence, shownArea);
  const aside = sideName(LOCK_TRASH_PREFIX);
  try {
    await fs.promises.rename(lockPath, area.at(aside));
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw err;
  }
  const st = await fs.promises.lstat(area.at(aside));
  if (st.ino !== id.ino) {
    // Only reachable if a process outside this protocol replaced the lock in the last instant: put it back.
    await fs.promises.rename(area.at(aside), lockPath).catch(() => undefined);
    return false;
  }
  if (id.isDirectory && (await holdsUnfinishedCommit(area.at(aside)))) {
    await fs.promises.rename(area.at(aside), area.at(sideName(LOCK_FENCED_PREFIX)));
    return true;
  }
  // Retries: on FUSE, an owner record someone is reading lingers as `.fuse_hidden…` until closed.
  for (let tries = 3; ; tries--) {
    try {
      await removeTree(area, aside);
      break;
    } catch (err) {
      if (tries === 0) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return true;
}
