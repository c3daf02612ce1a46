/**
 * Nesting: holding an area covers everything below it. While `board/n1` is held, `board/n1/sub`
 * cannot be locked (so not staged or destroyed either), and while `board/n1/sub` is held,
 * `board/n1` and `board` cannot.
 *
 * Each taker checks after it has taken its own lock, never before: of two processes taking
 * nested areas at once, each has made its lock before it looks for the other's, so the one that
 * looks last sees the other's lock. At worst both see each other and both back off; never
 * neither. A stale lock met by a taker is taken over, never stepped past: its holder may only be
 * paused, and a lock left in place keeps its work directory, through which that holder could still
 * write when it resumes. Whoever takes a lock after that checks in turn and meets this one. Only
 * looking (the checks before taking, a destroy's count of what is inside) a stale lock blocks
 * nothing. On a network filesystem each directory is looked at past the client's cache
 * (fs/fresh.ts): the other's lock may have been made through another host moments before.
 */
import * as fs from 'fs';
import * as path from 'path';
import { openBelow, openDir, type Dir } from '../fs/anchored';
import { readEntries } from '../build/browse';
import { callsFor } from '../fs/calls';
import { fsPath } from '../base/rawNames';
import { dropCachedListingInside } from '../fs/fresh';
import { asStagingError, errnoCode } from '../base/errors';
import { asyncIo, type Io } from '../fs/io';
import { hasBuildMark } from './inspect';
import { judgeLock } from './judge';
import { LOCK_NAME, isProtocolName } from '../base/protocol';
import { parseTag, resolveStaticDir, type Area } from '../fs/tags';
import type { LockInfo, Timing } from '../base/types';

export interface NestingConflict {
  /** The lock that stands in the way. */
  info: LockInfo;
  /** Where it is: on an area containing ours, or on one inside ours. */
  relation: 'above' | 'inside';
}

/** The lock of `dir`, judged; undefined when there is none. */
async function lockIn(staticDir: string, dir: string, timing: Timing, nowFsMs: number, io: Io): Promise<LockInfo | undefined> {
  const lockPath = path.join(dir, LOCK_NAME);
  let st: fs.Stats | null;
  try {
    // Most directories have no lock: one lstat each, and only a lock found is read and judged.
    st = await io.lstatOrNull(lockPath);
  } catch (err) {
    // Deeper than a path can name: no one can take a lock there (every party names its lock by path).
    if (errnoCode(err) === 'ENAMETOOLONG') return undefined;
    throw asStagingError(err, 'read the lock', lockPath);
  }
  if (st === null) return undefined;
  const { info } = await judgeLock({ staticDir, tag: path.relative(staticDir, dir).split(path.sep).join('/'), dir }, timing, nowFsMs, st);
  return info;
}

const blocks = (info: LockInfo): boolean => info.state === 'held' || info.state === 'legacy';

/**
 * Takes over the stale lock of the directory named: true once no stale lock is there. Given by a
 * taker that holds its own lock already; absent where the caller only looks.
 */
export type TakeOverStale = (dir: string) => Promise<boolean>;

/** How many times one directory's lock is taken over before it is left standing in the way (someone keeps dying there). */
const MAX_TAKEOVERS = 3;

/**
 * The lock of `dir` when it stands in the way: held or legacy, or stale where it cannot be taken
 * over. A stale one is taken over when `takeOver` is given, then judged again (someone else may
 * hold it by now).
 */
async function inTheWay(staticDir: string, dir: string, timing: Timing, nowFsMs: number, io: Io, takeOver: TakeOverStale | undefined): Promise<LockInfo | undefined> {
  for (let taken = 0; ; taken++) {
    const info = await lockIn(staticDir, dir, timing, nowFsMs, io);
    if (info === undefined || blocks(info)) return info;
    if (info.state !== 'stale' || takeOver === undefined) return undefined;
    if (taken >= MAX_TAKEOVERS || !(await takeOver(dir))) return info;
  }
}

/** The first area containing `area` (`board`, then `board/n1` for `board/n1/sub`) whose lock stands in the way. */
export async function findHeldAbove(
  area: Pick<Area, 'staticDir' | 'segments'>,
  timing: Timing,
  nowFsMs = Date.now(),
  io: Io = asyncIo,
  takeOver?: TakeOverStale,
  freshInside?: string,
): Promise<LockInfo | undefined> {
  let dir = area.staticDir;
  for (const segment of area.segments.slice(0, -1)) {
    dir = path.join(dir, segment);
    // A client that cached the folder without a lock (NFS keeps names it found missing) would
    // not see one another host placed since.
    if (freshInside !== undefined) await dropCachedListingInside(fsPath(dir), freshInside);
    const info = await inTheWay(area.staticDir, dir, timing, nowFsMs, io, takeOver);
    if (info !== undefined) return info;
  }
  return undefined;
}

/**
 * Every entry of a directory, names that are not UTF-8 kept as rawNames.ts keeps them: decoded the
 * usual way such a name leads nowhere, and a lock below it (the Python devserver's can be there)
 * would go unseen.
 */
export async function allEntries(dir: string, io: Pick<Io, 'sync'>): Promise<fs.Dirent[]> {
  // Read as strings (a Buffer per name costs far more); only a listing where a name decoded to U+FFFD is read again keeping its bytes.
  const entries = await callsFor(io.sync).readdirTyped(fsPath(dir));
  if (!entries.some((e) => e.name.includes('\uFFFD'))) return entries;
  const read = await readEntries(dir, io.sync);
  return [...read.entries, ...read.undecodable];
}

/**
 * The first lock below `dir` that stands in the way, not counting `dir`'s own. Walks directories
 * only (the entries' types come with the listing, so files cost nothing), never through a link.
 */
export async function findHeldInside(
  dir: string,
  timing: Timing,
  nowFsMs = Date.now(),
  io: Io = asyncIo,
  listing?: readonly fs.Dirent[],
  takeOver?: TakeOverStale,
  freshInside?: string,
): Promise<LockInfo | undefined> {
  const stack = [dir];
  while (stack.length > 0) {
    const current = stack.pop()!;
    let entries: readonly fs.Dirent[];
    try {
      // The area's own listing may come from the caller, who just read it.
      if (current === dir && listing !== undefined) entries = listing;
      else {
        // A client's cached listing would miss a build another host made and locked since.
        if (freshInside !== undefined) await dropCachedListingInside(fsPath(current), freshInside);
        entries = await allEntries(current, io);
      }
    } catch {
      continue;
    }
    for (const e of entries) {
      if (isProtocolName(e.name)) continue;
      // Node lstats entries whose type the filesystem did not give, so this is never a guess.
      if (!e.isDirectory()) continue;
      const child = path.join(current, e.name);
      const info = await inTheWay(dir, child, timing, nowFsMs, io, takeOver);
      if (info !== undefined) return info;
      stack.push(child);
    }
  }
  return undefined;
}

/**
 * A lock above or inside `area` that forbids holding it, if any. Call it once the area's own lock
 * is taken, with `takeOver` for the stale locks met on the way.
 */
export async function findNestingConflict(
  area: Pick<Area, 'staticDir' | 'realStaticDir' | 'segments' | 'dir' | 'io'>,
  timing: Timing,
  nowFsMs: number,
  listing?: readonly fs.Dirent[],
  takeOver?: TakeOverStale,
): Promise<NestingConflict | undefined> {
  // On a network filesystem every directory is looked at past the client's cache, never outside.
  const freshInside = area.io.sync ? undefined : area.realStaticDir;
  const above = await findHeldAbove(area, timing, nowFsMs, area.io, takeOver, freshInside);
  if (above !== undefined) return { info: above, relation: 'above' };
  const inside = await findHeldInside(area.dir, timing, nowFsMs, area.io, listing, takeOver, freshInside);
  return inside === undefined ? undefined : { info: inside, relation: 'inside' };
}

/**
 * The tag of the nearest build strictly above `tag` inside the static directory (a directory
 * holding a lock, the lock target, a manifest or a timestamp), or undefined. Builds are not staged
 * inside builds: their artifacts would become the outer build's unlisted files, and destroying
 * the outer one would take the inner with it. Read only: each level is opened below the one
 * above without following a link (areas nest by their tags, so a link ends the search, as a
 * missing directory does), and the markers are looked at there with `lstat`.
 */
export async function findBuildAbove(staticDir: string, tag: string): Promise<string | undefined> {
  const segments = parseTag(tag);
  const { staticDir: shown, realStaticDir, io } = await resolveStaticDir(staticDir);
  let current: Dir;
  try {
    current = await openDir(realStaticDir, true, io.sync);
  } catch (err) {
    throw asStagingError(err, 'open the static directory', shown);
  }
  let found: string | undefined;
  try {
    for (let i = 0; i < segments.length - 1; i++) {
      let next: Dir;
      try {
        next = await openBelow(current, segments[i], io.sync);
      } catch (err) {
        const code = errnoCode(err);
        // Not there, not a directory, a link, or closed to this user: nothing below it is a build of its own here.
        if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP' || code === 'EACCES' || code === 'EPERM') break;
        throw asStagingError(err, 'open', path.join(shown, ...segments.slice(0, i + 1)));
      }
      current.close();
      current = next;
      if (await isBuild(current, io)) found = segments.slice(0, i + 1).join('/');
    }
  } finally {
    current.close();
  }
  return found;
}

/** A lock, or one of the marks staging leaves (read through the opened directory). */
async function isBuild(dir: Dir, io: Io): Promise<boolean> {
  const lock = await io.lstatOrNull(dir.at(LOCK_NAME)).catch(() => null);
  return lock !== null || hasBuildMark(dir.at('.'));
}
