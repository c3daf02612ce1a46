/**
 * How much the staged builds of a static directory take and when each was last used (du); what
 * `prune` chooses from (prune.ts).
 */
import * as fs from 'fs';
import * as path from 'path';
import { openDir, openDirIfThere, openPath, readRecordBytes, type Dir } from './fs/anchored';
import { callsFor } from './fs/calls';
import { fsClockSkew } from './fs/clock';
import { printable } from './base/format';
import { sortNatural } from './base/natural';
import { StagingError, asStagingError, errnoCode, isStagingError } from './base/errors';
import { asyncIo, ioFor, type Io } from './fs/io';
import { readEntriesInSlices } from './build/browse';
import { eachInSlices, pause } from './base/slices';
import { fsPath } from './base/rawNames';
import { judgeLock } from './lock/judge';
import { FENCE_FILE, LOCK_NAME, MANIFEST_FILE, TIMESTAMP_FILE, clampTiming, isAreaMark, isBookkeeping, isLockName, isProtocolName } from './base/protocol';
import { resolveArea, resolveStaticDir } from './fs/tags';
import type { LockInfo, LockState, Timing } from './base/types';
import { MAX_MANIFEST_BYTES, judgeManifest } from './build/manifest';

/** One staging area's footprint. */
export interface AreaUsage {
  /** Relative to the static directory, '/'-separated. */
  tag: string;
  dir: string;
  /** Sum of the sizes of the files and links inside (lstat; a file with several links counted once). */
  bytes: number;
  /** Entries of the manifest, or, without a readable manifest, the number of regular files. */
  artifacts: number;
  /** mtime of `staged.timestamp`, else of the area directory, in the filesystem's clock (ms since the epoch). */
  lastUsedMs: number;
  state: LockState;
  /** The judged lock, for every state but free: who holds it. */
  lock?: LockInfo;
  /** Set when part of the area could not be read (permissions): `bytes` and `artifacts` are then too low. */
  incomplete?: true;
  /** Set when the area's manifest is damaged (ECORRUPT): what is wrong with it and how to repair it. */
  damaged?: string;
}

export interface UsageOptions extends Partial<Timing> {
  /** Look only below this directory of the static directory (a board, say). Default: all of it. */
  subpath?: string;
  /** Directories read at once where calls are asynchronous (see `MeasureOps`). Default 16. */
  concurrency?: number;
  /**
   * No synchronous call, even on a local filesystem: for a caller whose event loop must never wait
   * for the disk (an editor measuring builds for a column). Slower, never stalling.
   */
  async?: boolean;
}


const DEFAULT_CONCURRENCY = 16;
/** Entries of one directory lstat'ed at once. */
const STAT_LANES = 64;

type Limit = <T>(fn: () => Promise<T>) => Promise<T>;

/** Runs at most `n` of the functions given to it at once; the rest wait their turn. */
function limiter(n: number): Limit {
  let active = 0;
  const waiting: (() => void)[] = [];
  return async <T>(fn: () => Promise<T>): Promise<T> => {
    // A finishing call hands its slot straight to the next waiter, so no newcomer slips in between.
    if (active >= n) await new Promise<void>((resolve) => waiting.push(resolve));
    else active++;
    try {
      return await fn();
    } finally {
      const next = waiting.shift();
      if (next !== undefined) next();
      else active--;
    }
  };
}

/** Lock artefacts (the lock, claims, trash, probes, the fencing counter) are not part of what a build takes. */
function isLockArtefact(name: string): boolean {
  return isLockName(name) || name === FENCE_FILE;
}

/** Entries that a missing or racing directory explains: the area was removed while we looked. */
function isGone(err: unknown): boolean {
  const code = errnoCode(err);
  return code === 'ENOENT' || code === 'ENOTDIR';
}

function isDenied(err: unknown): boolean {
  const code = errnoCode(err);
  return code === 'EACCES' || code === 'EPERM';
}

/** An area's tag: its directory below `root`, with `/` between the parts on any system. */
export function tagOf(root: string, dir: string): string {
  return path.relative(root, dir).split(path.sep).join('/');
}

/** A directory as the listing that showed it found it: lstat through its parent's descriptor. */
type Seen = Pick<fs.Stats, 'dev' | 'ino'>;

/** What one directory holds, read through its descriptor: each entry with its lstat (undefined when gone meanwhile). */
interface DirRead {
  stat: fs.Stats;
  entries: { e: fs.Dirent; st: fs.Stats | undefined }[];
  /** Some entry could not be lstat'ed, and not because it went away (permissions). */
  incomplete: boolean;
}

/**
 * How one filesystem is read. On a local filesystem an lstat takes microseconds, and a thread-pool
 * round trip several times that, so an area there is read with synchronous calls (one area at a
 * time, yielding to the event loop between areas, so an editor stays responsive). Anywhere else the
 * calls stay asynchronous, a few directories read at once, so a slow server costs latency, not a
 * stalled process.
 */
interface MeasureOps {
  sync: boolean;
  /** Runs the reading of one directory in its turn (all at once where calls are synchronous). */
  turn<T>(fn: () => Promise<T>): Promise<T>;
}

function measureOps(io: Io, limit: Limit): MeasureOps {
  return io.sync ? { sync: true, turn: (fn) => fn() } : { sync: false, turn: limit };
}

/**
 * Opens the directory `p` that a listing showed as `seen`, without following a link at its last
 * step, and only if it is that very directory: one swapped for a link since, or reached through a
 * folder above that was, is another directory (or none) and gives undefined. So nothing outside the
 * static directory is ever walked, and the descriptor is closed before anything below is opened:
 * however wide the tree, only the directories being read at once are open.
 */
async function openSeen(p: string, seen: Seen, sync: boolean): Promise<Dir | undefined> {
  const dir = await openDirIfThere(p, sync);
  if (dir === undefined || (dir.dev === seen.dev && dir.ino === seen.ino)) return dir;
  dir.close();
  return undefined;
}

/**
 * The entries of an opened directory, each lstat'ed through it. Names that are not UTF-8 are read
 * and acted on by their bytes (rawNames.ts): an area so named is measured and shown, never hidden.
 */
async function readOpened(dir: Dir, sync: boolean): Promise<DirRead> {
  const at = dir.at('.');
  const stat = await callsFor(sync).fstat(dir.fd);
  // A small directory (an area, a folder of a build) is listed in one call; a large one (a board
  // of thousands of builds) in slices, so the event loop is not held while it is read.
  let listed: { entries: fs.Dirent[]; undecodable: fs.Dirent[] } | undefined;
  if (sync && stat.size <= SMALL_DIR_BYTES) {
    const all = fs.readdirSync(fsPath(at), { withFileTypes: true });
    // A name that is not UTF-8 decodes with U+FFFD: such a directory is read by its bytes.
    if (!all.some((e) => e.name.includes('\uFFFD'))) listed = { entries: all, undecodable: [] };
  }
  const { entries: named, undecodable } = listed ?? (await readEntriesInSlices(at, sync));
  const list = undecodable.length > 0 ? [...named, ...undecodable] : named;
  let incomplete = false;
  const failed = (err: unknown): undefined => {
    if (!isGone(err)) incomplete = true;
    return undefined;
  };
  const entries: DirRead['entries'] = [];
  if (sync) {
    // One after the other, without a promise each (a static directory of 100,000 areas is
    // hundreds of thousands of these), the event loop given its turn between slices: a folder of
    // 100,000 files would otherwise hold it while they are all looked at.
    for (const e of list) {
      const turn = pause();
      if (turn !== undefined) await turn;
      try {
        entries.push({ e, st: fs.lstatSync(fsPath(dir.at(e.name))) });
      } catch (err) {
        entries.push({ e, st: failed(err) });
      }
    }
  } else {
    // A few at a time, in slices: all asked for at once, their answers would hold the event loop.
    await eachInSlices(list, STAT_LANES, async (e) => {
      entries.push({ e, st: await fs.promises.lstat(fsPath(dir.at(e.name))).catch(failed) });
    });
  }
  return { stat, entries, incomplete };
}

/** The subdirectories of a read directory that a walk goes into, each with what it was seen as. */
function subdirs(read: DirRead): { name: string; seen: Seen }[] {
  return read.entries.filter(({ st }) => st?.isDirectory() === true).map(({ e, st }) => ({ name: e.name, seen: st! }));
}

/** Directories up to this size (ext4: a few hundred entries) are listed in one call. */
const SMALL_DIR_BYTES = 16 * 1024;

/**
 * Every staging area of the static directory (or below `subpath`) with its size, artifact count,
 * last use and lock state, in natural tag order. An area is a directory holding a manifest, a
 * `staged.timestamp` or a lock; other directories (boards) are walked through, areas are not
 * searched for further areas. Symbolic links are never followed, and a directory swapped for one
 * while it is walked is never entered (see `openSeen`), so a linked build is neither counted twice
 * nor measured outside the static directory. Directories this user may not read are passed over;
 * an area removed while it is measured is left out.
 */
export async function usage(staticDir: string, options: UsageOptions = {}): Promise<AreaUsage[]> {
  const timing = clampTiming(options);
  const limit = limiter(Math.max(1, Math.floor(options.concurrency ?? DEFAULT_CONCURRENCY)));
  const resolved = await resolveStaticDir(staticDir);
  const { staticDir: root, realStaticDir } = resolved;
  const io = options.async === true ? asyncIo : resolved.io;
  let start = root;
  let segments: string[] = [];
  if (options.subpath !== undefined && options.subpath !== '' && options.subpath !== '.' && options.subpath !== '/') {
    const area = await resolveArea(root, options.subpath, { anyName: true });
    if (!area.exists) throw new StagingError('ENOENT', `There is no directory ${printable(area.dir)} in the static directory.`, { path: area.dir });
    const st = await fs.promises.lstat(fsPath(area.dir)).catch((err: unknown) => {
      throw asStagingError(err, 'inspect', area.dir);
    });
    if (st.isSymbolicLink()) {
      throw new StagingError('EBADTAG', `${printable(area.dir)} is a symbolic link; give the directory it points to instead.`, { path: area.dir });
    }
    start = area.dir;
    segments = area.segments;
  }
  const [rootStat, skew] = await Promise.all([fs.promises.stat(realStaticDir), fsClockSkew(realStaticDir)]);
  const nowFs = Date.now() + skew;
  // Directories along the way are read asynchronously unless seen on the static directory's own
  // filesystem: a board may be a mount of its own.
  const rootOps = measureOps(io, limit);
  const found: AreaUsage[] = [];

  /**
   * Reads `p` (seen as `seen`, or already open as `opened`) and measures it if it is an area, or
   * puts its subdirectories on `pending`.
   */
  const visit = async (p: string, seen: Seen | undefined, opened?: Dir): Promise<void> => {
    let area: { below(): Promise<AreaUsage> } | undefined;
    try {
      // One seen on the static directory's own filesystem is opened as that one is read.
      const dir = opened ?? (await openSeen(p, seen!, seen!.dev === rootStat.dev && rootOps.sync));
      if (dir === undefined) return;
      try {
        const read = await readOpened(dir, dir.dev === rootStat.dev && rootOps.sync);
        // The static directory itself is never an area (a tag has at least one segment).
        if (p !== root && read.entries.some(({ e }) => isAreaMark(e.name))) {
          // An area may be a mount of its own: how to call it depends on its filesystem.
          const ops = read.stat.dev === rootStat.dev ? rootOps : measureOps(options.async === true ? asyncIo : await ioFor(p, read.stat.dev), limit);
          area = await measureArea(root, p, dir, read, ops, timing, nowFs);
        } else {
          for (const { name, seen: s } of subdirs(read)) if (!isProtocolName(name)) pending.push({ p: path.join(p, name), seen: s });
        }
      } finally {
        dir.close();
      }
    } catch (err) {
      if (p === start) throw asStagingError(err, 'read', p);
      if (isGone(err) || isDenied(err)) return;
      throw asStagingError(err, 'read', p);
    }
    if (area !== undefined) found.push(await area.below());
  };
  /**
   * Directories found and not yet read. A few are read at once (`concurrency`) where calls are
   * asynchronous; where they are synchronous they go one at a time, and the event loop has its
   * turn every few milliseconds. So what is held at once is the directories waiting, never a
   * pending call for each of 100,000 areas.
   */
  const pending: { p: string; seen: Seen | undefined; opened?: Dir }[] = [];
  const walkAll = (): Promise<void> =>
    new Promise((resolve, reject) => {
      let active = 0;
      let failure: { err: unknown } | undefined;
      const pump = (): void => {
        while (failure === undefined && active < runners && pending.length > 0) {
          const next = pending.pop()!;
          active++;
          void (async () => {
            await pause();
            await visit(next.p, next.seen, next.opened);
          })().then(
            () => {
              active--;
              pump();
            },
            (err: unknown) => {
              active--;
              failure ??= { err };
              pump();
            },
          );
        }
        if (active === 0 && (failure !== undefined || pending.length === 0)) {
          if (failure !== undefined) reject(failure.err);
          else resolve();
        }
      };
      pump();
    });
  const runners = Math.max(1, Math.floor(options.concurrency ?? DEFAULT_CONCURRENCY));
  let top: Dir;
  try {
    const rootDir = await openDir(realStaticDir, true);
    try {
      top = await openPath(rootDir, realStaticDir, segments, segments.join('/'));
    } finally {
      rootDir.close();
    }
  } catch (err) {
    throw asStagingError(err, 'read', start);
  }
  pending.push({ p: start, seen: undefined, opened: top });
  try {
    await walkAll();
  } finally {
    for (const left of pending) left.opened?.close();
  }
  return sortNatural(found, (a) => a.tag);
}

/**
 * One area, whose top was read (`top`) through `dir`, still open: its own records are read there
 * now. `below` then walks the rest directory by directory (see `openSeen`), once the caller has
 * closed `dir` and left its turn.
 */
async function measureArea(root: string, p: string, dir: Dir, top: DirRead, ops: MeasureOps, timing: Timing, nowFs: number): Promise<{ below(): Promise<AreaUsage> }> {
  let bytes = 0;
  let files = 0;
  let incomplete = top.incomplete;
  const seenInodes = new Set<string>();

  /** Counts the files and links of a read directory; its subdirectories, to walk next. */
  const count = (read: DirRead, atTop: boolean): { name: string; seen: Seen }[] => {
    for (const { e, st } of read.entries) {
      if (isLockArtefact(e.name) || st === undefined || st.isDirectory()) continue;
      if (st.isFile() && !(atTop && isBookkeeping(e.name))) files++;
      if (st.nlink > 1) {
        // Hard links inside one build take the space once (each name is still an artifact).
        const key = `${st.dev}:${st.ino}`;
        if (seenInodes.has(key)) continue;
        seenInodes.add(key);
      }
      bytes += st.size;
    }
    return subdirs(read).filter(({ name }) => !isLockArtefact(name));
  };

  const walk = async (current: string, seen: Seen): Promise<void> => {
    let next: { name: string; seen: Seen }[] = [];
    try {
      await ops.turn(async () => {
        const opened = await openSeen(current, seen, ops.sync);
        if (opened === undefined) return;
        try {
          const read = await readOpened(opened, ops.sync);
          if (read.incomplete) incomplete = true;
          next = count(read, false);
        } finally {
          opened.close();
        }
      });
    } catch (err) {
      if (!isGone(err)) incomplete = true;
      return;
    }
    await Promise.all(next.map(({ name, seen: s }) => walk(path.join(current, name), s)));
  };

  // The area's own records, from the directory that was read: never through a link swapped in.
  const stOf = (name: string): fs.Stats | undefined => top.entries.find(({ e }) => e.name === name)?.st;
  const lastUsedMs = stOf(TIMESTAMP_FILE)?.mtimeMs ?? top.stat.mtimeMs;
  const manifestCount = stOf(MANIFEST_FILE) !== undefined ? await readManifestCount(dir.at(MANIFEST_FILE), path.join(p, MANIFEST_FILE), ops.sync) : undefined;
  const tag = tagOf(root, p);
  const judged = stOf(LOCK_NAME) !== undefined ? await judgeLock({ staticDir: root, tag, dir: p, opened: dir }, timing, nowFs) : undefined;
  const first = count(top, true);
  return {
    below: async () => {
      await Promise.all(first.map(({ name, seen }) => walk(path.join(p, name), seen)));
      const out: AreaUsage = {
        tag,
        dir: p,
        bytes,
        artifacts: manifestCount?.count ?? files,
        lastUsedMs,
        state: judged?.info.state ?? 'free',
      };
      if (judged !== undefined && judged.info.state !== 'free') out.lock = judged.info;
      if (incomplete) out.incomplete = true;
      if (manifestCount?.damaged !== undefined) out.damaged = manifestCount.damaged;
      return out;
    },
  };
}

/**
 * The number of artifacts a manifest records (undefined when it cannot be read or is not one),
 * and, for a manifest that fails the manifest's checks, why: `du` shows such an area as damaged
 * rather than failing on it.
 */
async function readManifestCount(at: string, file: string, sync: boolean): Promise<{ count?: number; damaged?: string } | undefined> {
  let bytes: Buffer;
  try {
    // Never through a link, never waiting on a FIFO put in its place.
    bytes = await readRecordBytes(at, file, MAX_MANIFEST_BYTES, sync);
  } catch (err) {
    return isStagingError(err) ? { damaged: err.message } : undefined;
  }
  const judged = await judgeManifest(bytes, file);
  if ('manifest' in judged) return { count: judged.entries.length };
  // Where it still lists artifacts, they are counted; otherwise the files are.
  return judged.listed !== undefined ? { count: judged.listed, damaged: judged.damaged.message } : { damaged: judged.damaged.message };
}
