/**
 * A path below a root opened one level at a time, a link on the way followed only where the kernel
 * places what it leads to inside the root; and the path comparisons that judge "inside".
 */
import * as fs from 'fs';
import * as path from 'path';
import { StagingError, errnoCode } from '../../base/errors';
import { type Dir, O_DIR, isLink, makeDir, openBelow, openDirFd, whereIs } from './dir';
import { callsFor } from '../calls';

/** True when `child` is `parent` or lies inside it; compares path segments, never string prefixes. */
export function isWithin(parent: string, child: string): boolean {
  return path.relative(parent, child) === '' || isInside(parent, child);
}

/** True when `child` lies strictly inside `parent`; compares path segments, never string prefixes. */
export function isInside(parent: string, child: string): boolean {
  return relativeInside(parent, child) !== undefined;
}

/** `child`'s path below `parent`, '/'-separated, when it is strictly inside it; undefined otherwise. */
export function relativeInside(parent: string, child: string): string | undefined {
  const rel = path.relative(parent, child);
  if (rel === '' || rel === '..' || rel.startsWith(`..${path.sep}`) || path.isAbsolute(rel)) return undefined;
  return rel.split(path.sep).join('/');
}

/**
 * Opens `<root>/<segments…>` one level at a time. A segment that is a symlink is followed only if
 * the directory it leads to is inside `realRoot` (as the kernel places the opened directory, not as
 * the link's text says); anything else fails with EBADTAG naming the path. The caller closes the
 * result. `root` is opened following links (the static directory may be configured through one).
 */
export async function openPath(root: Dir, realRoot: string, segments: readonly string[], shownTag: string, sync = false): Promise<Dir> {
  let current = root;
  let owned = false;
  try {
    for (const seg of segments) {
      let next: Dir;
      try {
        next = await openBelow(current, seg, sync);
      } catch (err) {
        // O_NOFOLLOW | O_DIRECTORY on a link fails with ENOTDIR (or ELOOP): tell a link from a file.
        const code = errnoCode(err);
        if (code !== 'ELOOP' && code !== 'ENOTDIR') throw err;
        if (code === 'ENOTDIR' && !(await isLink(current.at(seg), sync))) throw err;
        // A link: follow it once, then judge where the kernel put us.
        const fd = await openDirFd(current.at(seg), O_DIR, sync).catch((e: unknown) => {
          if (errnoCode(e) !== 'ENOENT' && errnoCode(e) !== 'ENOTDIR' && errnoCode(e) !== 'ELOOP') throw e;
          throw new StagingError('EBADTAG', `Invalid tag ${JSON.stringify(shownTag)}: ${path.join(current.shown, seg)} is a symbolic link that leads nowhere (or not to a directory).`, {
            path: path.join(current.shown, seg),
          });
        });
        next = makeDir(fd, path.join(current.shown, seg), await callsFor(sync).fstat(fd).catch((e: unknown) => {
          fs.closeSync(fd);
          throw e;
        }));
        const real = whereIs(next);
        if (!isWithin(realRoot, real)) {
          next.close();
          throw new StagingError('EBADTAG', `Invalid tag ${JSON.stringify(shownTag)}: ${path.join(current.shown, seg)} is a symbolic link that leads outside the static directory (to ${real}).`, {
            path: path.join(current.shown, seg),
          });
        }
      }
      if (owned) current.close();
      current = next;
      owned = true;
    }
    if (!owned) {
      // No segments: a second descriptor of the root, so that the caller may close what it got.
      const fd = await openDirFd(root.at('.'), O_DIR, sync);
      return makeDir(fd, root.shown, await callsFor(sync).fstat(fd));
    }
    return current;
  } catch (err) {
    if (owned) current.close();
    throw err;
  }
}
