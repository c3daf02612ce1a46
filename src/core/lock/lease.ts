/**
 * A held lock, the Lease: its heartbeat's loss told through an AbortSignal and a `lost` event,
 * its transitions recorded in the history, and its release (with destroy, the area too). Also the
 * leases this process holds, by lock path, as the devserver's ReleaseLock found them.
 */
import { EventEmitter } from 'events';
import type { Dir } from '../fs/anchored';
import { StagingError, asStagingError, errnoCode, systemErrnoName } from '../base/errors';
import { lookAtCounter } from './fence';
import { recordFloor } from './floor';
import { HistorySegment, actorOf, recordHistory, type HistoryOptions, type NewHistoryEvent } from '../log/history';
import type { Io } from '../fs/io';
import { lockPathOf } from './judge';
import { closeLockFd, workOf, type LockFsState } from './lockfs';
import { findHeldInside } from './nesting';
import { describeHolder } from './refusals';
import { removeCreated, type Area, type CreatedDir } from '../fs/tags';
import { destroyHeld } from './trash';
import type { Holder, Timing } from '../base/types';

export interface ReleaseOptions {
  /** Remove the staging area too (the devserver's failed-staging path, so a later run can retry). */
  destroy?: boolean;
}

export type { OpenedLockArea } from './options';
import type { OpenedLockArea } from './options';

export interface LeaseEvents {
  lost: [reason: StagingError];
  released: [];
}


/** Locks this process holds, by lock path: lets `release(staticDir, tag)` find them, as ReleaseLock did. */
const held = new Map<string, Lease>();

/** The lease this process holds on the lock at `lockPath`, if any. */
export function leaseHeldAt(lockPath: string): Lease | undefined {
  return held.get(lockPath);
}

/** The leases this process holds. */
export function heldLeases(): Lease[] {
  return [...held.values()];
}

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
  record(kind: 'acquired' | 'released' | 'lost' | 'destroyed' | 'staged' | 'reserved', extra: Partial<NewHistoryEvent> = {}): Promise<void> {
    if (!this.adopted) return Promise.resolve();
    const held = kind === 'acquired' || kind === 'staged' || kind === 'reserved' ? {} : { heldMs: Date.now() - this.adoptedAtMs };
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

  /**
   * @internal Lets go of a reservation's lock without removing it (reserve.ts): the heartbeat
   * stops and the descriptors close, and the lock stays in place, held until the end its record
   * names. ECOMPROMISED if it was lost meanwhile.
   */
  async leaveReserved(): Promise<void> {
    if (this.status !== 'held' || this.unlock === undefined || held.get(this.lockPath) !== this) {
      if (this.status === 'held') this.lose(new Error('it was removed or replaced by another'));
      this.closeDirs();
      throw this.lostReason ?? new StagingError('ENOTHELD', `The lock on ${this.dir} was already released.`, { path: this.lockPath });
    }
    // proper-lockfile removes the lock through our rmdir: that removal is to leave it in place.
    this.fsState.removeHook = () => Promise.resolve();
    this.status = 'released';
    held.delete(this.lockPath);
    try {
      await this.unlock();
    } catch (err) {
      this.status = 'held';
      this.lose(err);
      this.closeDirs();
      throw this.lostReason!;
    }
    await this.record('reserved', { reservedUntil: this.holder.reservedUntil });
    this.closeDirs();
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

/**
 * Errors of a heartbeat that mean the static directory could not be reached, not that the lock
 * went. Not ESTALE: an NFS client answers that for what another host removed or replaced, which is
 * how a lock goes.
 */
export const UNREACHED_ERRNOS: ReadonlySet<string> = new Set(['EIO', 'ENOTCONN', 'ETIMEDOUT', 'EHOSTDOWN', 'EHOSTUNREACH', 'ENETDOWN', 'ENETUNREACH', 'ECONNABORTED', 'ECONNRESET', 'EACCES', 'EPERM']);

/**
 * Why a lease was lost, in words, from what its heartbeat or release met: never the errno or the
 * path through a descriptor it met it on, which say nothing to the user (`explainLoss` in loss.ts
 * finds who did it). proper-lockfile hands its own errors over with their code replaced by
 * ECOMPROMISED, so the errno is read from its number.
 */
function lossCause(cause: unknown): string {
  const err = cause as { errno?: unknown; message?: unknown } | undefined;
  const errno = typeof err?.errno === 'number' ? systemErrnoName(-err.errno) : undefined;
  if (errno !== undefined && UNREACHED_ERRNOS.has(errno)) return 'it could not be refreshed, because the static directory could not be reached';
  // proper-lockfile's words for a lock whose mtime is no longer the one it set.
  if (typeof err?.message === 'string' && err.message.startsWith('Unable to update lock within the stale threshold')) return 'another process changed it';
  return 'it was removed or replaced by another process';
}
