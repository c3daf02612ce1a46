/**
 * Reading lock states without taking anything: one area (`inspect`) or the children of one
 * directory (`list`), cheaply enough for a tree view to call on every change.
 */
import * as fs from 'fs';
import { fsClockSkew } from '../fs/clock';
import { StagingError, asStagingError, errnoCode } from '../base/errors';
import { readEntriesInSlices } from '../build/browse';
import { asyncIo, ioForTreeBelow, type Io } from '../fs/io';
import { judgeLock, lockPathOf } from './judge';
import { sortNatural } from '../base/natural';
import { printable } from '../base/format';
import { eachInSlices } from '../base/slices';
import { step } from '../base/steps';
import { BUILD_MARKS, LOCK_NAME, clampTiming, isProtocolName } from '../base/protocol';
import { isInside, resolveArea, resolveStaticDir } from '../fs/tags';
import type { ListEntry, LockInfo, Timing } from '../base/types';


/**
 * Whether a directory without a lock was staged: a `staged.timestamp` (every staging's mark, the
 * Python devserver's too), a manifest or a lock target. Looked for one at a time, most common
 * first, so that a staged build costs one lstat more and only a folder costs all three.
 */
export async function hasBuildMark(dir: string, io: Io = asyncIo): Promise<boolean> {
  for (const name of BUILD_MARKS) {
    const st = await io.lstatOrNull(`${dir}/${name}`).catch(() => null);
    if (st !== null) return true;
  }
  return false;
}

/**
 * The lock state of one staging area. Any name a listing shows can be inspected: one with a
 * control character or bytes that are not UTF-8 too (see `TagOptions.anyName`).
 */
export async function inspect(staticDir: string, tag: string, options: Partial<Timing> = {}): Promise<LockInfo> {
  const area = await resolveArea(staticDir, tag, { anyName: true });
  // Only a heartbeat is judged on the filesystem's clock, and measuring it writes a probe into the
  // static directory: an area without a lock is told free without. Anything else (a lock, or an
  // error the judge reports) is looked at again by the judge once the clock is known.
  const st = await area.io.lstatOrNull(lockPathOf(area.dir)).catch(() => undefined);
  const skew = st === null ? 0 : await fsClockSkew(area.realStaticDir);
  return (await judgeLock(area, clampTiming(options), Date.now() + skew, st === null ? null : undefined)).info;
}

/**
 * Areas looked at at once: enough to keep libuv's thread pool busy where the filesystem's calls
 * are asynchronous, and, where they are synchronous, to go on while a lock's record is read.
 */
const LANES = 64;

/**
 * The subdirectories of `<staticDir>/<subpath>` (the static directory itself by default) with
 * their lock states, in natural order (R9 before R10). One directory read and one lstat per entry
 * (up to three more for the marks of a build without a lock), plus a read of the holder record for
 * locked entries. Lock artefacts, the audit log and trash are left out.
 *
 * Done in slices (slices.ts): a listing of 100,000 areas never holds the event loop for more than
 * a few milliseconds at a time. On local filesystems the lstats are synchronous, a few microseconds
 * each where a round trip through the thread pool costs tens; elsewhere (NFS, sshfs) they stay
 * asynchronous, so that a server that stops answering cannot stall the process.
 */
export interface ListOptions extends Partial<Timing> {
  /**
   * Told the subdirectories found (not links) before any is judged, and awaited: a caller that
   * watches them there sees a lock taken on one after its judgement, where one that watches them
   * after the listing would not.
   */
  beforeJudging?: (children: readonly { dir: string; tag: string }[]) => Promise<void>;
}

export async function list(staticDir: string, subpath = '', options: ListOptions = {}): Promise<ListEntry[]> {
  const timing = clampTiming(options);
  const { staticDir: root, realStaticDir, io: rootIo } = await resolveStaticDir(staticDir);
  const io = ioForTreeBelow(rootIo, realStaticDir);
  let dir = root;
  let prefix = '';
  if (subpath !== '' && subpath !== '.' && subpath !== '/') {
    const area = await resolveArea(root, subpath, { anyName: true });
    if (!area.exists) throw new StagingError('ENOENT', `There is no directory ${printable(area.dir)} in the static directory.`, { path: area.dir });
    dir = area.dir;
    prefix = `${area.tag}/`;
  }
  const [{ entries, undecodable }, skew] = await Promise.all([
    readEntriesInSlices(dir, io.sync).catch((err: unknown) => {
      if (errnoCode(err) === 'ENOENT') throw new StagingError('EBADSTATICDIR', `The directory ${dir} does not exist.`, { path: dir, reason: 'missing' });
      throw asStagingError(err, 'list', dir);
    }),
    fsClockSkew(realStaticDir),
  ]);
  // Children's paths share their parent's: `${parent}${name}` is what path.join gives here, at a
  // fraction of its cost (the directory is resolved already and a name holds no slash).
  const parent = dir.endsWith('/') ? dir : `${dir}/`;
  // Every name is listed, one with a newline or bytes that are not UTF-8 too (kept as rawNames.ts
  // keeps them, and acted on by those bytes): the front ends show it escaped, never hide it.
  const all = undecodable.length > 0 ? [...entries, ...undecodable] : entries;
  if (options.beforeJudging !== undefined) {
    const children: { dir: string; tag: string }[] = [];
    for (const e of all) if (e.isDirectory() && !isProtocolName(e.name)) children.push({ dir: parent + e.name, tag: prefix + e.name });
    await options.beforeJudging(children);
  }
  const nowFs = Date.now() + skew;
  const found: ListEntry[] = [];
  await eachInSlices(all, LANES, async (e) => {
    if (!(e.isDirectory() || e.isSymbolicLink()) || isProtocolName(e.name)) return;
    const child = parent + e.name;
    if (e.isSymbolicLink()) {
      // A link is listed only when it leads to a directory inside the static directory.
      const real = await io.realpath(child).catch(() => undefined);
      if (real === undefined || !isInside(realStaticDir, real)) return;
      if (!(await io.stat(real).then((s) => s.isDirectory(), () => false))) return;
    }
    const lockPath = `${child}/${LOCK_NAME}`;
    let st: fs.Stats | null;
    try {
      // A path of its own for the call, which makes a flat copy of the string it is given: the
      // entry's, kept for each of 100,000 areas, stays a pair of references to shared parts.
      st = await io.lstatOrNull(`${child}/${LOCK_NAME}`);
    } catch (err) {
      // A directory this user may not search (a co-user's umask 077) is listed as one whose
      // inside cannot be seen, a folder: failing the whole listing would hide every build beside it.
      const code = errnoCode(err);
      if (code !== 'EACCES' && code !== 'EPERM') throw asStagingError(err, 'read the lock', lockPath);
      st = null;
    }
    const tag = prefix + e.name;
    if (st === null) {
      // Free: whether it is a build or a folder of builds is told by what staging leaves.
      const kind = (await hasBuildMark(child, io)) ? 'build' : 'folder';
      found.push({ name: e.name, kind, staticDir: root, tag, dir: child, lockPath, exists: true, state: 'free' });
      return;
    }
    const { info } = await judgeLock({ staticDir: root, tag, dir: child }, timing, nowFs, st);
    found.push({ name: e.name, kind: 'build', ...info });
  });
  step('list.judged');
  return sortNatural(found, (e) => e.name);
}

