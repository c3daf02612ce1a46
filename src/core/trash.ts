/**
 * Destroying a staging area: moved out of sight in one rename (observers see it whole or not at
 * all), then deleted. The rename is made through the descriptors of the directory the area is in
 * and of the trash, and what it moved is checked to be the area that was locked, holding our lock:
 * a co-user who swapped a directory for a link in between cannot send the removal elsewhere, and if
 * the area was taken from us meanwhile, it is put back untouched. The delete never follows a link
 * and never enters another filesystem (see anchored.ts).
 */
import * as fs from 'fs';
import * as path from 'path';
import { isWithin, openDir, openOrMakeBelow, removeTree, whereIs, type Dir } from './anchored';
import { randomHex } from './crypto';
import { openMeta } from './meta';
import { StagingError, asStagingError, errnoCode } from './errors';
import { META_TRASH_PREFIX, TRASH_DIR } from './protocol';
import { resolveStaticDir } from './tags';

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

/**
 * Moves the area `area` (opened; its tag is `tag`) to the static directory's trash and deletes it.
 * `isOurs` tells, after the move, whether the lock inside is still the caller's.
 */
export async function destroyArea(staticDir: string, area: Dir, tag: string, isOurs: () => Promise<boolean>): Promise<void> {
  const { realStaticDir } = await resolveStaticDir(staticDir);
  const shown = path.join(staticDir, tag);
  const name = tag.split('/').pop()!;
  const open: Dir[] = [];
  const track = (d: Dir): Dir => (open.push(d), d);
  try {
    const root = track(await openDir(realStaticDir, true));
    // Where the area is now, by the kernel's account: its parent must still be inside the static directory.
    const parent = track(await openDir(area.at('..'), true));
    if (!isWithin(realStaticDir, whereIs(parent))) {
      throw new StagingError('EBADTAG', `Refusing to destroy ${shown}: it was moved out of the static directory (to ${whereIs(area)}).`, { path: shown });
    }
    const st = await fs.promises.lstat(parent.at(name)).catch(() => null);
    if (st === null || st.ino !== area.ino || st.dev !== area.dev) {
      throw new StagingError('ENOENT', `Refusing to destroy ${shown}: the directory there is no longer the one that was locked (it was moved or replaced).`, { path: shown });
    }
    const id = `${Date.now().toString(36)}-${randomHex(4)}`;
    let trash: Dir;
    try {
      trash = track(await openOrMakeBelow(track(await openMeta(root)), TRASH_DIR));
    } catch (err) {
      throw new StagingError('EIO', `Did not destroy ${shown}: ${err instanceof Error ? err.message : String(err)}`, { path: shown, cause: err });
    }
    let where = trash;
    let moved = `${id}-${nameHint(name)}`;
    try {
      await fs.promises.rename(parent.at(name), trash.at(moved));
    } catch (err) {
      if (errnoCode(err) !== 'EXDEV') throw err;
      // The area is on another filesystem (a mount inside the static directory): a hidden sibling.
      where = parent;
      moved = `${META_TRASH_PREFIX}${id}`;
      await fs.promises.rename(parent.at(name), parent.at(moved));
    }
    const after = await fs.promises.lstat(where.at(moved));
    if (after.ino !== area.ino || !(await isOurs())) {
      // Replaced in the instant between the check and the rename, or no longer locked by us.
      await fs.promises.rename(where.at(moved), parent.at(name)).catch(() => undefined);
      throw new StagingError('ECOMPROMISED', `Did not destroy ${shown}: its lock is no longer ours.`, { path: shown });
    }
    try {
      await removeTree(where, moved);
    } catch (err) {
      throw asStagingError(err, 'delete (moved to the trash, out of sight already)', path.join(where.shown, moved));
    }
  } finally {
    for (const d of open.reverse()) d.close();
  }
}
