/**
 * The last fencing token of a destroyed area, kept outside it: a destroy removes the area's counter
 * with the area, and the next holder of an area made again by that name must still start above it.
 * The history records every token too, but is best effort (a full disk, a file planted in its place
 * and the token is nowhere); this record is not: a destroy that cannot write it does not happen.
 *
 * `<static>/.devserver-staging/floors/<h[0..2]>/<h>/<n>` (h: the hex SHA-256 of the tag, as for
 * its history): an empty file whose NAME is the token, as in the counter (fence.ts), so that the
 * number is never taken from a file's bytes. Created `O_EXCL|O_NOFOLLOW` with one link, its
 * directory flushed before the destroy goes on. Read, as a hint that only raises the count, only
 * where an area has no counter at all, past a network client's cache when the token is settled
 * (a destroy through another host may have written it since this client looked); names below the
 * newest are dropped by the next writer.
 */
import * as fs from 'fs';
import * as path from 'path';
import { createRecord, openBelow, openDir, openOrMakeBelow, type Dir } from '../fs/anchored';
import { openMeta } from '../fs/meta';
import { dropCachedListing } from '../fs/fresh';
import { StagingError, errnoCode, errnoHint } from '../base/errors';
import { FLOOR_DIR, META_DIR, historyDirOf } from '../base/protocol';
import { parseCount } from './fence';

/** Where the records of `tag` are, below the static directory, for messages. */
function shownFloorDir(staticDir: string, tag: string): string {
  return [staticDir, META_DIR, FLOOR_DIR, ...historyDirOf(tag)].join('/');
}

/** fsync of a directory is refused by some network filesystems: there the server's own order is all there is. */
const UNSUPPORTED_SYNC = new Set(['EINVAL', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS']);

/**
 * Records `token` as the last of `tag`, durably, before its area is destroyed. Rejects with EIO,
 * naming the record and what to do (then `after`), when it cannot: the caller then must not destroy.
 */
export async function recordFloor(staticDir: string, realStaticDir: string, tag: string, token: number, after = ''): Promise<void> {
  const shown = shownFloorDir(staticDir, tag);
  const opened: Dir[] = [];
  try {
    const top = await openDir(realStaticDir, true);
    opened.push(top);
    const mode = 0o755 | (top.mode & 0o2022);
    opened.push(await openMeta(top));
    for (const name of [FLOOR_DIR, ...historyDirOf(tag)]) opened.push(await openOrMakeBelow(opened.at(-1)!, name, { mode }));
    const dir = opened.at(-1)!;
    const names = await fs.promises.readdir(dir.at('.'));
    await createRecord(dir.at(String(token)), '', 0o644 | (dir.mode & 0o022)).catch((err: unknown) => {
      // Recorded already (a destroy tried before): the name is all that counts.
      if (errnoCode(err) !== 'EEXIST') throw err;
    });
    const fh = await fs.promises.open(dir.at('.'), fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
    try {
      await fh.sync().catch((err: unknown) => {
        if (!UNSUPPORTED_SYNC.has(errnoCode(err) ?? '')) throw err;
      });
    } finally {
      await fh.close();
    }
    for (const name of names) {
      const n = parseCount(name);
      if (n !== undefined && n < token) await fs.promises.unlink(dir.at(name)).catch(() => undefined);
    }
  } catch (err) {
    const code = errnoCode(err);
    const why = err instanceof StagingError ? err.message : `${code ?? String(err)}.${errnoHint(code)}`;
    throw new StagingError(
      'EIO',
      `Did not destroy ${path.join(staticDir, tag)}: could not record its last fencing token (${token}) in ${shown}, which the next holder of a build made again by this name must count on from: ${why} Make that path writable (or free space), then destroy again.${after}`,
      { path: shown, cause: err, ...(code === 'ENOSPC' || code === 'EDQUOT' ? { next: [{ kind: 'free-space', dir: staticDir }] } : {}) },
    );
  } finally {
    for (const d of opened.reverse()) d.close();
  }
}

/**
 * The greatest token recorded for `tag` by destroys (0: none, or the records cannot be read).
 * `fresh`: past a network client's caches, for the number a token is settled on; a destroy through
 * another host wrote it since this client last looked.
 */
export async function floorOf(realStaticDir: string, tag: string, fresh = false): Promise<number> {
  const opened: Dir[] = [];
  try {
    opened.push(await openDir(realStaticDir, true));
    for (const name of [META_DIR, FLOOR_DIR, ...historyDirOf(tag)]) {
      const parent = opened.at(-1)!;
      const below = await openBelow(parent, name).catch(async (err: unknown) => {
        if (!fresh || errnoCode(err) !== 'ENOENT') throw err;
        await dropCachedListing(parent.at('.'));
        return openBelow(parent, name);
      });
      opened.push(below);
    }
    const dir = opened.at(-1)!;
    if (fresh) await dropCachedListing(dir.at('.'));
    let max = 0;
    for (const name of await fs.promises.readdir(dir.at('.'))) max = Math.max(max, parseCount(name) ?? 0);
    return max;
  } catch {
    return 0;
  } finally {
    for (const d of opened.reverse()) d.close();
  }
}
