/**
 * How much the staged builds of a static directory take, when each was last used, and removing
 * the least recently used ones (`prune`) without ever touching one that someone holds.
 */
import * as fs from 'fs';
import * as path from 'path';
import { readRecord } from '../anchored';
import { fsClockSkew } from '../clock';
import { naturalOrder } from '../format';
import { StagingError, asStagingError, errnoCode, isStagingError } from '../errors';
import { inspect } from '../inspect';
import { ioFor, type Io } from '../io';
import { judgeLock } from '../judge';
import { describeHolder } from '../lock';
import { BUILD_MARKS, FENCE_FILE, LOCK_NAME, clampTiming, isBookkeeping, isProtocolName } from '../protocol';
import { destroy } from '../remove';
import { resolveArea, resolveStaticDir } from '../tags';
import type { LockInfo, LockState, Timing } from '../types';
import { MAX_MANIFEST_BYTES, parseManifest } from './manifest';
import { MANIFEST_FILE, TIMESTAMP_FILE } from './types';

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
  /** Filesystem calls in flight at once. Default 16. */
  concurrency?: number;
}


const DEFAULT_CONCURRENCY = 16;

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

/** What makes a directory a staging area rather than one that only groups areas (a board). */
function isAreaListing(entries: readonly fs.Dirent[]): boolean {
  return entries.some((e) => e.name === LOCK_NAME || BUILD_MARKS.includes(e.name));
}

/** Lock artefacts (the lock, claims, trash, probes) are not part of what a build takes. */
function isLockArtefact(name: string): boolean {
  return name === LOCK_NAME || name.startsWith(`${LOCK_NAME}.`) || name === FENCE_FILE;
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

function tagOf(root: string, dir: string): string {
  return path.relative(root, dir).split(path.sep).join('/');
}

/** The calls measuring makes, synchronous or not (see `measureOps`). */
interface MeasureOps {
  sync: boolean;
  readdir(p: string): Promise<fs.Dirent[]>;
  lstat(p: string): Promise<fs.Stats>;
}

function settle<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (err) {
    return Promise.reject(err);
  }
}

/**
 * On a local filesystem an lstat takes microseconds, and a thread-pool round trip several times
 * that, so an area there is measured with synchronous calls (one area at a time, yielding to the
 * event loop between areas, so an editor stays responsive). Anywhere else the calls stay
 * asynchronous, a few in flight at once, so a slow server costs latency, not a stalled process.
 */
function measureOps(io: Io, limit: Limit): MeasureOps {
  if (io.sync) {
    return {
      sync: true,
      readdir: (p) => settle(() => fs.readdirSync(p, { withFileTypes: true })),
      lstat: (p) => settle(() => fs.lstatSync(p)),
    };
  }
  return {
    sync: false,
    readdir: (p) => limit(() => fs.promises.readdir(p, { withFileTypes: true })),
    lstat: (p) => limit(() => fs.promises.lstat(p)),
  };
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Every staging area of the static directory (or below `subpath`) with its size, artifact count,
 * last use and lock state, in natural tag order. An area is a directory holding a manifest, a
 * `staged.timestamp` or a lock; other directories (boards) are walked through, areas are not
 * searched for further areas. Symbolic links are never followed, so a linked build is neither
 * counted twice nor measured outside the static directory. Directories this user may not read
 * are passed over; an area removed while it is measured is left out.
 */
export async function usage(staticDir: string, options: UsageOptions = {}): Promise<AreaUsage[]> {
  const timing = clampTiming(options);
  const limit = limiter(Math.max(1, Math.floor(options.concurrency ?? DEFAULT_CONCURRENCY)));
  const { staticDir: root, realStaticDir, io } = await resolveStaticDir(staticDir);
  let start = root;
  if (options.subpath !== undefined && options.subpath !== '' && options.subpath !== '.' && options.subpath !== '/') {
    const area = await resolveArea(root, options.subpath);
    if (!area.exists) throw new StagingError('ENOENT', `There is no directory ${area.dir} in the static directory.`, { path: area.dir });
    const st = await fs.promises.lstat(area.dir).catch((err: unknown) => {
      throw asStagingError(err, 'inspect', area.dir);
    });
    if (st.isSymbolicLink()) {
      throw new StagingError('EBADTAG', `${area.dir} is a symbolic link; give the directory it points to instead.`, { path: area.dir });
    }
    start = area.dir;
  }
  const [rootStat, skew] = await Promise.all([fs.promises.stat(realStaticDir), fsClockSkew(realStaticDir)]);
  const nowFs = Date.now() + skew;
  const rootOps = measureOps(io, limit);
  const found: AreaUsage[] = [];

  const measure = async (dir: string, entries: fs.Dirent[]): Promise<void> => {
    let dirStat: fs.Stats;
    try {
      dirStat = await limit(() => fs.promises.lstat(dir));
    } catch (err) {
      if (isGone(err)) return;
      throw asStagingError(err, 'inspect', dir);
    }
    // An area may be a mount of its own: how to call it depends on its filesystem.
    const ops = dirStat.dev === rootStat.dev ? rootOps : measureOps(await ioFor(dir, dirStat.dev), limit);
    if (ops.sync) await nextTurn();
    const measured = await measureArea(root, dir, dirStat, entries, ops, timing, nowFs, limit);
    if (measured !== undefined) found.push(measured);
  };

  const visit = async (dir: string): Promise<void> => {
    let entries: fs.Dirent[];
    try {
      // Directory reads along the way stay asynchronous: a board may be a mount of its own.
      entries = await limit(() => fs.promises.readdir(dir, { withFileTypes: true }));
    } catch (err) {
      if (dir === start) throw asStagingError(err, 'read', dir);
      if (isGone(err) || isDenied(err)) return;
      throw asStagingError(err, 'read', dir);
    }
    // The static directory itself is never an area (a tag has at least one segment).
    if (dir !== root && isAreaListing(entries)) return measure(dir, entries);
    await Promise.all(entries.filter((e) => e.isDirectory() && !isProtocolName(e.name)).map((e) => visit(path.join(dir, e.name))));
  };
  await visit(start);
  return found.sort((a, b) => naturalOrder.compare(a.tag, b.tag));
}

async function measureArea(
  root: string,
  dir: string,
  dirStat: fs.Stats,
  top: readonly fs.Dirent[],
  ops: MeasureOps,
  timing: Timing,
  nowFs: number,
  limit: Limit,
): Promise<AreaUsage | undefined> {
  let bytes = 0;
  let files = 0;
  let incomplete = false;
  const seenInodes = new Set<string>();

  const walk = async (current: string, entries: readonly fs.Dirent[], atTop: boolean): Promise<void> => {
    await Promise.all(
      entries.map(async (e) => {
        if (isLockArtefact(e.name)) return;
        const p = path.join(current, e.name);
        if (e.isDirectory()) {
          let children: fs.Dirent[];
          try {
            children = await ops.readdir(p);
          } catch (err) {
            if (!isGone(err)) incomplete = true;
            return;
          }
          await walk(p, children, false);
          return;
        }
        let st: fs.Stats;
        try {
          st = await ops.lstat(p);
        } catch (err) {
          if (!isGone(err)) incomplete = true;
          return;
        }
        if (st.isFile() && !(atTop && isBookkeeping(e.name))) files++;
        if (st.nlink > 1) {
          // Hard links inside one build take the space once (each name is still an artifact).
          const key = `${st.dev}:${st.ino}`;
          if (seenInodes.has(key)) return;
          seenInodes.add(key);
        }
        bytes += st.size;
      }),
    );
  };

  const has = (name: string): boolean => top.some((e) => e.name === name);
  const [, lastUsedMs, manifestCount, judged] = await Promise.all([
    walk(dir, top, true),
    has(TIMESTAMP_FILE)
      ? ops.lstat(path.join(dir, TIMESTAMP_FILE)).then(
          (st) => st.mtimeMs,
          () => dirStat.mtimeMs,
        )
      : Promise.resolve(dirStat.mtimeMs),
    has(MANIFEST_FILE) ? limit(() => readManifestCount(path.join(dir, MANIFEST_FILE))) : Promise.resolve(undefined),
    has(LOCK_NAME) ? limit(() => judgeLock({ staticDir: root, tag: tagOf(root, dir), dir }, timing, nowFs)) : Promise.resolve(undefined),
  ]);
  const out: AreaUsage = {
    tag: tagOf(root, dir),
    dir,
    bytes,
    artifacts: manifestCount?.count ?? files,
    lastUsedMs,
    state: judged?.info.state ?? 'free',
  };
  if (judged !== undefined && judged.info.state !== 'free') out.lock = judged.info;
  if (incomplete) out.incomplete = true;
  if (manifestCount?.damaged !== undefined) out.damaged = manifestCount.damaged;
  return out;
}

/**
 * The number of artifacts a manifest records (undefined when it cannot be read or is not one),
 * and, for a manifest that fails `parseManifest`'s checks, why: `du` shows such an area as damaged
 * rather than failing on it.
 */
async function readManifestCount(file: string): Promise<{ count?: number; damaged?: string } | undefined> {
  let text: string;
  try {
    // Never through a link, never waiting on a FIFO put in its place.
    text = await readRecord(file, file, MAX_MANIFEST_BYTES);
  } catch (err) {
    return isStagingError(err) ? { damaged: err.message } : undefined;
  }
  try {
    return { count: Object.keys(parseManifest(text, file).artifacts).length };
  } catch (err) {
    const damaged = err instanceof Error ? err.message : String(err);
    try {
      const parsed: unknown = JSON.parse(text);
      const artifacts = typeof parsed === 'object' && parsed !== null ? (parsed as { artifacts?: unknown }).artifacts : undefined;
      if (typeof artifacts === 'object' && artifacts !== null && !Array.isArray(artifacts)) return { count: Object.keys(artifacts).length, damaged };
    } catch {
      /* not JSON: count the files instead */
    }
    return { damaged };
  }
}

/** Which rule selected an area for removal. */
export type PruneRule = 'keep' | 'older-than';

export interface PruneOptions extends Partial<Timing> {
  /** Keep this many most recently used areas; the rest are selected. */
  keep?: number;
  /** Select areas last used longer ago than this many milliseconds. */
  olderThan?: number;
  /** Decide and report, remove nothing. */
  dryRun?: boolean;
  /** Prune only below this directory of the static directory. */
  subpath?: string;
  clientId?: string;
  /** Filesystem calls in flight at once while measuring. */
  concurrency?: number;
  /**
   * There is no force: an area someone holds (or held, for a stale or legacy lock) is never
   * pruned. Use `destroy` with `force` for one area whose holder is known to be gone.
   */
  force?: never;
}

export interface PruneCandidate extends AreaUsage {
  /** The rules that selected it (both when both did). */
  rules: PruneRule[];
  /** Why it was selected, for people: "last used 40 d ago (limit 30 d)". */
  reason: string;
}

export interface PruneSkipped extends PruneCandidate {
  /** Why it was left in place: who holds it, or that it was used while pruning. */
  skippedBecause: string;
}

export interface PruneFailed extends PruneCandidate {
  error: { code: string; message: string };
}

export interface PruneResult {
  dryRun: boolean;
  /** Removed, least recently used first (with `dryRun`: what would be removed). */
  removed: PruneCandidate[];
  /** Selected but left in place: held, stale, legacy, or used meanwhile. */
  skipped: PruneSkipped[];
  /** Selected, free, but removing failed; the others were still tried. */
  failed: PruneFailed[];
  /** Bytes of the removed areas. */
  bytes: number;
}

function days(ms: number): string {
  const d = ms / 86_400_000;
  if (d >= 1) return `${Math.round(d)} d`;
  const h = ms / 3_600_000;
  if (h >= 1) return `${Math.round(h)} h`;
  return `${Math.max(0, Math.round(ms / 60_000))} min`;
}

/** A limit as given: "36 h", not a rounded "2 d". */
function exactly(ms: number): string {
  if (ms % 86_400_000 === 0) return `${ms / 86_400_000} d`;
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  return `${Math.round(ms / 1000)} s`;
}

function checkCount(name: string, value: number | undefined): void {
  if (value !== undefined && !(Number.isInteger(value) && value >= 0)) {
    throw new RangeError(`prune: ${name} must be a whole number of at least 0, not ${String(value)}.`);
  }
}

/**
 * Removes the least recently used staging areas: those beyond the `keep` most recently used, and
 * those last used more than `olderThan` ms ago. With both, an area goes when either rule selects
 * it (each rule is a limit the static directory must stay within); with neither, nothing is
 * selected. Areas whose lock is held, stale or legacy are never removed: a stale lock's holder
 * may be a machine that comes back, and a legacy lock's holder cannot be judged at all.
 * Each removal goes through `destroy`, which takes the area's lock (so an area taken meanwhile is
 * refused, not removed) and writes the audit log. A failed removal does not stop the others; it
 * is reported in `failed`.
 */
export async function prune(staticDir: string, options: PruneOptions = {}): Promise<PruneResult> {
  checkCount('keep', options.keep);
  if (options.olderThan !== undefined && !(Number.isFinite(options.olderThan) && options.olderThan >= 0)) {
    throw new RangeError(`prune: olderThan must be a number of milliseconds of at least 0, not ${String(options.olderThan)}.`);
  }
  const timing = clampTiming(options);
  const dryRun = options.dryRun === true;
  const areas = await usage(staticDir, {
    ...timing,
    ...(options.subpath !== undefined ? { subpath: options.subpath } : {}),
    ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
  });
  const { staticDir: root, realStaticDir } = await resolveStaticDir(staticDir);
  const nowFs = Date.now() + (await fsClockSkew(realStaticDir));

  // Most recently used first; ties by tag so the choice does not depend on the walk's order.
  const ranked = [...areas].sort((a, b) => b.lastUsedMs - a.lastUsedMs || naturalOrder.compare(a.tag, b.tag));
  const selected: PruneCandidate[] = [];
  ranked.forEach((area, rank) => {
    const rules: PruneRule[] = [];
    const reasons: string[] = [];
    if (options.keep !== undefined && rank >= options.keep) {
      rules.push('keep');
      reasons.push(`not among the ${options.keep} most recently used (#${rank + 1})`);
    }
    if (options.olderThan !== undefined && area.lastUsedMs < nowFs - options.olderThan) {
      rules.push('older-than');
      reasons.push(`last used ${days(nowFs - area.lastUsedMs)} ago (limit ${exactly(options.olderThan)})`);
    }
    if (rules.length > 0) selected.push({ ...area, rules, reason: reasons.join('; ') });
  });
  selected.reverse(); // least recently used first

  const result: PruneResult = { dryRun, removed: [], skipped: [], failed: [], bytes: 0 };
  const skip = (c: PruneCandidate, because: string): void => void result.skipped.push({ ...c, skippedBecause: because });
  for (const candidate of selected) {
    if (candidate.state !== 'free') {
      skip(candidate, heldBecause(candidate.state, candidate.lock));
      continue;
    }
    if (dryRun) {
      result.removed.push(candidate);
      result.bytes += candidate.bytes;
      continue;
    }
    try {
      // Look again just before: the walk may be minutes old on a large static directory.
      const now = await inspect(root, candidate.tag, timing);
      if (!now.exists) continue; // removed by someone else meanwhile: nothing left to prune
      if (now.state !== 'free') {
        skip(candidate, heldBecause(now.state, now));
        continue;
      }
      const stamp = await fs.promises.lstat(path.join(candidate.dir, TIMESTAMP_FILE)).catch(() => undefined);
      if (stamp !== undefined && stamp.mtimeMs > candidate.lastUsedMs) {
        skip(candidate, 'it was staged to again while pruning');
        continue;
      }
      await destroy(root, candidate.tag, { ...timing, onlyStaged: true, ...(options.clientId !== undefined ? { clientId: options.clientId } : {}) });
      result.removed.push(candidate);
      result.bytes += candidate.bytes;
    } catch (err) {
      if (isStagingError(err, 'ELOCKED')) {
        const lock = err.lock;
        if (lock === undefined) skip(candidate, err.message);
        // destroy refuses an area with a lock held somewhere inside it, too.
        else if (lock.dir !== candidate.dir) skip(candidate, `${tagOf(root, lock.dir)} inside it is held by ${describeHolder(lock)}`);
        else skip(candidate, heldBecause(lock.state, lock));
      } else if (isStagingError(err, 'ENOENT')) {
        continue;
      } else {
        const e = asStagingError(err, 'remove', candidate.dir);
        result.failed.push({ ...candidate, error: { code: e.code, message: e.message } });
      }
    }
  }
  return result;
}

function heldBecause(state: LockState, lock: LockInfo | undefined): string {
  const who = lock !== undefined ? describeHolder(lock) : 'another process';
  if (state === 'stale') return `its lock by ${who} is stale; kept in case its holder comes back (destroy it by its tag if it will not)`;
  if (state === 'legacy') return `it is locked by ${who}`;
  return `it is held by ${who}`;
}
