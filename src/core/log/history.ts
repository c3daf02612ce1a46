/**
 * The history of every build: each transition of each area (taken, released, lost, taken over,
 * force-released, destroyed, staged, verified), whichever client made it, appended by the core to
 * `<static>/.devserver-staging/history/<h[0..2]>/<h>/<hostname>.<n>.jsonl` (h: SHA-256 of the tag).
 *
 * One file per host: O_APPEND keeps whole the lines of all processes of one host (on a local
 * filesystem and on one NFS client), and no two hosts ever append to the same file. A segment
 * that reaches HISTORY_SEGMENT_BYTES is full: the host's writers go on in the next generation,
 * and whoever creates generation n drops n-2, so a host keeps at most two segments per tag.
 * Creating a generation is `O_EXCL`, so exactly one writer does it and nothing is renamed or lost
 * in a race.
 *
 * History is best effort for the operation it records: a record that cannot be written never
 * fails or undoes the operation, but is reported through the caller's `warn` (unlike the audit log,
 * which is written first and gates force-release and destroy).
 */
import * as fs from 'fs';
import * as path from 'path';
import { type Dir, appendRecord, notARecord, openBelow, openDir, openDirWhere, openOrMakeBelow, readRecordTail, settle } from '../fs/anchored';
import { fsClockSkew, knownClockSkew } from '../fs/clock';
import { openMeta } from '../fs/meta';
import { StagingError, errnoCode, errnoHint } from '../base/errors';
import { thisProcess } from '../base/holder';
import {
  HISTORY_DIR,
  HISTORY_SEGMENT_BYTES,
  META_DIR,
  historyDirOf,
  historyHostName,
  historySegmentName,
  parseHistorySegmentName,
} from '../base/protocol';
import { sortInSlices } from '../base/slices';
import { parseTag, resolveStaticDir } from '../fs/tags';
import type { Holder, LockInfo } from '../base/types';

/** The transitions of an area that the history records. */
export type HistoryKind = 'acquired' | 'released' | 'lost' | 'taken-over' | 'force-released' | 'destroyed' | 'staged' | 'verified';

export const HISTORY_KINDS: readonly HistoryKind[] = ['acquired', 'released', 'lost', 'taken-over', 'force-released', 'destroyed', 'staged', 'verified'];

/** A process that made a transition. */
export interface HistoryActor {
  user: string;
  hostname: string;
  pid: number;
  clientId: string;
  /** What the lock was for (the holder's purpose), where there was one. */
  purpose?: string;
}

/** The lock a takeover or force-release removed: as much as its record told. */
export interface HistoryPrevious {
  user?: string;
  hostname?: string;
  pid?: number;
  clientId?: string;
  purpose?: string;
  /** When it was taken (ISO 8601, the filesystem's clock). */
  acquiredAt?: string;
  /** The Python devserver's lock. */
  legacy?: boolean;
}

/** One line of the history. */
export interface HistoryEvent {
  /** The area's tag (normalised). */
  tag: string;
  kind: HistoryKind;
  /** When, ISO 8601 in the filesystem's clock (as a holder's `acquiredAt`), so hosts agree on the order. */
  time: string;
  /**
   * Who: the lock's holder for `acquired`, `released`, `lost`, `staged` and `destroyed`; the process
   * that removed the lock for `taken-over` and `force-released` (the holder it removed is
   * `previous`); the process that checked the build for `verified`.
   */
  holder: HistoryActor;
  /** The fencing token of the lock concerned (for `taken-over` and `force-released`: of the lock removed). */
  fence?: number;
  /** How long the lock was held: `released`, `lost`, `destroyed`, and (the removed lock's) `taken-over`, `force-released`. */
  heldMs?: number;
  /** `acquired`: how long the caller waited for the lock. */
  waitedMs?: number;
  /** `taken-over`, `force-released`: the holder of the lock removed. */
  previous?: HistoryPrevious;
  /** `lost`: why. */
  reason?: string;
  /** `staged`: artifacts written (added or replaced), artifacts found identical, bytes written. */
  artifacts?: number;
  skipped?: number;
  bytes?: number;
  /** `verified`: intact or not, the number of problems, the artifacts and bytes checked. */
  ok?: boolean;
  problems?: number;
  files?: number;
}

export interface HistoryOptions {
  /**
   * Hears what history could not do: a record that could not be written (the operation itself
   * went through), a segment skipped when reading (a link or FIFO in its place). Default:
   * `process.emitWarning`. Called at most once per record.
   */
  warn?: (warning: StagingError) => void;
}

/** The longest text kept from a purpose or reason: lines stay small, and reading them bounded. */
const MAX_TEXT = 500;
/** Reading a segment looks at no more than its last this many bytes (a planted huge file costs nothing). */
const MAX_SEGMENT_READ = 4 * HISTORY_SEGMENT_BYTES;
/** A query for the newest few events reads this much of each segment's end first. */
const TAIL_READ = 64 * 1024;
/**
 * A glance (`lastHeld`, which a tooltip asks on every hover) reads the end of at most this many
 * segments of the tag, the newest by mtime: a tag's history holds one or two segments per host, and
 * however many hosts or bytes a co-user plants there, a glance reads no more than 1 MiB.
 */
const GLANCE_SEGMENTS = 16;
/** Generations tried in one append before giving up (each step is someone else's progress). */
const MAX_STEPS = 8;

function clip(text: string): string {
  return text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT)}…` : text;
}

/** The actor of an event from a holder record (or `thisProcess`). */
export function actorOf(h: Pick<Holder, 'user' | 'hostname' | 'pid' | 'clientId' | 'purpose'>): HistoryActor {
  const a: HistoryActor = { user: h.user, hostname: h.hostname, pid: h.pid, clientId: h.clientId };
  if (h.purpose !== undefined && h.purpose !== '') a.purpose = clip(h.purpose);
  return a;
}

/** This process as the actor of an event it records without holding the lock. */
export function thisActor(clientId?: string, purpose?: string): HistoryActor {
  return actorOf({ ...thisProcess(clientId), ...(purpose !== undefined ? { purpose } : {}) });
}

/** The removed lock of a takeover or force-release, from its judged state. */
export function previousOf(info: Pick<LockInfo, 'holder' | 'legacy'>): HistoryPrevious {
  if (info.legacy !== undefined) return { hostname: info.legacy.hostname, ...(info.legacy.pid !== undefined ? { pid: info.legacy.pid } : {}), legacy: true };
  if (info.holder === undefined) return {};
  const p: HistoryPrevious = actorOf(info.holder);
  if (info.holder.acquiredAt !== '') p.acquiredAt = info.holder.acquiredAt;
  return p;
}

/**
 * The event of a takeover or force-release: by this process, of the lock judged as `info` (its
 * token, its holder, how long it had been held where that is known).
 */
export function removalEvent(tag: string, kind: 'taken-over' | 'force-released', info: Pick<LockInfo, 'holder' | 'legacy' | 'ageMs'>, by: { clientId?: string; purpose?: string }): NewHistoryEvent {
  return {
    tag,
    kind,
    holder: thisActor(by.clientId, by.purpose),
    ...(info.holder?.fence !== undefined ? { fence: info.holder.fence } : {}),
    ...(info.ageMs !== undefined ? { heldMs: Math.round(info.ageMs) } : {}),
    previous: previousOf(info),
  };
}

// ---------------------------------------------------------------------------------------------
// Writing

export type NewHistoryEvent = Omit<HistoryEvent, 'time'>;

type Warn = NonNullable<HistoryOptions['warn']>;

const defaultWarn: Warn = (warning) => process.emitWarning(warning.message, { type: 'DevserverStagingWarning', code: 'DEVSERVER_STAGING_HISTORY' });

/** Where a kept segment is: the tag's key (`knownSegments`) and the segment's real path. */
interface SegmentPlace {
  key: string;
  path: string;
}

/**
 * One holder's segment, kept open from its lease's first record to its last on a local filesystem:
 * the records after the first then cost an `fstat` and a `write` instead of a dozen calls. What it
 * appends to is the regular file it opened through the checked directory, as a lease acts on the
 * area it opened; once that file is full, or gone, the next record takes the usual way. When the
 * lease ends, a segment whose place is known is left open for a moment (`park`), for the tag's
 * next lease.
 */
export class HistorySegment {
  private fd: number | undefined;
  private place: SegmentPlace | undefined;
  /** Set once the lease is over: a record still in flight then (a `lost` while releasing) keeps nothing open. */
  private ended = false;

  /** @internal */
  keep(fd: number, place?: SegmentPlace): void {
    this.close();
    if (this.ended) {
      closeQuietly(fd);
      return;
    }
    this.fd = fd;
    this.place = place;
  }

  /** The lease is over: lets the segment go (parked where its place is known), and any kept after this is closed at once. */
  end(): void {
    this.ended = true;
    if (this.fd !== undefined && this.place !== undefined) {
      park(this.place, this.fd);
      this.fd = undefined;
    }
    this.close();
  }

  /** @internal Appends `line` to the kept segment if it is still a file in place and not full; false when it is not. */
  append(line: string): boolean {
    if (this.fd === undefined) return false;
    let st: fs.Stats | undefined;
    try {
      st = fs.fstatSync(this.fd);
    } catch {
      st = undefined;
    }
    // One link exactly: removed since (0), or the same file under another name too (a hard link,
    // perhaps outside the static directory), it is left to the usual way, which says why.
    if (st === undefined || !st.isFile() || st.nlink !== 1 || st.size >= HISTORY_SEGMENT_BYTES) {
      this.close();
      return false;
    }
    fs.writeSync(this.fd, line);
    return true;
  }

  close(): void {
    if (this.fd === undefined) return;
    closeQuietly(this.fd);
    this.fd = undefined;
    this.place = undefined;
  }
}

function closeQuietly(fd: number): void {
  try {
    fs.closeSync(fd);
  } catch {
    /* already closed */
  }
}

/**
 * How long a segment stays open once its lease is over, for the tag's next record: a loop of lock
 * cycles finds it open, an idle process lets it go (an open file keeps its filesystem from being
 * unmounted). `flushHistory` lets every one go at once.
 */
const PARK_MS = 1_000;
const MAX_PARKED = 64;
const parked = new Map<string, { fd: number; path: string; at: number }>();
let sweeper: NodeJS.Timeout | undefined;

function park(place: SegmentPlace, fd: number): void {
  const old = parked.get(place.key);
  if (old !== undefined) closeQuietly(old.fd);
  parked.delete(place.key);
  if (parked.size >= MAX_PARKED) closeParked();
  parked.set(place.key, { fd, path: place.path, at: Date.now() });
  if (sweeper === undefined) {
    sweeper = setInterval(() => {
      const now = Date.now();
      for (const [key, p] of parked) {
        if (now - p.at < PARK_MS) continue;
        closeQuietly(p.fd);
        parked.delete(key);
      }
      if (parked.size === 0) closeParked();
    }, PARK_MS);
    sweeper.unref();
  }
}

/** Closes every parked segment. */
function closeParked(): void {
  for (const p of parked.values()) closeQuietly(p.fd);
  parked.clear();
  if (sweeper !== undefined) clearInterval(sweeper);
  sweeper = undefined;
}

/** Records on network filesystems, in the order they were made: not waited for by the operations. */
let queue: Promise<void> = Promise.resolve();
const inflight = new Set<Promise<void>>();

/**
 * Appends `event` to the history of its tag. Never rejects: a failure goes to `warn`. On a local
 * filesystem the record is written when the returned promise settles (a few system calls, no
 * waiting on others); on a network filesystem it is queued, so that no lock operation waits on a
 * server's round trips, and `flushHistory` waits for it.
 */
export function recordHistory(staticDir: string, event: NewHistoryEvent, warn: Warn = defaultWarn, segment?: HistorySegment): Promise<void> {
  const atMs = Date.now();
  const real = localStaticDirs.get(staticDir);
  if (real !== undefined && appendNow(staticDir, real, event, atMs, segment, warn)) return WRITTEN;
  const write = (sd: { staticDir: string; realStaticDir: string; io: { sync: boolean } }): Promise<void> => {
    if (sd.io.sync && path.isAbsolute(staticDir)) {
      if (localStaticDirs.size >= 100) localStaticDirs.clear();
      localStaticDirs.set(staticDir, sd.realStaticDir);
    }
    return writeEvent(sd.staticDir, sd.realStaticDir, sd.io.sync, event, atMs, sd.io.sync ? segment : undefined).then(
      (note) => {
        if (note !== undefined) tell(warn, new StagingError('EIO', `Recorded the history of ${event.tag}, but ${note}.`));
      },
      (err: unknown) => reportWrite(warn, staticDir, event, err),
    );
  };
  const done = resolveStaticDir(staticDir).then(
    (sd) => {
      if (sd.io.sync) return write(sd);
      // Network filesystems: one after the other, so that a process's events keep their order.
      queue = queue.then(() => write(sd));
      return undefined;
    },
    (err: unknown) => reportWrite(warn, staticDir, event, err),
  );
  inflight.add(done);
  void done.finally(() => inflight.delete(done));
  return done;
}

const WRITTEN = Promise.resolve();

/**
 * Static directories on local filesystems that records went to, by the absolute path they were
 * given as, with their real path: the next record there is written at once (`appendNow`).
 */
const localStaticDirs = new Map<string, string>();

/** The event's line: its fields, then `time` (spliced in rather than spread into a copy of the event). */
function lineOf(event: NewHistoryEvent, fsMs: number): string {
  return `${JSON.stringify(event).slice(0, -1)},"time":"${new Date(fsMs).toISOString()}"}\n`;
}

/**
 * A record on a local filesystem whose clock offset is known, appended before this returns: to the
 * lease's segment or to the one the tag was last written to (both checked as they are used). False
 * when it takes the usual way (which then also says what is wrong).
 */
function appendNow(staticDir: string, realStaticDir: string, event: NewHistoryEvent, atMs: number, segment: HistorySegment | undefined, warn: Warn): boolean {
  const skewMs = knownClockSkew(realStaticDir);
  if (skewMs === undefined) return false;
  const line = lineOf(event, atMs + skewMs);
  try {
    return segment?.append(line) === true || appendToKnown(`${realStaticDir}\0${event.tag}`, line, segment);
  } catch (err) {
    // The lease's segment refused the write (a full disk): reported like any record not written.
    reportWrite(warn, staticDir, event, err);
    return true;
  }
}

/** Waits until every history record this process has made is written (or reported as failed). */
export async function flushHistory(): Promise<void> {
  while (inflight.size > 0) await Promise.all([...inflight]);
  let settled: Promise<void>;
  do {
    settled = queue;
    await settled;
  } while (settled !== queue);
  closeParked();
}

/** A system error as words naming `shown` (not the descriptor path it was reached by); our own errors as they are. */
function inWords(err: unknown, shown: string): unknown {
  // Node's own errors carry the syscall; the others (a link refused on the way) already say what and where.
  if (err instanceof StagingError || typeof (err as { syscall?: unknown }).syscall !== 'string') return err;
  const code = errnoCode(err);
  const what =
    code === 'ENOTDIR'
      ? 'ENOTDIR (something that is not a directory stands where one of the history goes)'
      : code === 'ENOENT'
        ? 'ENOENT (a directory on the way is gone, the static directory itself perhaps)'
        : String(code);
  return new StagingError('EIO', `${shown}: ${what}.${errnoHint(code)}`, { path: shown, cause: err });
}

function reportWrite(warn: Warn, staticDir: string, event: NewHistoryEvent, err: unknown): void {
  const why = err instanceof Error ? err.message : String(err);
  const shown = `${staticDir}/${META_DIR}/${HISTORY_DIR}`;
  tell(warn, new StagingError('EIO', `Could not record the history of ${event.tag} (the operation itself went through): ${why}`, { path: shown, cause: err }));
}

function tell(warn: Warn, warning: StagingError): void {
  try {
    warn(warning);
  } catch {
    /* a listener that throws must not break the operation */
  }
}

/**
 * Modes of what history creates: writable by whoever may write the static directory, whatever the
 * creator's umask. Directories take the static directory's group and other write bits (and its
 * set-group-ID bit, so a shared group stays), not its sticky bit: the writers of one host must be
 * able to drop each other's old generations. Segments take their directory's write bits.
 */
const dirModeFor = (top: Dir): number => 0o755 | (top.mode & 0o2022);
const fileModeFor = (dir: Dir): number => 0o644 | (dir.mode & 0o022);

/** The generation each tag directory is at, as this process last found it: spares a directory read per record. */
const generations = new Map<string, number>();

async function writeEvent(
  staticDir: string,
  realStaticDir: string,
  sync: boolean,
  event: NewHistoryEvent,
  atMs: number,
  segment: HistorySegment | undefined,
): Promise<string | undefined> {
  const skewMs = await fsClockSkew(realStaticDir);
  const line = lineOf(event, atMs + skewMs);
  if (segment?.append(line) === true) return undefined;
  const key = `${realStaticDir}\0${event.tag}`;
  if (sync && appendToKnown(key, line, segment)) return undefined;
  const { dir, exact } = await openTagDir(staticDir, realStaticDir, event.tag, sync).catch((err: unknown) => {
    throw inWords(err, [staticDir, META_DIR, HISTORY_DIR, ...historyDirOf(event.tag)].join('/'));
  });
  try {
    return await appendToSegments(dir, line, fileModeFor(dir), sync, segment, exact ? key : undefined);
  } finally {
    dir.close();
  }
}

/**
 * The segment this process last appended each tag's record to, by its real path, where its
 * directory was found exactly there (`openDirWhere`): the next record of the tag opens it in one
 * lookup. Bounded like `tagDirs`.
 */
const knownSegments = new Map<string, string>();

const O_APPEND_RECORD = fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK;

/**
 * Appends `line` to the segment `key`'s tag was last written to: the one parked after the last
 * lease, or else opened by its path in one call. Used only if it is a regular file that is not
 * full, has no other name (a hard link) and the kernel places it exactly at that path: no link on
 * the way led elsewhere, and it was not moved or removed meanwhile. False (and nothing written)
 * when it is not so: then the caller takes the way level by level, which says what is wrong.
 */
function appendToKnown(key: string, line: string, segment: HistorySegment | undefined): boolean {
  let fd: number;
  let p: string;
  const kept = parked.get(key);
  if (kept !== undefined) {
    parked.delete(key);
    fd = kept.fd;
    p = kept.path;
  } else {
    const known = knownSegments.get(key);
    if (known === undefined) return false;
    p = known;
    try {
      fd = fs.openSync(p, O_APPEND_RECORD);
    } catch {
      knownSegments.delete(key);
      return false;
    }
  }
  let handedOn = false;
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile() || st.nlink !== 1 || st.size >= HISTORY_SEGMENT_BYTES || fs.readlinkSync(`/proc/self/fd/${fd}`) !== p) {
      knownSegments.delete(key);
      return false;
    }
    fs.writeSync(fd, line);
    if (segment !== undefined) segment.keep(fd, { key, path: p });
    else park({ key, path: p }, fd);
    handedOn = true;
    return true;
  } catch {
    // A failed write goes the long way, which writes again or says why it cannot.
    knownSegments.delete(key);
    return false;
  } finally {
    if (!handedOn) closeQuietly(fd);
  }
}

/**
 * The directory of `tag`'s segments, made where missing. Usually there already and reached in one
 * lookup (`openDirWhere`); else level by level from the static directory, each level opened
 * without following a link, so a link or file planted on the way is refused, never followed.
 */
async function openTagDir(staticDir: string, realStaticDir: string, tag: string, sync: boolean): Promise<{ dir: Dir; exact: boolean }> {
  const names = [META_DIR, HISTORY_DIR, ...historyDirOf(tag)];
  const fast = await openDirWhere(`${realStaticDir}/${names.join('/')}`, sync);
  if (fast !== undefined) return { dir: fast, exact: true };
  const top = await openDir(staticDir, true, sync);
  const opened: Dir[] = [top];
  try {
    opened.push(await openMeta(top, sync));
    for (const name of names.slice(1)) opened.push(await openOrMakeBelow(opened.at(-1)!, name, { sync, mode: dirModeFor(top) }));
    return { dir: opened.pop()!, exact: false };
  } finally {
    for (const d of opened) d.close();
  }
}

/** The names in an opened directory, synchronously on a local filesystem. */
function readNames(dir: Dir, sync: boolean): Promise<string[]> {
  return sync ? settle(() => fs.readdirSync(dir.at('.'))) : fs.promises.readdir(dir.at('.'));
}

let segmentHost: string | undefined;

/** This host's name in its segments' names. */
function hostOfSegments(): string {
  segmentHost ??= historyHostName(thisProcess().hostname);
  return segmentHost;
}

/** This host's newest generation in `dir` (-1: none yet), from a directory read. */
async function newestGeneration(dir: Dir, host: string, sync: boolean): Promise<number> {
  let newest = -1;
  for (const name of await readNames(dir, sync)) {
    const seg = parseHistorySegmentName(name);
    if (seg !== undefined && seg.host === host) newest = Math.max(newest, seg.generation);
  }
  return newest;
}

/** Appends `line` to this host's current segment; resolves to a note when it was written but something else went wrong. */
async function appendToSegments(dir: Dir, line: string, mode: number, sync: boolean, segment: HistorySegment | undefined, knownKey?: string): Promise<string | undefined> {
  const host = hostOfSegments();
  const key = `${dir.dev}:${dir.ino}:${host}`;
  let generation = generations.get(key);
  // Create only a generation known to be next: one after a full segment, or the first.
  let mayCreate = false;
  if (generation === undefined) {
    generation = Math.max(0, await newestGeneration(dir, host, sync));
    mayCreate = true;
  }
  for (let step = 0; step < MAX_STEPS; step++) {
    const name = historySegmentName(host, generation);
    let outcome;
    try {
      outcome = await appendRecord(dir.at(name), `${dir.shown}/${name}`, line, {
        mode,
        create: mayCreate ? 'exact' : false,
        fullAt: HISTORY_SEGMENT_BYTES,
        sync,
        ...(segment !== undefined ? { keep: (fd: number) => segment.keep(fd, knownKey === undefined ? undefined : { key: knownKey, path: `${dir.shown}/${name}` }) } : {}),
      });
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT' || mayCreate) throw inWords(err, `${dir.shown}/${name}`);
      // Dropped by a writer two generations on since this process last wrote: look again.
      generation = Math.max(0, await newestGeneration(dir, host, sync));
      mayCreate = true;
      continue;
    }
    if (outcome === 'full') {
      generation++;
      mayCreate = true;
      continue;
    }
    generations.set(key, generation);
    if (knownKey !== undefined) {
      if (knownSegments.size >= 1_000) knownSegments.clear();
      knownSegments.set(knownKey, `${dir.shown}/${name}`);
    }
    // The creator of generation n drops n-2: a host keeps at most two segments of a tag.
    if (outcome === 'created' && generation >= 2) {
      const old = historySegmentName(host, generation - 2);
      // unlink: a link or file planted there goes, never what a link points to.
      const dropped = sync ? settle(() => fs.unlinkSync(dir.at(old))) : fs.promises.unlink(dir.at(old));
      return dropped.then(
        () => undefined,
        (err: unknown) => (errnoCode(err) === 'ENOENT' ? undefined : `could not remove the old segment ${dir.shown}/${old} (${err instanceof Error ? err.message : String(err)}), so this tag's history may grow beyond its bound`),
      );
    }
    return undefined;
  }
  throw new StagingError('EIO', `the segments in ${dir.shown} kept changing while this process appended to them`, { path: dir.shown });
}

// ---------------------------------------------------------------------------------------------
// Reading

export interface HistoryQuery extends HistoryOptions {
  /** One area's events; without it, every area's. */
  tag?: string;
  /** Only events at or after this instant, in milliseconds since the epoch (`Date.now() - 2 * 86_400_000`: the last two days). */
  sinceMs?: number;
  /** Only the newest `limit` events (still oldest first). Cheap: only the ends of the segments are read. */
  limit?: number;
}

/** What ended the last holding of an area, for "last held by … for …". */
export interface LastHeld {
  /** The holder whose holding ended. */
  holder: HistoryActor | HistoryPrevious;
  /** How it ended: released (or destroyed) by its holder, lost, taken over as stale, force-released. */
  kind: 'released' | 'lost' | 'destroyed' | 'taken-over' | 'force-released';
  /** When it ended (ISO 8601, the filesystem's clock). */
  endedAt: string;
  heldMs?: number;
  fence?: number;
}

const ENDS: ReadonlySet<HistoryKind> = new Set(['released', 'lost', 'destroyed', 'taken-over', 'force-released']);

/** Events a host appends a little out of time order (each process stamps its own); older generations are read while within this of `sinceMs`. */
const ORDER_SLACK_MS = 60_000;

interface Want {
  tag?: string;
  sinceMs: number;
  limit: number;
  kinds?: ReadonlySet<HistoryKind>;
  warn: Warn;
  sync: boolean;
  /** Only the newest segment of a host, only its tail, of the newest `GLANCE_SEGMENTS` hosts. */
  glance: boolean;
}

/**
 * The history of one area (`tag`) or of all, oldest first (by time; events of one host at the
 * same instant in the order they were written). Reads never follow a link and never wait on a
 * FIFO: such an entry in place of a segment or directory is skipped and reported to `warn`.
 * Events this process recorded are written before it reads.
 */
export async function history(staticDir: string, query: HistoryQuery = {}): Promise<HistoryEvent[]> {
  return collect(staticDir, query);
}

/**
 * Who held `tag` last, and for how long: the newest event that ended a holding, or undefined. A
 * glance, made for a tooltip: the last 64 KiB of the newest segment of each of at most 16 hosts,
 * read asynchronously (never holding the caller's event loop while the disk answers).
 */
export async function lastHeld(staticDir: string, tag: string, options: HistoryOptions = {}): Promise<LastHeld | undefined> {
  const [e] = await collect(staticDir, { ...options, tag, limit: 1 }, ENDS, true);
  if (e === undefined) return undefined;
  const holder = (e.kind === 'taken-over' || e.kind === 'force-released') && e.previous !== undefined ? e.previous : e.holder;
  return {
    holder,
    kind: e.kind as LastHeld['kind'],
    endedAt: e.time,
    ...(e.heldMs !== undefined ? { heldMs: e.heldMs } : {}),
    ...(e.fence !== undefined ? { fence: e.fence } : {}),
  };
}

async function collect(staticDir: string, query: HistoryQuery, kinds?: ReadonlySet<HistoryKind>, glance = false): Promise<HistoryEvent[]> {
  const sd = await resolveStaticDir(staticDir);
  const tag = query.tag === undefined ? undefined : parseTag(query.tag).join('/');
  const limit = query.limit === undefined ? Infinity : Math.max(0, Math.floor(query.limit));
  if (limit === 0) return [];
  await flushHistory();
  const want: Want = {
    ...(tag !== undefined ? { tag } : {}),
    sinceMs: query.sinceMs ?? -Infinity,
    limit,
    ...(kinds !== undefined ? { kinds } : {}),
    warn: query.warn ?? defaultWarn,
    sync: sd.io.sync && !glance,
    glance,
  };
  const top = await openDir(sd.staticDir, true, want.sync);
  const opened: Dir[] = [top];
  const kept = new Kept(limit);
  try {
    const hist = await openChain(opened, [META_DIR, HISTORY_DIR], want);
    if (hist === undefined) return [];
    if (tag !== undefined) {
      const dir = await openChain(opened, historyDirOf(tag), want);
      if (dir !== undefined) await readTagDir(dir, want, kept);
    } else {
      for (const fan of await listNames(hist, want)) {
        const fanDir = await openQuietly(hist, fan, want);
        if (fanDir === undefined) continue;
        try {
          for (const name of await listNames(fanDir, want)) {
            const dir = await openQuietly(fanDir, name, want);
            if (dir === undefined) continue;
            try {
              await readTagDir(dir, want, kept);
            } finally {
              dir.close();
            }
          }
        } finally {
          fanDir.close();
        }
      }
    }
  } finally {
    for (const d of opened) d.close();
  }
  return kept.events();
}

/** An event read, with what orders it: its time, then its host's events as written (segment, generation, line). */
interface Read {
  e: HistoryEvent;
  t: number;
  /** The segments of one host in one tag directory, numbered in the order they were found. */
  source: number;
  generation: number;
  line: number;
}

/** Oldest first; events of one time keep the order they were written in (one host's). */
const byTime = (a: Read, b: Read): number => a.t - b.t || a.source - b.source || a.generation - b.generation || a.line - b.line;

/**
 * The events an answer keeps: all of them, or only the newest `limit` (by the order above), so
 * that memory follows the limit, not how much history there is. Nothing is spread into a call's
 * arguments: the count of events is set by whoever writes the history.
 */
class Kept {
  private items: Read[] = [];
  private sources = 0;

  constructor(private readonly limit: number) {}

  /** A number for the segments of one host in one tag directory. */
  source(): number {
    return this.sources++;
  }

  add(r: Read): void {
    this.items.push(r);
    if (this.items.length >= 2 * this.limit + 1_000) this.items = this.newest(this.items.sort(byTime));
  }

  private newest(sorted: Read[]): Read[] {
    return this.limit === Infinity || sorted.length <= this.limit ? sorted : sorted.slice(sorted.length - this.limit);
  }

  async events(): Promise<HistoryEvent[]> {
    const sorted = this.newest(await sortInSlices(this.items, byTime));
    this.items = [];
    return sorted.map((r) => r.e);
  }
}

/** The names in an opened directory; none when it cannot be read (reported, unless it has gone). */
function listNames(dir: Dir, want: Want): Promise<string[]> {
  return readNames(dir, want.sync).catch((err: unknown) => {
    if (errnoCode(err) !== 'ENOENT') warnRead(want, inWords(err, dir.shown));
    return [];
  });
}

/** Opens each name below the last opened directory; undefined when one is missing or not a directory (reported). */
async function openChain(opened: Dir[], names: readonly string[], want: Want): Promise<Dir | undefined> {
  for (const name of names) {
    const next = await openQuietly(opened.at(-1)!, name, want);
    if (next === undefined) return undefined;
    opened.push(next);
  }
  return opened.at(-1);
}

/** `openBelow`, with a missing entry as undefined and a link or file in a directory's place skipped and reported. */
async function openQuietly(parent: Dir, name: string, want: Want): Promise<Dir | undefined> {
  try {
    return await openBelow(parent, name, want.sync);
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT') return undefined;
    const shown = `${parent.shown}/${name}`;
    warnRead(want, code === 'ELOOP' ? notARecord(shown, 'a symbolic link') : code === 'ENOTDIR' ? notARecord(shown, 'not a directory') : inWords(err, shown));
    return undefined;
  }
}

function warnRead(want: Want, err: unknown): void {
  const why = err instanceof Error ? err.message : String(err);
  tell(want.warn, new StagingError('EIO', `Skipped part of the history: ${why}`, err instanceof StagingError && err.path !== undefined ? { path: err.path } : {}));
}

/** The events of one tag directory that `want` asks for, into `kept`: per host, newest generation first, as many as needed. */
async function readTagDir(dir: Dir, want: Want, kept: Kept): Promise<void> {
  const byHost = new Map<string, number[]>();
  for (const name of await listNames(dir, want)) {
    const seg = parseHistorySegmentName(name);
    if (seg === undefined) continue;
    const gens = byHost.get(seg.host);
    if (gens === undefined) byHost.set(seg.host, [seg.generation]);
    else gens.push(seg.generation);
  }
  const hosts = want.glance ? await newestHosts(dir, byHost) : byHost;
  for (const [host, gens] of hosts) {
    const source = kept.source();
    let got = 0;
    for (const gen of gens.sort((a, b) => b - a).slice(0, want.glance ? 1 : undefined)) {
      const { events, oldestMs } = await readSegment(dir, historySegmentName(host, gen), want, want.limit - got);
      for (const [line, e] of events.entries()) kept.add({ e, t: Date.parse(e.time), source, generation: gen, line });
      got += events.length;
      if (got >= want.limit || oldestMs < want.sinceMs - ORDER_SLACK_MS) break;
    }
  }
}

/** Hosts whose segments a glance compares by their mtimes: the first ones listed, where a co-user planted thousands. */
const GLANCE_CANDIDATES = 1_024;

/** The hosts whose newest segment was written last, at most `GLANCE_SEGMENTS` of them (by mtime; a link or FIFO is read as such later). */
async function newestHosts(dir: Dir, byHost: Map<string, number[]>): Promise<[string, number[]][]> {
  if (byHost.size <= GLANCE_SEGMENTS) return [...byHost];
  const candidates = [...byHost].slice(0, GLANCE_CANDIDATES);
  const dated = await Promise.all(
    candidates.map(async ([host, gens]) => {
      const newest = gens.reduce((a, b) => Math.max(a, b));
      const st = await fs.promises.lstat(dir.at(historySegmentName(host, newest))).catch(() => undefined);
      return { entry: [host, gens] as [string, number[]], mtimeMs: st?.mtimeMs ?? -Infinity };
    }),
  );
  return dated
    .sort((a, b) => b.mtimeMs - a.mtimeMs)
    .slice(0, GLANCE_SEGMENTS)
    .map((d) => d.entry);
}

/**
 * The last `needed` events of one segment that `want` asks for (all of them for Infinity), in file
 * order, and the time of the oldest line looked at. A small `needed` reads only the segment's end.
 */
async function readSegment(dir: Dir, name: string, want: Want, needed: number): Promise<{ events: HistoryEvent[]; oldestMs: number }> {
  const shown = `${dir.shown}/${name}`;
  for (const maxBytes of want.glance ? [TAIL_READ] : needed <= 100 ? [TAIL_READ, MAX_SEGMENT_READ] : [MAX_SEGMENT_READ]) {
    let tail;
    try {
      tail = await readRecordTail(dir.at(name), shown, maxBytes, want.sync);
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') warnRead(want, inWords(err, shown));
      return { events: [], oldestMs: Infinity };
    }
    const lines = tail.data.toString('utf8').split('\n');
    // A read that starts inside the file starts inside a line: drop that part.
    if (tail.from > 0) lines.shift();
    let oldestMs = Infinity;
    const events: HistoryEvent[] = [];
    for (const text of lines) {
      const e = parseEvent(text);
      if (e === undefined) continue;
      const t = Date.parse(e.time);
      oldestMs = Math.min(oldestMs, t);
      if (want.tag !== undefined && e.tag !== want.tag) continue;
      if (t < want.sinceMs || (want.kinds !== undefined && !want.kinds.has(e.kind))) continue;
      events.push(e);
    }
    const whole = tail.from === 0 || maxBytes === MAX_SEGMENT_READ || want.glance;
    if (events.length >= needed || whole) return { events: needed === Infinity || events.length <= needed ? events : events.slice(events.length - needed), oldestMs };
  }
  return { events: [], oldestMs: Infinity };
}

const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isText = (v: unknown): v is string => typeof v === 'string';

function parseActor(v: unknown): HistoryActor | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const r = v as Record<string, unknown>;
  if (!isText(r.hostname) || !isCount(r.pid)) return undefined;
  const a: HistoryActor = { user: isText(r.user) ? r.user : 'unknown', hostname: r.hostname, pid: r.pid, clientId: isText(r.clientId) ? r.clientId : `${r.hostname}:${r.pid}` };
  if (isText(r.purpose)) a.purpose = clip(r.purpose);
  return a;
}

function parsePrevious(v: unknown): HistoryPrevious | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const r = v as Record<string, unknown>;
  const p: HistoryPrevious = {};
  for (const k of ['user', 'hostname', 'clientId', 'purpose', 'acquiredAt'] as const) if (isText(r[k])) p[k] = clip(r[k]);
  if (isCount(r.pid)) p.pid = r.pid;
  if (r.legacy === true) p.legacy = true;
  return p;
}

/**
 * One line as an event, keeping only the fields of an event and of the right types: the files are
 * writable by co-users, so a line may be anything. Undefined for a line that is not an event.
 */
export function parseEvent(text: string): HistoryEvent | undefined {
  if (text === '' || text[0] !== '{') return undefined;
  let r: Record<string, unknown>;
  try {
    r = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (typeof r !== 'object' || r === null || !isText(r.tag) || !isText(r.time) || !HISTORY_KINDS.includes(r.kind as HistoryKind)) return undefined;
  if (!Number.isFinite(Date.parse(r.time))) return undefined;
  const holder = parseActor(r.holder);
  if (holder === undefined) return undefined;
  const e: HistoryEvent = { tag: r.tag, kind: r.kind as HistoryKind, time: r.time, holder };
  for (const k of ['fence', 'heldMs', 'waitedMs', 'artifacts', 'skipped', 'bytes', 'problems', 'files'] as const) if (isCount(r[k])) e[k] = r[k];
  const previous = parsePrevious(r.previous);
  if (previous !== undefined) e.previous = previous;
  if (isText(r.reason)) e.reason = clip(r.reason);
  if (typeof r.ok === 'boolean') e.ok = r.ok;
  return e;
}
