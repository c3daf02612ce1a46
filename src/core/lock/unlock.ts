/**
 * Taking a lock instance apart, by its holder (release) or by whoever removes it (takeover,
 * force-release), without ever moving or removing another instance, whatever this process's
 * pauses.
 *
 * The name `devserver.lock` belongs to whichever instance is in place *now*: a process that renames
 * it aside after checking that it is the one it means can be paused between the two, and then moves
 * a newer holder's live lock. So nothing here names the lock itself but `rmdir`, which only removes
 * an empty directory (a live lock never is). Everything else is done by names only one instance has:
 *
 * 1. the owner record goes into the instance's work directory
 *    (`devserver.lock/owner.json` -> `devserver.lock/work.<token>/owner.json`): if another instance is
 *    in place, it has no `work.<token>`, and the rename fails having moved nothing;
 * 2. the fencing counter, if the holder took it and never published it, goes back (fence.ts), and
 *    one who removes another's lock raises it to that lock's token;
 * 3. the work directory leaves the lock, in one rename of its unique name: to be deleted
 *    (`devserver.lock.trash.*`), or kept for the next holder as `devserver.lock.fenced.*` when it
 *    holds a commit that was not finished (commit.ts);
 * 4. the lock, now empty, is removed with `rmdir`. If it is not empty, either a contender's lock
 *    replaced ours the moment it was empty (a rename onto an empty directory replaces it, on a local
 *    filesystem) and holds an owner record or a work directory, and we are done; or what is left
 *    is ours (a FUSE client's `.fuse_hidden…`, something planted), since no one can put a lock in
 *    place of a directory that is not empty, and it is removed.
 * Each step is one rename or rmdir that the file server arbitrates, so of several processes doing
 * this to one instance at once (a takeover cut off and another taking over from it) each step is
 * done exactly once, and the others' fail harmlessly.
 */
import { openBelow, removeTree, type Dir } from '../fs/anchored';
import { errnoCode } from '../base/errors';
import { raiseCounter, restoreCarriers } from './fence';
import { sideName } from '../base/holder';
import type { Io } from '../fs/io';
import { COMMIT_FILE, LOCK_FENCED_PREFIX, LOCK_NAME, LOCK_TRASH_PREFIX, OWNER_FILE, WORK_PREFIX } from '../base/protocol';
import { step } from '../base/steps';

/** Where `putAside` moved a work directory. */
export interface Aside {
  /** 'trash': to delete; 'fenced': kept for the next holder; 'to': where the caller asked. */
  kind: 'trash' | 'fenced' | 'to';
  /** Its name in the area (for 'trash' and 'fenced'). */
  name: string;
}

export interface PutAsideOptions {
  /** Put back the fencing counter if it is in the work directory (a holder that never published its token). */
  restoreCounter: boolean;
  /** Move the work directory there rather than beside the lock (release with destroy). */
  to?: { dir: Dir; name: string };
  /**
   * One who removes a lock that is not its own: raise the counter to that lock's token before the
   * lock can be taken by anyone else, so the token is never handed out again (fence.ts).
   */
  raiseTo?: { shownArea: string; token: number };
}

/** Whether the work directory at `p` holds a commit its holder did not finish (commit.ts). */
export async function holdsUnfinishedCommit(io: Io, p: string): Promise<boolean> {
  // What cannot be looked at is taken to hold one: keeping a work directory costs little, deleting a commit's set-asides loses a build.
  return (await io.lstatOrNull(`${p}/${COMMIT_FILE}`).catch(() => true)) !== null;
}

/**
 * Steps 1 to 3 above for the instance whose work directory is `workName`. 'lost' when that
 * instance is not in place (its work directory is gone: released, taken away, or never there).
 */
export async function putAside(io: Io, area: Dir, workName: string, options: PutAsideOptions): Promise<Aside | 'lost'> {
  const work = `${LOCK_NAME}/${workName}`;
  const record = `${LOCK_NAME}/${OWNER_FILE}`;
  const workThere = async (): Promise<boolean> => (await io.lstatOrNull(area.at(work)).catch(() => null)) !== null;
  try {
    await io.rename(area.at(record), area.at(`${work}/${OWNER_FILE}`));
  } catch (err) {
    const code = errnoCode(err);
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw err;
    // No record in place: a release or takeover of this instance was cut off after this step.
    if (!(await workThere())) return 'lost';
  }
  step('unlock.recordMoved');
  if (options.restoreCounter) await restoreCarriers(io, area, work);
  if (options.raiseTo !== undefined) await raiseCounter(io, area, options.raiseTo.shownArea, options.raiseTo.token);
  step('unlock.counterRestored');
  let aside: Aside;
  let target: string;
  if (options.to !== undefined) {
    aside = { kind: 'to', name: options.to.name };
    target = options.to.dir.at(options.to.name);
  } else {
    const fenced = await holdsUnfinishedCommit(io, area.at(work));
    aside = fenced ? { kind: 'fenced', name: sideName(LOCK_FENCED_PREFIX) } : { kind: 'trash', name: sideName(LOCK_TRASH_PREFIX) };
    target = area.at(aside.name);
  }
  try {
    await io.rename(area.at(work), target);
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT' && !(await workThere())) return 'lost';
    // A full disk, an I/O error: the lock stays whole, record and all, and goes stale; whoever
    // takes it over next does this again. Nothing it holds is lost.
    await io.rename(area.at(`${work}/${OWNER_FILE}`), area.at(record)).catch(() => undefined);
    throw err;
  }
  step('unlock.workMoved');
  return aside;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Step 4 above: removes the emptied lock, or leaves the instance that took its place. */
export async function removeEmptyLock(io: Io, area: Dir): Promise<void> {
  for (let tries = 0; tries < 40; tries++) {
    try {
      await io.rmdir(area.at(LOCK_NAME));
      return;
    } catch (err) {
      const code = errnoCode(err);
      if (code === 'ENOENT' || code === 'ENOTDIR') return;
      if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
    }
    let names: string[];
    try {
      names = await io.readdir(area.at(LOCK_NAME));
    } catch {
      return;
    }
    // Another instance is in place now: it is not ours to touch.
    if (names.some((n) => n === OWNER_FILE || n.startsWith(WORK_PREFIX))) return;
    let lock: Dir;
    try {
      lock = await openBelow(area, LOCK_NAME);
    } catch {
      return;
    }
    let hidden = false;
    try {
      for (const name of names) {
        // A FUSE client keeps a file another process of it has open as `.fuse_hidden…` until it is closed.
        if (name.startsWith('.fuse_hidden')) hidden = true;
        else await removeTree(lock, name).catch(() => undefined);
      }
    } finally {
      lock.close();
    }
    if (hidden) await sleep(25);
  }
}
