/**
 * Destroying a staging area its caller holds: a transaction under the lock, like a staging's commit
 * (commit.ts), so that a destroy cut off at any instant leaves the build whole.
 *
 * Moving the area itself away in one rename would need its name, and a holder paused between its
 * last look and that rename (longer than the stale threshold) would move a newer holder's live lock
 * with the area. So nothing here names the area or its lock to move them: every entry of the area
 * goes into the holder's work directory, each by one rename whose destination is named through the
 * lock (`devserver.lock/work.<token>/d.<n>`), so that once the lock was taken away nothing more
 * moves. The moves are written down first (`commit.json`, as set-asides with nothing placed): a
 * destroy cut off before its end is undone by the next holder like any unfinished commit, and the
 * build comes back whole. The work directory then leaves the area for the static directory's trash,
 * in one rename of its unique name (the point of no return), the emptied lock is removed, the area
 * directory is removed if it is empty, and the trash is deleted without following links or crossing
 * filesystems (see anchored/remove.ts). Observers see the build lose its manifest first, then its files,
 * then its directory.
 */
import * as path from 'path';
import { createRecord, isWithin, openDir, openOrMakeBelow, removeTree, whereIs, type Dir } from '../fs/anchored';
import { COMMIT_PART, commitText, undoCommit, type CommitStep } from './commit';
import { randomHex } from '../base/crypto';
import { StagingError, asStagingError, errnoCode } from '../base/errors';
import { sideName } from '../base/holder';
import type { Io } from '../fs/io';
import { openMeta } from '../fs/meta';
import { COMMIT_FILE, FENCE_FILE, LOCK_NAME, LOCK_TRASH_PREFIX, MANIFEST_FILE, TIMESTAMP_FILE, TRASH_DIR, isProtocolName } from '../base/protocol';
import { step } from '../base/steps';
import { putAside, removeEmptyLock } from './unlock';

/**
 * The start of a name, at most 100 UTF-8 bytes and never cut inside a character: the area's own
 * name may already use all 255 bytes a name can have, so the id cannot just be prepended to it.
 */
function nameHint(name: string): string {
  let out = '';
  for (const ch of name) {
    if (Buffer.byteLength(out + ch) > 100) break;
    out += ch;
  }
  return out;
}

export interface HeldArea {
  /** The static directory as configured, and its real path. */
  staticDir: string;
  realStaticDir: string;
  /** The area, opened when it was locked. */
  area: Dir;
  tag: string;
  io: Io;
  /** The holder's work directory's name inside the lock (`work.<token>`). */
  workName: string;
}

/**
 * Destroys the area `held` locks, and with it the lock (see above). ECOMPROMISED, with the build
 * whole (or its undo left to the next holder), if the lock is lost meanwhile.
 */
export async function destroyHeld(held: HeldArea): Promise<void> {
  const { area, io } = held;
  const shown = path.join(held.staticDir, held.tag);
  const work = `${LOCK_NAME}/${held.workName}`;
  const lost = (): StagingError => new StagingError('ECOMPROMISED', `Did not destroy ${shown}: its lock is no longer ours.`, { path: shown });
  const open: Dir[] = [];
  const track = (d: Dir): Dir => (open.push(d), d);
  try {
    if (!isWithin(held.realStaticDir, whereIs(area))) {
      throw new StagingError('EBADTAG', `Refusing to destroy ${shown}: it was moved out of the static directory (to ${whereIs(area)}).`, { path: shown });
    }
    const root = track(await openDir(held.realStaticDir, true));
    let trash: Dir;
    try {
      trash = track(await openOrMakeBelow(track(await openMeta(root)), TRASH_DIR));
    } catch (err) {
      throw new StagingError('EIO', `Did not destroy ${shown}: ${err instanceof Error ? err.message : String(err)}`, { path: shown, cause: err });
    }
    // The build's marks first: from the first rename on, nobody takes what is left for a build.
    const first = [MANIFEST_FILE, TIMESTAMP_FILE];
    const names = (await io.readdir(area.at('.'))).filter((n) => n !== LOCK_NAME);
    names.sort((x, y) => rank(first, x) - rank(first, y));
    // What others left beside the lock (probes, locks being built, claims) goes too, but is not put back.
    const steps: CommitStep[] = [];
    const others: string[] = [];
    for (const name of names) {
      if (isPutBack(name)) steps.push({ to: name, aside: `d.${steps.length}` });
      else others.push(name);
    }
    const workPlace = { at: (name: string) => area.at(`${work}/${name}`), shown: path.join(shown, work) };
    try {
      await createRecord(workPlace.at(COMMIT_PART), commitText(steps), 0o644);
      await io.rename(workPlace.at(COMMIT_PART), workPlace.at(COMMIT_FILE));
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') throw lost();
      throw asStagingError(err, 'destroy', shown);
    }
    step('destroy.recorded');
    const moves = [...steps.map((st) => ({ from: st.to, to: st.aside! })), ...others.map((name, i) => ({ from: name, to: `o.${i}` }))];
    let done = 0;
    try {
      for (const m of moves) {
        try {
          await io.rename(area.at(m.from), workPlace.at(m.to));
        } catch (err) {
          if (errnoCode(err) !== 'ENOENT') throw err;
          if ((await io.lstatOrNull(area.at(work)).catch(() => null)) === null) throw lost();
          // Gone already (a probe of a judge, a lock being built next door): nothing to keep.
        }
        done++;
        step('destroy.moved');
      }
    } catch (err) {
      // Whole or not at all: put back what was moved, then say why (a mount inside, say).
      if (!(err instanceof StagingError && err.code === 'ECOMPROMISED')) {
        const undone = await undoCommit(area, workPlace, steps);
        if (undone.complete) await io.unlink(workPlace.at(COMMIT_FILE)).catch(() => undefined);
      }
      if (errnoCode(err) === 'EBUSY' || errnoCode(err) === 'EXDEV') {
        throw new StagingError('EIO', `Did not destroy ${shown}: another filesystem is mounted at ${path.join(shown, moves[done].from)}. Unmount it, then destroy again.`, { path: shown, cause: err });
      }
      throw asStagingError(err, 'destroy', shown);
    }
    // The point of no return: the work directory, and everything in it, leaves the area.
    const id = `${Date.now().toString(36)}-${randomHex(4)}-${nameHint(held.tag.split('/').pop()!)}`;
    let where: Dir = trash;
    let moved = id;
    const aside = await putAside(io, area, held.workName, { restoreCounter: false, to: { dir: trash, name: id } }).catch(async (err: unknown) => {
      if (errnoCode(err) !== 'EXDEV') throw err;
      // The area is on another filesystem than the static directory (a mount inside it).
      where = area;
      moved = sideName(LOCK_TRASH_PREFIX);
      return putAside(io, area, held.workName, { restoreCounter: false, to: { dir: area, name: moved } });
    });
    if (aside === 'lost') throw lost();
    step('destroy.committed');
    await removeEmptyLock(io, area);
    if (where === area) await removeTree(area, moved).catch(() => undefined);
    await removeAreaDir(held, area, shown);
    try {
      await removeTree(where, moved);
    } catch (err) {
      throw asStagingError(err, 'delete (moved to the trash, out of sight already)', path.join(where.shown, moved));
    }
  } finally {
    for (const d of open.reverse()) d.close();
  }
}

/** What a destroy cut off puts back: the build and its bookkeeping, not what others left beside the lock. */
function isPutBack(name: string): boolean {
  return name === MANIFEST_FILE || name === FENCE_FILE || !isProtocolName(name);
}

function rank(first: readonly string[], name: string): number {
  const i = first.indexOf(name);
  return i < 0 ? first.length : i;
}

/** Removes the area's directory if it is still the one that was locked and is empty now. */
async function removeAreaDir(held: HeldArea, area: Dir, shown: string): Promise<void> {
  const name = held.tag.split('/').pop()!;
  let parent: Dir;
  try {
    parent = await openDir(area.at('..'), true);
  } catch {
    return;
  }
  try {
    if (!isWithin(held.realStaticDir, whereIs(parent))) return;
    const st = await held.io.lstatOrNull(parent.at(name)).catch(() => null);
    if (st === null || st.ino !== area.ino || st.dev !== area.dev) return;
    await held.io.rmdir(parent.at(name)).catch((err: unknown) => {
      const code = errnoCode(err);
      // Something was made in it meanwhile (a new build by its name): it is theirs now.
      if (code === 'ENOTEMPTY' || code === 'EEXIST' || code === 'ENOENT') return;
      if (code === 'EBUSY') throw new StagingError('EIO', `Destroyed the build in ${shown}, but another filesystem is mounted there, so its directory stays. Unmount it to remove it.`, { path: shown });
      throw asStagingError(err, 'remove the directory of', shown);
    });
  } finally {
    parent.close();
  }
}
