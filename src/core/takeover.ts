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
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { errnoCode } from './errors';
import { parseHolder } from './holder';
import type { LockIdentity } from './judge';
import { CLAIM_PREFIX, LOCK_TRASH_PREFIX, OWNER_FILE } from './protocol';

/** More generations than this means something keeps dying mid-takeover; give up rather than loop. */
const MAX_GENERATIONS = 16;

function instanceName(id: LockIdentity): string {
  return `${id.ino}.${id.token ?? `m${Math.round(id.mtimeMs * 1000)}`}`;
}

/**
 * Claims the right to remove one lock instance. Returns the claim's path, or undefined when another
 * process holds a live claim on it (it is taking the lock over right now).
 */
export async function claimInstance(dir: string, id: LockIdentity, claimStaleMs: number, nowFsMs: number): Promise<string | undefined> {
  const base = path.join(dir, CLAIM_PREFIX + instanceName(id));
  for (let gen = 0; gen < MAX_GENERATIONS; gen++) {
    const claim = `${base}.${gen}`;
    try {
      await fs.promises.mkdir(claim);
      return claim;
    } catch (err) {
      if (errnoCode(err) !== 'EEXIST') throw err;
    }
    const st = await fs.promises.lstat(claim).catch(() => undefined);
    // Gone already: its owner finished, and so the instance is gone too.
    if (st === undefined) return undefined;
    if (nowFsMs - st.mtimeMs <= claimStaleMs) return undefined;
  }
  return undefined;
}

export async function dropClaim(claim: string): Promise<void> {
  const dot = claim.lastIndexOf('.');
  const gen = Number(claim.slice(dot + 1));
  // Earlier generations are claims of processes that died; with the instance gone they are litter.
  for (let g = gen; g >= 0; g--) {
    await fs.promises.rmdir(`${claim.slice(0, dot)}.${g}`).catch(() => undefined);
  }
}

function readToken(lockPath: string): Promise<string | undefined> {
  return fs.promises.readFile(path.join(lockPath, OWNER_FILE), 'utf8').then(
    (text) => parseHolder(text)?.token || undefined,
    () => undefined,
  );
}

/** Whether what stands at `lockPath` now is the instance `id`. */
export async function isSameInstance(lockPath: string, id: LockIdentity, requireSameMtime: boolean): Promise<boolean> {
  const st = await fs.promises.lstat(lockPath).catch(() => undefined);
  if (st === undefined || st.ino !== id.ino || st.isDirectory() !== id.isDirectory) return false;
  if (requireSameMtime && st.mtimeMs !== id.mtimeMs) return false;
  if (!id.isDirectory) return true;
  // Inodes are reused at once on many filesystems; the owner token tells instances apart.
  return (await readToken(lockPath)) === id.token;
}

/**
 * Renames the lock instance aside and deletes it. Returns false (and moves nothing) when the
 * instance at `lockPath` is no longer `id`. `requireSameMtime`: the judged lock was stale, so its
 * mtime must not have moved (a heartbeat since means its holder is alive after all).
 */
export async function removeInstance(lockPath: string, id: LockIdentity, requireSameMtime: boolean): Promise<boolean> {
  if (!(await isSameInstance(lockPath, id, requireSameMtime))) return false;
  const aside = path.join(path.dirname(lockPath), `${LOCK_TRASH_PREFIX}${crypto.randomBytes(6).toString('hex')}`);
  try {
    await fs.promises.rename(lockPath, aside);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw err;
  }
  const st = await fs.promises.lstat(aside);
  if (st.ino !== id.ino) {
    // Only reachable if a process outside this protocol replaced the lock in the last instant: put it back.
    await fs.promises.rename(aside, lockPath).catch(() => undefined);
    return false;
  }
  // Retries: on FUSE, an owner record someone is reading lingers as `.fuse_hidden…` until closed.
  await fs.promises.rm(aside, { recursive: true, force: true, maxRetries: 3 });
  return true;
}
