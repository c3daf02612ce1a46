/** The lock states a staging area can be in. */
export type LockState = 'free' | 'held' | 'stale' | 'legacy';

/**
 * Who holds a lock. Written by the holder as `devserver.lock/owner.json` when it takes the lock;
 * any process can read it while the lock is held. Fields other than `pid` and `hostname` may be
 * missing in locks taken by other tools.
 */
export interface Holder {
  pid: number;
  hostname: string;
  user: string;
  /** Identifies the holding process or editor window; defaults to `<hostname>:<pid>`. */
  clientId: string;
  purpose?: string;
  /** ISO 8601, in the holder's clock corrected to the filesystem's. */
  acquiredAt: string;
  /** Random per lock instance: tells a lock from a later one in the same place. */
  token: string;
  /**
   * The fencing token: a number per area that only grows from one holder to the next, so that a
   * script can refuse the writes of an earlier holder. Absent in locks of older versions.
   */
  fence?: number;
  /** The holder's stale threshold and refresh interval, so judges can honour the larger. */
  staleMs: number;
  refreshMs: number;
  /** Kernel boot id, pid namespace and process start time: decide "same machine" and "same process". */
  bootId?: string;
  pidNamespace?: string;
  processStart?: string;
  /** The tool and version that wrote this record. */
  tool?: string;
  /**
   * A reservation (a lock held for a person, not a process): when it ends, ISO 8601 in the
   * filesystem's clock. Until then the lock is held whatever its holder's process and heartbeat
   * say; after it, stale. Its note is `purpose`. The end may have been moved since (reservation.ts).
   */
  reservedUntil?: string;
}

/**
 * The command a holder runs under its lock (`lock TAG -- COMMAND`), written as
 * `devserver.lock/command.json` once the command has started. While its process group runs, the
 * lock stays held on this machine even if the holder itself is gone.
 */
export interface CommandRecord {
  pid: number;
  /** The command's process group (its own: pgid = pid); absent when it shares the holder's. */
  pgid?: number;
  /** The command's start time (Linux), which tells its pid from a reuse. */
  processStart?: string;
  /** The holder record's token: the record belongs to that lock instance only. */
  token: string;
}

/** What the Python devserver's `lockfile.FileLock` reveals about its holder. */
export interface LegacyHolder {
  hostname: string;
  /** The pid, where it can be told apart from the hash that follows it in the file name. */
  pid?: number;
  /** The digits of pid and hash as they appear in the file name. */
  pidAndHash: string;
  /** The unique file the lock is a hard link to, relative to the area. */
  uniqueFile?: string;
}

export interface LockInfo {
  staticDir: string;
  tag: string;
  /** `<staticDir>/<tag>` */
  dir: string;
  /** `<dir>/devserver.lock` */
  lockPath: string;
  /** Whether the staging area directory exists. */
  exists: boolean;
  state: LockState;
  /** Present for `held` and `stale` locks taken by this tool (absent for a bare or half-written lock). */
  holder?: Holder;
  /** Present for `legacy` locks. */
  legacy?: LegacyHolder;
  /** Milliseconds since the holder's last heartbeat (the lock's mtime), by the filesystem's clock. */
  heartbeatAgeMs?: number;
  /** Identifies this lock instance (inode and birth time): unchanged by heartbeats, changed by a new lock. */
  lockId?: string;
  /** Milliseconds since the lock was taken, where known. */
  ageMs?: number;
  /** Why a lock is `stale`. */
  staleReason?: string;
  /** Whether the holder's process is alive: known only for holders on this machine. */
  holderAlive?: boolean;
  /**
   * Set when the lock's holder record exists but cannot be read (permissions, not a regular file,
   * not a record): the lock is then taken as held, never stolen on a guess, and this says why.
   */
  unreadable?: string;
  /** The command run under the lock, when its holder is gone (known for holders on this machine). */
  command?: CommandRecord;
  /** Whether that command or its process group still runs: then the lock is still held. */
  commandAlive?: boolean;
  /** Present when the lock is a reservation: held until its end, stale after it. */
  reservation?: ReservationInfo;
}

/** A reservation as a judge sees it. */
export interface ReservationInfo {
  /** When it ends, ISO 8601 in the filesystem's clock: the end its owner last set. */
  until: string;
  /** Whether it has ended, by the filesystem's clock. */
  ended: boolean;
  /** How long it has left, by the filesystem's clock (0 once ended). */
  leftMs: number;
  /** The user id that owns its work directory, as the kernel reports it: whose reservation it is. */
  ownerUid?: number;
  /** Whether that is this process's user id. */
  mine?: boolean;
}

export interface ListEntry extends LockInfo {
  /** The entry's name within the listed directory. */
  name: string;
  /**
   * `build`: the directory was staged or locked (it holds a lock, a manifest, a `staged.timestamp`
   * or a lock target). `folder`: none of these; it only groups builds (a board).
   */
  kind: 'build' | 'folder';
}

/** Timing of the lock protocol. Everyone sharing a static directory should use the same values. */
export interface Timing {
  /** A lock whose heartbeat is older than this is stale. */
  staleMs: number;
  /** How often a holder refreshes its lock's heartbeat. */
  refreshMs: number;
}

/**
 * Who waits for a lock: the record in a waiter's ticket (see queue.ts), the holder record's
 * fields but for `acquiredAt` and `fence`, with the time the waiter joined the queue instead.
 */
export interface Waiter extends Omit<Holder, 'acquiredAt' | 'fence'> {
  /** ISO 8601, in the waiter's clock corrected to the filesystem's. */
  queuedAt: string;
}

/** One ticket in an area's queue, as `queueOf` reads and judges it. */
export interface QueueEntry {
  /** The ticket's number (its file name): lower numbers go first. */
  ticket: number;
  /** Its place in line, 1 for the next to enter; absent for a ticket that no longer counts (stale). */
  position?: number;
  /** `waiting`: counts in line; `stale`: its waiter is gone or stopped refreshing, and it is skipped. */
  state: 'waiting' | 'stale';
  /** Who waits, where the ticket can be read. */
  waiter?: Waiter;
  /** Why a ticket that is there cannot be read: it then counts as waiting until its mtime is stale. */
  unreadable?: string;
  /** Milliseconds since the waiter last refreshed the ticket (its mtime), by the filesystem's clock. */
  heartbeatAgeMs: number;
  /**
   * How far the ticket's mtime is ahead of the filesystem's clock, when further than a heartbeat
   * could have set it: its age then says nothing, and only a waiter that watches it judges it.
   */
  heartbeatAheadMs?: number;
  /** Milliseconds since the waiter joined the queue, where known. */
  ageMs?: number;
  /** Whether the waiter's process runs: known only for waiters on this machine. */
  waiterAlive?: boolean;
  /** Why a ticket is `stale`. */
  staleReason?: string;
}
