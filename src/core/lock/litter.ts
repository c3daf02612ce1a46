/**
 * What holders that died or were cut off leave in an area, cleared by the next holder right after
 * it takes the lock (no one else may change the area then):
 * - `devserver.lock.fenced.*`: a lock (or a work directory) taken away or let go of in the middle
 *   of a commit; its commit is undone first (commit.ts), then it is deleted. An undo that cannot
 *   finish keeps it, and the acquire fails (EUNFINISHED) with nothing else changed;
 * - `devserver.lock.new.*` and `devserver.lock.trash.*` of a process that is gone: a lock that was
 *   being built, or one being deleted, when its process was killed;
 * - `devserver.lock.probe.*` (a judge's look past a network client's cache) left for a minute;
 * - `.devserver-staging.part.*`: partial files of stagers of earlier versions, which wrote them in
 *   the area itself.
 * Claims (`devserver.lock.claim.*`) are the takeover's and are left to it.
 */
import * as fs from 'fs';
import { removeTree, type Dir } from '../fs/anchored';
import { allEntries } from './nesting';
import { undoFencedDir } from './commit';
import { restoreCarriers } from './fence';
import { isPidAlive, parseSideName, thisMachine } from '../base/holder';
import type { Io } from '../fs/io';
import { LOCK_FENCED_PREFIX, LOCK_NAME, LOCK_NEW_PREFIX, LOCK_PROBE_PREFIX, LOCK_TRASH_PREFIX, PART_PREFIX, isAreaMark } from '../base/protocol';
import type { Timing } from '../base/types';

/** A judge's probe lives for a second or so; one a minute old was left by a process that died. */
const PROBE_LITTER_MS = 60_000;

/** Whether a `sideName` thing belongs to a process that is gone: at once on this host, after a while elsewhere. */
async function isDeadOwners(area: Dir, name: string, prefix: string, timing: Timing): Promise<boolean> {
  const who = parseSideName(name, prefix);
  if (who !== undefined && who.hostname === thisMachine().hostname) return !isPidAlive(who.pid);
  // Another host's pid cannot be checked: wait well past anything a live process would take.
  const st = await fs.promises.lstat(area.at(name)).catch(() => null);
  return st !== null && Date.now() - st.mtimeMs > Math.max(6 * timing.staleMs, 60_000);
}

/**
 * Clears the litter of dead and fenced holders in an area whose lock the caller has just taken.
 * Returns the area's listing as it was read (the nesting check walks on from it).
 */
export async function clearLitter(io: Io, area: Dir, timing: Timing): Promise<fs.Dirent[]> {
  const entries = await allEntries(area.at('.'), io);
  // Unfinished commits first: until each is undone, nothing else here may change. A taker that
  // could not give what it took aside a fenced name (a full disk) left it as trash.
  for (const { name } of entries) {
    const kept = name.startsWith(LOCK_FENCED_PREFIX) || (name.startsWith(LOCK_TRASH_PREFIX) && (await isDeadOwners(area, name, LOCK_TRASH_PREFIX, timing)));
    if (!kept) continue;
    const undone = await undoFencedDir(area, name);
    if (!undone.complete) throw undone.error;
  }
  for (const { name } of entries) {
    if (!name.startsWith(LOCK_NAME) && !name.startsWith(PART_PREFIX)) continue;
    let litter = false;
    if (name.startsWith(LOCK_FENCED_PREFIX)) {
      litter = true;
    } else if (name.startsWith(LOCK_NEW_PREFIX)) {
      litter = await isDeadOwners(area, name, LOCK_NEW_PREFIX, timing);
    } else if (name.startsWith(LOCK_TRASH_PREFIX)) {
      litter = await isDeadOwners(area, name, LOCK_TRASH_PREFIX, timing);
    } else if (name.startsWith(LOCK_PROBE_PREFIX)) {
      const st = await io.lstatOrNull(area.at(name)).catch(() => null);
      litter = st !== null && Date.now() - st.mtimeMs > PROBE_LITTER_MS;
    } else if (name.startsWith(PART_PREFIX)) {
      litter = true;
    }
    // A holder that took the fencing counter and died before publishing it left it in its work
    // directory: back into the counter before that directory goes.
    if (litter && name.startsWith(LOCK_NAME)) await restoreCarriers(io, area, name);
    if (!litter) continue;
    try {
      // A directory holding a lock or a build's marks is an area, whatever it is called: a co-user
      // who may rename in this folder could otherwise have its next holder delete another's build.
      await removeTree(area, name, { sync: io.sync, keep: (inside) => inside.some(isAreaMark) });
    } catch {
      /* left for the next holder */
    }
  }
  return entries;
}
