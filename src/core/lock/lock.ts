/**
 * Taking and releasing a staging area's lock: the devserver's AcquireLock/ReleaseLock, with a
 * named holder, a heartbeat, stale takeover by exactly one process, and the protected work told
 * (through an AbortSignal) when the lock is lost.
 */
import { EventEmitter } from 'events';
import type { Dirent } from 'fs';
import * as os from 'os';
import * as path from 'path';
import * as lockfile from 'proper-lockfile';
import { openDirIfThere, openDirWhere, type Dir } from '../fs/anchored';
import { fsClockSkew } from '../fs/clock';
import { StagingError, asStagingError, errnoCode, type NextStep } from '../base/errors';
import { printable } from '../base/format';
import { lookAtCounter, proposeToken, settleToken, stagedToken, type FenceContext } from './fence';
import { floorOf, recordFloor } from './floor';
import { makeHolder } from '../base/holder';
import { step } from '../base/steps';
import { HistorySegment, actorOf, history, recordHistory, removalEvent, type HistoryOptions, type NewHistoryEvent } from '../log/history';
import { ioFor, type Io } from '../fs/io';
import { judgeLock, lockPathOf } from './judge';
import { clearLitter } from './litter';
import { closeLockFd, makeLockFs, rememberPrecision, workOf, type LockFsState } from './lockfs';
import { LOCK_TARGET, WORK_PREFIX, clampTiming } from '../base/protocol';
import { findHeldAbove, findHeldInside, findNestingConflict, type NestingConflict } from './nesting';
import { Line, describeWaiter, type OnQueue } from './queue';
import { fenceOf, removeInstance } from './takeover';
import { openArea, parseTag, removeCreated, resolveArea, resolveStaticDir, type Area, type CreatedDir } from '../fs/tags';
import { destroyHeld } from './trash';
import type { Holder, LockInfo, QueueEntry, Timing } from '../base/types';

export interface AcquireOptions extends Partial<Timing>, HistoryOptions {
  /** The area must not exist yet; it is created by this call (the devserver's default). Default true. */
  createOnce?: boolean;
  /** How long to keep trying while someone else holds the lock, in ms. Default 0: fail at once. */
  waitMs?: number;
  /** What the lock is for, shown to others. */
  purpose?: string;
  /** Identifies this process or editor window to others. */
  clientId?: string;
  /** Aborts a wait for the lock. */
  signal?: AbortSignal;
  /**
   * While waiting: called with this caller's place in line (1: next to enter) and how many wait
   * in all, when it joins the line and each time either changes.
   */
  onQueue?: OnQueue;
}

export interface ReleaseOptions {
  /** Remove the staging area too (the devserver's failed-staging path, so a later run can retry). */
  destroy?: boolean;
}

export interface LeaseEvents {
  lost: [reason: StagingError];
  released: [];
}

/** Locks this process holds, by lock path: lets `release(staticDir, tag)` find them, as ReleaseLock did. */
const held = new Map<string, Lease>();

/** A held lock. Its `signal` aborts, with an ECOMPROMISED reason, if the lock is lost. */
export class Lease extends EventEmitter<LeaseEvents> {
  readonly staticDir: string;
  readonly tag: string;
  readonly dir: string;
  readonly lockPath: string;
  readonly holder: Holder;
  /** Whether this acquisition created the area directory. */
  readonly created: boolean;
  /** The fencing token of this lock: greater than that of every earlier holder of the area. */
  readonly fence: number;
  /** The area, opened when it was checked: act on it through `area.at(name)` (see anchored/dir.ts). */
  readonly area: Dir;
  /** The work directory's path, named through the lock (see `workDir`). */
  private readonly workPath: string;
  /** The real path of the static directory, for a destroy's trash. */
  private readonly realStaticDir: string;
  /** The directories this acquisition created, the area last: a destroy removes the parents too. */
  private readonly createdDirs: readonly CreatedDir[];
  private readonly closeParents: () => void;
  readonly io: Io;
  readonly timing: Timing;
  /** Made when the signal is first asked for: an AbortController costs as much as two system calls, and most leases are never asked. */
  private controller: AbortController | undefined;
  private status: 'held' | 'released' | 'lost' = 'held';
  private lostReason?: StagingError;
  /** Set by `attach` once proper-lockfile has granted the lock. */
  private unlock?: () => Promise<void>;

  /** @internal */
  constructor(area: Area, opened: OpenedLockArea, holder: Holder, timing: Timing, private readonly fsState: LockFsState) {
    super();
    this.staticDir = area.staticDir;
    this.tag = area.tag;
    this.dir = area.dir;
    this.lockPath = lockPathOf(area.dir);
    this.holder = holder;
    this.fence = holder.fence ?? 0;
    this.area = opened.dir;
    this.realStaticDir = area.realStaticDir;
    this.workPath = opened.dir.at(workOf(fsState));
    this.createdDirs = [...opened.created];
    this.closeParents = opened.closeParents;
    this.created = this.createdDirs.length > 0;
    this.io = fsState.io;
    this.timing = timing;
  }

  /**
   * The holder's work directory, named through the lock (`<area>/devserver.lock/work.<token>`).
   * Every change to the area goes into or out of it by rename; once the lock is taken away, the
   * name leads nowhere and the change fails instead of landing (the fence).
   */
  get workDir(): string {
    return this.workPath;
  }

  /** Whether `acquire` handed the lease (and the descriptors with it) to its caller. */
  private adopted = false;
  /** When it was handed over (this process's clock): how long it is held. */
  private adoptedAtMs = 0;
  private warn: HistoryOptions['warn'];
  private readonly segment = new HistorySegment();

  /**
   * @internal `acquire` hands the lease over: from now on it closes the descriptors when it ends,
   * and its transitions go into the history (a lock taken and let go again inside `acquire`, to
   * retry, is no transition of the area).
   */
  adopt(warn: HistoryOptions['warn']): void {
    this.adopted = true;
    this.adoptedAtMs = Date.now();
    this.warn = warn;
  }

  /** @internal Records a transition of this lease in the area's history; never rejects. */
  record(kind: 'acquired' | 'released' | 'lost' | 'destroyed' | 'staged', extra: Partial<NewHistoryEvent> = {}): Promise<void> {
    if (!this.adopted) return Promise.resolve();
    const held = kind === 'acquired' || kind === 'staged' ? {} : { heldMs: Date.now() - this.adoptedAtMs };
    return recordHistory(this.staticDir, { tag: this.tag, kind, holder: actorOf(this.holder), fence: this.fence, ...held, ...extra }, this.warn, this.segment);
  }

  /** @internal Lets go of the descriptors once the lease is over (the area's: before adoption, `acquire` does). */
  private closeDirs(): void {
    closeLockFd(this.fsState);
    if (!this.adopted) return;
    this.closeParents();
    this.area.close();
    this.segment.end();
  }

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      // Lost before anyone asked: the signal is aborted already, with the same reason.
      if (this.lostReason !== undefined) this.controller.abort(this.lostReason);
    }
    return this.controller.signal;
  }

  /** 'held' until released or lost. */
  get state(): 'held' | 'released' | 'lost' {
    return this.status;
  }

  /** @internal */
  attach(unlock: () => Promise<void>): void {
    this.unlock = unlock;
    held.set(this.lockPath, this);
  }

  /**
   * @internal Called from proper-lockfile's timer: must never throw, or it would take the whole
   * process (an editor's extension host) down with it.
   */
  lose(cause: unknown): void {
    if (this.status !== 'held') return;
    this.status = 'lost';
    if (held.get(this.lockPath) === this) held.delete(this.lockPath);
    // The descriptors stay open until `release`: work still in flight names paths through them,
    // and a number closed now could be reused by another open under its feet.
    const detail = lossCause(cause);
    const reason = new StagingError('ECOMPROMISED', `Lost the lock on ${this.dir}: ${detail}. Work done under it may be incomplete.`, {
      path: this.lockPath,
      cause,
    });
    this.lostReason = reason;
    try {
      this.controller?.abort(reason);
    } catch {
      /* a listener threw; nothing to do about it here */
    }
    try {
      this.emit('lost', reason);
    } catch {
      /* same */
    }
    void this.record('lost', { reason: detail });
  }

  /** @internal Lets go of a lock just taken that turned out unusable; never throws. */
  async releaseQuietly(): Promise<void> {
    await this.release().catch(() => undefined);
  }

  /**
   * Records the area's last token outside it (floor.ts), the greatest of ours and what its counter
   * holds; the refusal to destroy (the lock is released, the build kept) when that cannot be done.
   */
  private async keepFloor(): Promise<StagingError | undefined> {
    const look = await lookAtCounter(this.io, this.area, this.dir).catch(() => undefined);
    const token = Math.max(this.fence, look?.value ?? 0);
    return recordFloor(this.staticDir, this.realStaticDir, this.tag, token, ' The lock was released; the build is kept.').then(
      () => undefined,
      (err: unknown) => asStagingError(err, 'destroy', this.dir),
    );
  }

  /** Releases the lock; with `destroy`, removes the staging area too (atomically, see remove.ts). */
  async release(options: ReleaseOptions = {}): Promise<void> {
    if (this.status === 'lost') {
      // Nothing to remove (the lock is someone else's now); the descriptors can go.
      this.closeDirs();
      throw this.lostReason!;
    }
    if (this.status === 'released' || this.unlock === undefined) {
      throw new StagingError('ENOTHELD', `The lock on ${this.dir} was already released.`, { path: this.lockPath });
    }
    // proper-lockfile keeps one entry per path and its unlock acts on whatever entry is there now.
    // If our lock was taken away and this process took the place again (or took and released it),
    // that entry is not ours: unlocking would stop the other lease's heartbeat.
    if (held.get(this.lockPath) !== this) {
      this.lose(new Error('it was removed or replaced by another'));
      throw this.lostReason!;
    }
    let refused: StagingError | undefined;
    if (options.destroy === true) {
      const nested = await findHeldInside(this.dir, this.timing);
      // Destroying through a link would move the link away and leave the area, and our lock in it.
      const isLink = await this.io.lstat(this.dir).then((st) => st.isSymbolicLink(), () => false);
      if (isLink) {
        refused = new StagingError('EBADTAG', `Did not destroy ${this.dir}: it is a symbolic link; destroy the area it points to instead. The lock was released.`, {
          path: this.dir,
        });
      } else if (nested !== undefined) {
        refused = new StagingError('ELOCKED', `Did not destroy ${this.dir}: ${nested.dir} inside it is locked by ${describeHolder(nested)}. The lock was released.`, {
          path: nested.lockPath,
          lock: nested,
        });
      } else {
        // The area's counter goes with it: its last token must be kept where the next holder of a
        // build made again by this name looks (floor.ts), or that holder could get it again.
        refused = await this.keepFloor();
      }
      if (refused === undefined) {
        // proper-lockfile removes the lock through our rmdir: make that removal take the area's
        // entries with it (trash.ts).
        this.fsState.removeHook = () =>
          destroyHeld({ staticDir: this.staticDir, realStaticDir: this.realStaticDir, area: this.area, tag: this.tag, io: this.io, workName: this.fsState.workName });
      }
    }
    this.status = 'released';
    if (held.get(this.lockPath) === this) held.delete(this.lockPath);
    try {
      await this.unlock();
    } catch (err) {
      if (errnoCode(err) === 'ECOMPROMISED') {
        // Lost since the last heartbeat: the holder hears it as if the heartbeat had found it.
        this.status = 'held';
        this.lose(err);
        throw this.lostReason!;
      }
      this.closeDirs();
      throw asStagingError(err, options.destroy === true ? 'destroy' : 'release the lock on', this.dir);
    }
    if (options.destroy === true && refused === undefined) {
      // A new nested area (board/branch/build) leaves no empty board/branch behind either.
      await removeCreated(this.createdDirs.slice(0, -1));
    }
    await this.record(options.destroy === true && refused === undefined ? 'destroyed' : 'released');
    this.closeDirs();
    try {
      this.emit('released');
    } catch {
      /* never let a listener break release */
    }
    if (refused !== undefined) throw refused;
  }
}

/** Errors of a heartbeat that mean the static directory could not be reached, not that the lock went. */
export const UNREACHED_ERRNOS: ReadonlySet<string> = new Set(['EIO', 'ENOTCONN', 'ESTALE', 'ETIMEDOUT', 'EHOSTDOWN', 'EHOSTUNREACH', 'ENETDOWN', 'ENETUNREACH', 'ECONNABORTED', 'ECONNRESET', 'EACCES', 'EPERM']);

/**
 * Why a lease was lost, in words, from what its heartbeat or release met: never the errno or the
 * path through a descriptor it met it on, which say nothing to the user (`explainLoss` in loss.ts
 * finds who did it). proper-lockfile hands its own errors over with their code replaced by
 * ECOMPROMISED, so the errno is read from its number.
 */
function lossCause(cause: unknown): string {
  const err = cause as { errno?: unknown; message?: unknown } | undefined;
  const errno = typeof err?.errno === 'number' ? Object.entries(os.constants.errno).find(([, n]) => n === -(err.errno as number))?.[0] : undefined;
  if (errno !== undefined && UNREACHED_ERRNOS.has(errno)) return 'it could not be refreshed, because the static directory could not be reached';
  // proper-lockfile's words for a lock whose mtime is no longer the one it set.
  if (typeof err?.message === 'string' && err.message.startsWith('Unable to update lock within the stale threshold')) return 'another process changed it';
  return 'it was removed or replaced by another process';
}

export function describeHolder(info: Pick<LockInfo, 'state' | 'holder' | 'legacy' | 'unreadable'>): string {
  if (info.holder !== undefined) {
    const h = info.holder;
    return `${printable(h.user)}@${printable(h.hostname)} (pid ${h.pid}${h.purpose !== undefined ? `, ${printable(h.purpose)}` : ''})`;
  }
  if (info.legacy !== undefined) {
    return `the Python devserver on ${printable(info.legacy.hostname)}${info.legacy.pid !== undefined ? ` (pid ${info.legacy.pid})` : ''}`;
  }
  if (info.unreadable !== undefined) return `another process (${printable(info.unreadable)})`;
  return 'another process (no holder record)';
}

function lockedError(info: LockInfo, line?: { shown: string; ahead: readonly QueueEntry[] }): StagingError {
  const what = info.state === 'legacy' ? 'a legacy devserver lock' : 'a lock';
  const at = { staticDir: info.staticDir, tag: info.tag };
  const legacy = info.state === 'legacy' ? ' Legacy locks are never taken over automatically.' : '';
  const next: NextStep[] = info.state === 'legacy' ? [{ kind: 'force-release', ...at }] : [{ kind: 'wait', ...at }, { kind: 'force-release', ...at }];
  // A stale lock stands in the way only when it could not be taken over: say why.
  const stale = info.state === 'stale' && info.staleReason !== undefined ? ` It is stale (${info.staleReason}).` : '';
  const waiting = line !== undefined && line.ahead.length > 0 ? ` ${capitalized(inLine(line))}.` : '';
  return new StagingError('ELOCKED', `${info.dir} is held: ${what} by ${describeHolder(info)}.${stale}${waiting}${legacy}`, { path: info.lockPath, lock: info, next });
}

/** `2 are waiting for it in line (<queue>), the first user@host (pid 42)`. */
function inLine({ shown, ahead }: { shown: string; ahead: readonly QueueEntry[] }): string {
  const n = ahead.length;
  return `${n} ${n === 1 ? 'is' : 'are'} waiting for it in line (${shown}), the first ${describeWaiter(ahead[0])}`;
}

const capitalized = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1);

/**
 * Why a caller that does not wait may not take a lock that others wait for: a free lock belongs
 * to the first in line, and one who comes later and does not wait must not take it in the moment
 * between a release and the next in line's taking it.
 */
async function queuedError(area: Area, opened: OpenedLockArea, timing: Timing, line: { shown: string; ahead: readonly QueueEntry[] }, waitedMs: number): Promise<StagingError> {
  const nowFs = Date.now() + (await fsClockSkew(area.realStaticDir));
  const { info } = await judgeLock({ ...area, opened: opened.dir }, timing, nowFs);
  if (info.state !== 'free') return lockedError(info, line);
  const then = waitedMs > 0 ? ` This one waited ${Math.round(waitedMs / 1000)} s and they were still ahead of it.` : ' Those who wait go first.';
  const next: NextStep[] = waitedMs > 0 ? [] : [{ kind: 'join-line', staticDir: area.staticDir, tag: area.tag }];
  return new StagingError('ELOCKED', `${area.dir} is free, but ${inLine(line)}.${then}`, { path: line.shown, lock: info, next });
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) return reject(signal.reason);
    const onAbort = (): void => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Takes the lock of `<staticDir>/<tag>`. With `createOnce` (the default) the area must not exist
 * and is created; if the lock then cannot be taken, the directories this call created are removed
 * again, and an area that existed before is left exactly as it was.
 */
export async function acquire(staticDir: string, tag: string, options: AcquireOptions = {}): Promise<Lease> {
  const startedMs = Date.now();
  const timing = clampTiming(options);
  const createOnce = options.createOnce ?? true;
  const waitMs = Math.max(0, options.waitMs ?? 0);
  // An existing area is opened at once; what resolving would have checked, opening it proved.
  const quick = createOnce ? undefined : await openExisting(staticDir, tag);
  const area = quick?.area ?? (await resolveArea(staticDir, tag));
  if (waitMs === 0 && area.segments.length > 1) {
    // Fail before creating anything inside an area another holds (the check after taking decides).
    const above = await findHeldAbove(area, timing, Date.now() + (await fsClockSkew(area.realStaticDir)), area.io).catch((err: unknown) => {
      quick?.opened.dir.close();
      throw err;
    });
    if (above !== undefined) {
      quick?.opened.dir.close();
      throw nestingError(area, { info: above, relation: 'above' });
    }
  }
  let opened: OpenedLockArea = quick?.opened ?? (await openArea(area, createOnce));
  const line = new Line(area, opened.dir, timing, { ...options, waits: waitMs > 0 });
  let handedOver = false;
  try {
    const deadline = Date.now() + waitMs;
    let vanished = 0;
    let retries = 0;
    // What the fencing counter was found at by an attempt that had to let go: the next proposes above it.
    const counter = { hint: 0 };
    for (;;) {
      if (options.signal?.aborted === true) throw cancelled(area, options.signal);
      // Those who wait enter in turn: while a live waiter is ahead, this caller does not try (queue.ts).
      const ahead = await line.ahead();
      const outcome = ahead.length > 0 ? ahead : await tryAcquire(area, opened, timing, options, counter);
      if (outcome instanceof Lease) {
        await line.leave();
        handedOver = true;
        outcome.adopt(options.warn);
        await outcome.record('acquired', { waitedMs: Date.now() - startedMs });
        return outcome;
      }
      if (outcome === 'retry') {
        // The lock vanished or we took a stale one over: try again at once. Every so often through
        // a timer: on a local filesystem each step is synchronous, and a run of retries must not
        // keep the event loop (timers, signals) waiting.
        if (++retries % 8 === 0) await sleep(1 + Math.random() * 4, options.signal).catch(() => {
          throw cancelled(area, options.signal!);
        });
        continue;
      }
      if (outcome === 'vanished') {
        if (createOnce || ++vanished > 10) {
          throw new StagingError('ENOENT', `The staging area ${area.dir} was removed by another process while this one was locking it.`, { path: area.dir });
        }
        const again = await openArea(area, false);
        again.created.unshift(...opened.created);
        const parentsBefore = opened.closeParents;
        opened.dir.close();
        opened = { ...again, closeParents: () => (parentsBefore(), again.closeParents()) };
        line.moveTo(opened.dir);
        continue;
      }
      if (Date.now() >= deadline) {
        if (Array.isArray(outcome)) throw await queuedError(area, opened, timing, { shown: line.shown, ahead: outcome }, waitMs);
        throw outcome instanceof StagingError ? outcome : lockedError(outcome);
      }
      // A new place in line, or a watch just begun: look again, since what changed before made no event.
      if (await line.join()) continue;
      await line.wait(deadline, options.signal, !Array.isArray(outcome)).catch((err: unknown) => {
        throw options.signal?.aborted === true ? cancelled(area, options.signal) : err;
      });
    }
  } catch (err) {
    await line.leave();
    await removeCreated(opened.created);
    throw err;
  } finally {
    if (!handedOver) {
      opened.closeParents();
      opened.dir.close();
    }
  }
}

interface OpenedLockArea {
  dir: Dir;
  created: CreatedDir[];
  closeParents: () => void;
}

/**
 * An existing area on a local filesystem, the usual case, opened in one lookup from the static
 * directory's real path with `O_NOFOLLOW`: for a tag of one segment that is the same lookup as
 * opening the static directory and then the area below it; for a deeper tag it is kept only if the
 * kernel places what it opened exactly at that path (no link on the way). Then the area is a
 * directory, inside the static directory, reached without a link: all that `resolveArea` checks.
 * Undefined otherwise (missing, a link to follow, a network filesystem): then `resolveArea` and
 * `openArea` go level by level and say what is wrong.
 */
async function openExisting(staticDirIn: string, tag: string): Promise<{ area: Area; opened: OpenedLockArea } | undefined> {
  const segments = parseTag(tag);
  const { staticDir, realStaticDir, io } = await resolveStaticDir(staticDirIn);
  if (!io.sync) return undefined;
  const where = path.join(realStaticDir, ...segments);
  const dir = segments.length === 1 ? await openDirIfThere(where, true) : await openDirWhere(where, true);
  if (dir === undefined) return undefined;
  const area: Area = { staticDir, realStaticDir, tag: segments.join('/'), segments, dir: path.join(staticDir, ...segments), exists: true, dev: dir.dev, io };
  return { area, opened: { dir, created: [], closeParents: () => undefined } };
}

/**
 * Holding an area covers everything below it. Checked once our own lock is taken, so that of two
 * processes taking nested areas at once, at least one sees the other (see nesting.ts); on a
 * conflict ours is let go again, and the caller waits or fails as for a held lock.
 */
async function checkNesting(lease: Lease, area: Area, timing: Timing, listing: readonly Dirent[]): Promise<Lease | StagingError> {
  const conflict = await findNestingConflict(area, timing, Date.now() + (await fsClockSkew(area.realStaticDir)), listing);
  if (conflict === undefined) return lease;
  await lease.release().catch(() => undefined);
  return nestingError(area, conflict);
}

function nestingError(area: Area, { info, relation }: NestingConflict): StagingError {
  const where = relation === 'above' ? 'which contains it' : 'inside it';
  const tag = path.relative(area.staticDir, info.dir).split(path.sep).join('/');
  return new StagingError(
    'ELOCKED',
    `${area.dir} cannot be locked: ${tag}, ${where}, is held by ${describeHolder(info)}, and holding an area covers everything below it.`,
    {
      path: info.lockPath,
      lock: info,
      next: [
        { kind: 'wait', staticDir: area.staticDir, tag: area.tag },
        { kind: 'force-release', staticDir: area.staticDir, tag },
      ],
    },
  );
}

function cancelled(area: Area, signal: AbortSignal): StagingError {
  return new StagingError('ECANCELED', `Stopped waiting for the lock on ${area.dir}.`, { path: lockPathOf(area.dir), cause: signal.reason });
}

/** Mode of the lock and work directories: readable by all, writable by whoever may write the area. */
function lockModeFor(area: Dir): number {
  return 0o755 | (area.mode & 0o022);
}

/** One attempt: the lease, 'retry', 'vanished' (the area is gone), or the judged lock that stands in the way. */
async function tryAcquire(
  area: Area,
  opened: OpenedLockArea,
  timing: Timing,
  options: AcquireOptions,
  counter: { hint: number },
): Promise<Lease | StagingError | 'retry' | 'vanished' | LockInfo> {
  const skewMs = await fsClockSkew(area.realStaticDir);
  // The area may be on another filesystem than the static directory (a mount inside it).
  const io = await ioFor(opened.dir.at('.'), opened.dir.dev);
  let fence: number;
  let mode: number;
  let fenceCtx: FenceContext;
  try {
    fenceCtx = {
      io,
      area: opened.dir,
      shownArea: area.dir,
      floor: Math.max(counter.hint, await stagedToken(io, opened.dir, area.dir)),
      recordedElsewhere: () => tokenRecordedElsewhere(area),
    };
    fence = await proposeToken(fenceCtx);
    mode = lockModeFor(opened.dir);
  } catch (err) {
    // The opened area was removed meanwhile (a destroy next door).
    if (errnoCode(err) === 'ENOENT' || errnoCode((err as { cause?: unknown }).cause) === 'ENOENT') return 'vanished';
    throw err;
  }
  const holder = makeHolder({
    staleMs: timing.staleMs,
    refreshMs: timing.refreshMs,
    acquiredAtMs: Date.now() + skewMs,
    fence,
    ...(options.clientId !== undefined ? { clientId: options.clientId } : {}),
    ...(options.purpose !== undefined ? { purpose: options.purpose } : {}),
  });
  const lockPath = lockPathOf(area.dir);
  const state: LockFsState = {
    io,
    area: opened.dir,
    lockPath,
    ownerJson: `${JSON.stringify(holder, null, 2)}\n`,
    workName: `${WORK_PREFIX}${holder.token}`,
    mode,
    skewMs,
    created: false,
    dev: opened.dir.dev,
  };
  const lease = new Lease(area, opened, holder, timing, state);
  const lockFs = makeLockFs(state);
  try {
    const release = await lockfile.lock(path.join(area.dir, LOCK_TARGET), {
      lockfilePath: lockPath,
      realpath: false,
      stale: timing.staleMs,
      update: timing.refreshMs,
      retries: 0,
      fs: lockFs,
      onCompromised: (err) => lease.lose(err),
    });
    rememberPrecision(lockFs, state);
    lease.attach(release);
  } catch (err) {
    // The area was removed between creating or finding it and locking it (a destroy, or a
    // create-once attempt next door cleaning up after itself).
    if (errnoCode(err) === 'ENOENT') return 'vanished';
    if (errnoCode(err) !== 'EEXIST') throw asStagingError(err, 'take the lock', lockPath);
    return judgeInTheWay(area, opened, timing, skewMs, options);
  }
  try {
    // Whatever holders that died or were fenced left here is ours to clear now (before the token:
    // a counter one of them took is put back); the listing that tells serves the nesting check.
    const listing = await clearLitter(io, opened.dir, timing);
    try {
      await settleToken(fenceCtx, workOf(state), fence);
      state.settled = true;
    } catch (err) {
      const code = errnoCode(err);
      // The counter was not where the proposal expected it (another holder came and went since it
      // was read, or a client's cache answered), or the lock was taken away already: let go, and
      // propose anew above what was found.
      if (code === 'ERETRY' || code === 'ELOST') {
        const hint = (err as { hint?: unknown }).hint;
        if (typeof hint === 'number') counter.hint = Math.max(counter.hint, hint);
        await lease.releaseQuietly();
        return 'retry';
      }
      throw err;
    }
    return await checkNesting(lease, area, timing, listing);
  } catch (err) {
    await lease.releaseQuietly();
    throw err;
  }
}

/**
 * The greatest fencing token recorded for the area outside it: by its destroys (floor.ts) and in its
 * history. Where an area has no counter at all (it was destroyed and made again, or its counter was
 * removed), its tokens go on above those.
 */
async function tokenRecordedElsewhere(area: Area): Promise<number> {
  // Quietly: what cannot be read there (a link planted in its place) is said by whoever reads the history for itself.
  const events = await history(area.staticDir, { tag: area.tag, limit: 1_000, warn: () => undefined }).catch(() => []);
  let max = await floorOf(area.realStaticDir, area.tag);
  for (const e of events) if (e.fence !== undefined && e.fence > max) max = e.fence;
  return max;
}

/** The lock exists: judge it, and take it over if it is stale (exactly one contender does). */
async function judgeInTheWay(area: Area, opened: OpenedLockArea, timing: Timing, skewMs: number, options: AcquireOptions): Promise<'retry' | LockInfo> {
  const nowFs = Date.now() + skewMs;
  const { info, identity } = await judgeLock({ ...area, opened: opened.dir }, timing, nowFs);
  if (info.state === 'free') return 'retry';
  if (info.state !== 'stale' || identity === undefined) return info;
  step('takeover.judged');
  try {
    // A heartbeat since we judged it means its holder lives: then the lock is not ours to take.
    const requireSameMtime = info.holderAlive !== false;
    const io = await ioFor(opened.dir.at('.'), opened.dir.dev);
    if (!(await removeInstance(opened.dir, area.dir, identity, { requireSameMtime, staleMs: timing.staleMs, nowFsMs: nowFs, ...fenceOf(info) }, io))) return info;
    await recordHistory(area.staticDir, removalEvent(area.tag, 'taken-over', info, options), options.warn);
    return 'retry';
  } catch (err) {
    if (err instanceof StagingError) return { ...info, staleReason: `${info.staleReason ?? 'stale'}; ${err.message}` };
    throw err;
  }
}

/**
 * Runs `fn` while holding the lock (OpenStack's `synchronized`). `fn` receives the lease's signal,
 * which aborts if the lock is lost. If `fn` fails and this call created the area, the area is
 * destroyed so a later run can retry (the devserver's failed-staging path); an area that existed
 * before is kept. If the lock was lost, this rejects with ECOMPROMISED even when `fn` succeeded.
 */
export async function withLock<T>(
  staticDir: string,
  tag: string,
  fn: (signal: AbortSignal, lease: Lease) => Promise<T> | T,
  options: AcquireOptions & { destroyOnError?: boolean } = {},
): Promise<T> {
  const lease = await acquire(staticDir, tag, options);
  let result: T;
  try {
    result = await fn(lease.signal, lease);
  } catch (err) {
    await lease.release(lease.state === 'held' ? { destroy: options.destroyOnError ?? lease.created } : {}).catch(() => undefined);
    throw err;
  }
  await lease.release(); // rejects with ECOMPROMISED if the lock was lost, even when `fn` succeeded
  return result;
}

/**
 * Releases a lock this process holds, by tag (the devserver's ReleaseLock). ENOTHELD when this
 * process does not hold it: only the holder may release.
 */
export async function release(staticDir: string, tag: string, options: ReleaseOptions = {}): Promise<void> {
  const area = await resolveArea(staticDir, tag);
  const lease = held.get(lockPathOf(area.dir));
  if (lease === undefined) {
    throw new StagingError('ENOTHELD', `This process does not hold the lock on ${area.dir}; only its holder can release it (or force-release it).`, {
      path: lockPathOf(area.dir),
    });
  }
  await lease.release(options);
}

/** The leases this process holds. */
export function heldLeases(): Lease[] {
  return [...held.values()];
}
