/**
 * Reading lock states without taking anything: one area (`inspect`) or the children of one
 * directory (`list`), cheaply enough for a tree view to call on every change.
 */
import * as fs from 'fs';
import * as path from 'path';
import { fsClockSkew } from './clock';
import { naturalOrder } from './format';
import { StagingError, asStagingError, errnoCode } from './errors';
import { readEntries } from './browse';
import { asyncIo } from './io';
import { judgeLock, lockPathOf } from './judge';
import { BUILD_MARKS, LOCK_NAME, clampTiming, isProtocolName } from './protocol';
import { isInside, resolveArea, resolveStaticDir } from './tags';
import type { ListEntry, LockInfo, Timing } from './types';


/**
 * Whether a directory without a lock was staged: a manifest, a `staged.timestamp` (the Python
 * devserver's mark) or a lock target. Looked for one at a time, most common first, so that a
 * staged build costs one lstat more and only a folder costs all three.
 */
export async function hasBuildMark(dir: string): Promise<boolean> {
  for (const name of BUILD_MARKS) {
    const st = await asyncIo.lstatOrNull(path.join(dir, name)).catch(() => null);
    if (st !== null) return true;
  }
  return false;
}

/** The lock state of one staging area. */
export async function inspect(staticDir: string, tag: string, options: Partial<Timing> = {}): Promise<LockInfo> {
  const area = await resolveArea(staticDir, tag);
  // Only a heartbeat is judged on the filesystem's clock, and measuring it writes a probe into the
  // static directory: an area without a lock is told free without. Anything else (a lock, or an
  // error the judge reports) is looked at again by the judge once the clock is known.
  const st = await fs.promises.lstat(lockPathOf(area.dir)).catch((err: unknown) => (errnoCode(err) === 'ENOENT' ? null : undefined));
  const skew = st === null ? 0 : await fsClockSkew(area.realStaticDir);
  return (await judgeLock(area, clampTiming(options), Date.now() + skew, st === null ? null : undefined)).info;
}

/**
 * The subdirectories of `<staticDir>/<subpath>` (the static directory itself by default) with
 * their lock states, in natural order (R9 before R10). One directory read and one lstat per entry, plus a read of
 * the holder record for locked entries. Lock artefacts, the audit log and trash are left out.
 */
export async function list(staticDir: string, subpath = '', options: Partial<Timing> = {}): Promise<ListEntry[]> {
  const timing = clampTiming(options);
  const { staticDir: root, realStaticDir } = await resolveStaticDir(staticDir);
  let dir = root;
  let prefix = '';
  if (subpath !== '' && subpath !== '.' && subpath !== '/') {
    const area = await resolveArea(root, subpath);
    if (!area.exists) throw new StagingError('ENOENT', `There is no directory ${area.dir} in the static directory.`, { path: area.dir });
    dir = area.dir;
    prefix = `${area.tag}/`;
  }
  const [{ entries }, skew] = await Promise.all([
    // Names that are not UTF-8 are left out: as strings they name other directories or none.
    readEntries(dir, false).catch((err: unknown) => {
      if (errnoCode(err) === 'ENOENT') throw new StagingError('EBADSTATICDIR', `The directory ${dir} does not exist.`, { path: dir });
      throw asStagingError(err, 'list', dir);
    }),
    fsClockSkew(realStaticDir),
  ]);
  const nowFs = Date.now() + skew;
  // A name with a control character (a newline) can never be a tag: no command could act on it.
  const candidates = entries.filter((e) => (e.isDirectory() || e.isSymbolicLink()) && !isProtocolName(e.name) && !/[\u0000-\u001f\u007f]/.test(e.name));
  const results = await Promise.all(
    candidates.map(async (e): Promise<ListEntry | undefined> => {
      const child = path.join(dir, e.name);
      if (e.isSymbolicLink()) {
        // A link is listed only when it leads to a directory inside the static directory.
        const real = await fs.promises.realpath(child).catch(() => undefined);
        if (real === undefined || !isInside(realStaticDir, real)) return undefined;
        if (!(await fs.promises.stat(real).then((s) => s.isDirectory(), () => false))) return undefined;
      }
      let st: fs.Stats | null;
      try {
        // Asynchronous even on local filesystems: a listing of thousands must not hold the event loop.
        st = await asyncIo.lstatOrNull(path.join(child, LOCK_NAME));
      } catch (err) {
        // A directory this user may not search (a co-user's umask 077) is listed as one whose
        // inside cannot be seen, a folder: failing the whole listing would hide every build beside it.
        const code = errnoCode(err);
        if (code !== 'EACCES' && code !== 'EPERM') throw asStagingError(err, 'read the lock', lockPathOf(child));
        st = null;
      }
      const area = { staticDir: root, tag: prefix + e.name, dir: child };
      if (st === null) {
        // Free: whether it is a build or a folder of builds is told by what staging leaves.
        const kind = (await hasBuildMark(child)) ? 'build' : 'folder';
        return { name: e.name, kind, staticDir: root, tag: area.tag, dir: child, lockPath: lockPathOf(child), exists: true, state: 'free' };
      }
      const { info } = await judgeLock(area, timing, nowFs, st);
      return { name: e.name, kind: 'build', ...info };
    }),
  );
  return results.filter((r): r is ListEntry => r !== undefined).sort((a, b) => naturalOrder.compare(a.name, b.name));
}
