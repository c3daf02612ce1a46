/**
 * The on-disk protocol: names every party sharing a static directory must agree on.
 * docs/protocol.md describes the same thing for other tools.
 */
import { sha256Hex } from './crypto';
import type { Timing } from './types';

/** The lock target inside each staging area, as the Chromium OS devserver named it. */
export const LOCK_TARGET = 'devserver';
/** proper-lockfile's lock directory for that target (the Python devserver's lock file has the same name). */
export const LOCK_NAME = 'devserver.lock';
/** The holder record inside the lock directory. */
export const OWNER_FILE = 'owner.json';
/**
 * While `lock TAG -- COMMAND` runs: the command's pid, process group and start time, in the
 * holder's work directory (`devserver.lock/work.<token>/command.json`), so that the lock lasts as
 * long as the command even if the holder is killed.
 */
export const COMMAND_FILE = 'command.json';
/**
 * A staging's commit record in the holder's work directory (`devserver.lock/work.<token>/commit.json`):
 * while it is there the commit is unfinished, and the next holder undoes it (see commit.ts).
 */
export const COMMIT_FILE = 'commit.json';
/**
 * A reservation's end as its owner last moved it, in its work directory
 * (`devserver.lock/work.<token>/reservation.json`): the owner record is never rewritten.
 */
export const RESERVATION_FILE = 'reservation.json';
/** The longest a reservation may last, or be moved to last from now. */
export const MAX_RESERVATION_MS = 30 * 86_400_000;
/** Siblings of the lock used while taking over or removing it. */
export const CLAIM_PREFIX = `${LOCK_NAME}.claim.`;
export const LOCK_TRASH_PREFIX = `${LOCK_NAME}.trash.`;
/** A lock being built before it is renamed into place whole, owner record and work directory included. */
export const LOCK_NEW_PREFIX = `${LOCK_NAME}.new.`;
/** A lock instance taken away from a holder in the middle of a commit: the next holder undoes that commit. */
export const LOCK_FENCED_PREFIX = `${LOCK_NAME}.fenced.`;
/**
 * The holder's work directory, inside its lock directory: `devserver.lock/work.<token>`. Every change
 * a holder makes to its area is a rename into or out of it, named through the lock. Once the lock
 * instance is moved away (a takeover, a force-release), those names lead nowhere: that is the fence.
 */
export const WORK_PREFIX = 'work.';
/**
 * The area's fencing counter: a directory whose one entry is named by the last token handed out
 * (see fence.ts). Only grows. Earlier builds kept the number in a symbolic link or a file of this name.
 */
export const FENCE_FILE = '.devserver-staging.fence';
/** The manifest's file name inside each area (ignored by listings: it starts with `.devserver-staging`). */
export const MANIFEST_FILE = '.devserver-staging.manifest.json';
/** Replaced at each staging, as the devserver touched it, so an area's last use is known. */
export const TIMESTAMP_FILE = 'staged.timestamp';
/** What a staging leaves at the top of its area: the manifest (ours) and the timestamp (the Python devserver's and ours). */
export const STAGING_MARKS: readonly string[] = [MANIFEST_FILE, TIMESTAMP_FILE];
/**
 * What makes a directory a build rather than a folder of builds, besides its lock: a staging's
 * marks or a lock target. Most common first: every staging leaves `staged.timestamp`, the Python
 * devserver's and ours, and only ours a manifest.
 */
export const BUILD_MARKS: readonly string[] = [TIMESTAMP_FILE, MANIFEST_FILE, LOCK_TARGET];

/** Partial files that stagers of earlier versions wrote in the area itself (now: in the work directory). */
export const PART_PREFIX = '.devserver-staging.part.';
/** A judge's probe beside the lock, made and removed to drop a network client's cached attributes. */
export const LOCK_PROBE_PREFIX = `${LOCK_NAME}.probe.`;
/** Owner records are a few hundred bytes; anything much larger was not written by a holder. */
export const MAX_OWNER_BYTES = 64 * 1024;
/**
 * The largest manifest a build may have: far above the manifest of any build (about 300 bytes an
 * artifact, 1.7 million artifacts), far below memory. Readers refuse a larger one; staging never
 * writes one, and refuses up front a staging that would.
 */
export const MAX_MANIFEST_BYTES = 512 * 1024 * 1024;
/** Our bookkeeping directory at the top of the static directory: audit log, clock probe, trash. */
export const META_DIR = '.devserver-staging';
export const AUDIT_LOG = 'audit.log';
export const TRASH_DIR = 'trash';
/**
 * An area being destroyed on another filesystem than the static directory's own (a mount inside
 * it) cannot be moved into the trash: it is moved aside beside itself under this prefix instead.
 */
export const META_TRASH_PREFIX = `${META_DIR}.trash.`;
export const CLOCK_PROBE = 'clock';
/**
 * The queues of those waiting for a lock: `<static>/.devserver-staging/queue/<key>/`, one directory
 * per area (its key: the SHA-256 of the area's path inside the static directory), holding one
 * ticket per waiter, named by its number in line (see queue.ts).
 */
export const QUEUE_DIR = 'queue';
/** Digits of a ticket's name: `0000000042`. Other names in a queue are not tickets. */
export const TICKET_DIGITS = 10;
/** A ticket being removed by whoever judged it dead: moved aside under this prefix, checked, deleted. */
export const TICKET_ASIDE_PREFIX = 'gone.';
/** Made and removed in a queue on a network filesystem, to drop the client's cached listing of it. */
export const QUEUE_PROBE_PREFIX = 'probe.';

/**
 * The history of every build: `.devserver-staging/history/<h[0..2]>/<h>/`, h = hex SHA-256 of the
 * tag, holding one JSON-lines segment per host and generation, `<hostname>.<n>.jsonl`. A host only
 * ever appends to its own segments, so no two machines write one file (O_APPEND is atomic between
 * the processes of one NFS client, not between clients).
 */
export const HISTORY_DIR = 'history';
/**
 * The last fencing token of each destroyed area: `.devserver-staging/floors/<h[0..2]>/<h>/<n>`, h as
 * for its history, one empty file named by the token (see lock/floor.ts).
 */
export const FLOOR_DIR = 'floors';
/** A segment that has reached this size is full: its host's writers go on in generation n+1 and drop n-1. */
export const HISTORY_SEGMENT_BYTES = 1024 * 1024;

/**
 * An area as one name that is safe in any directory, whatever its tag holds: the hex SHA-256 of
 * its name (the tag for its history, its path inside the static directory for its queue). Every
 * party hashes the same way, so they meet in the same directory.
 */
export function areaKey(name: string): string {
  return sha256Hex(name);
}

/** Recently asked tags: the history is written at every lock event, and a hash is a tenth of a record's cost. */
const historyDirs = new Map<string, [fan: string, dir: string]>();

/** The two directory levels under `history/` that hold the segments of `tag` (a normalised tag). */
export function historyDirOf(tag: string): [fan: string, dir: string] {
  let dirs = historyDirs.get(tag);
  if (dirs === undefined) {
    if (historyDirs.size >= 1_000) historyDirs.clear();
    const key = areaKey(tag);
    dirs = [key.slice(0, 2), key];
    historyDirs.set(tag, dirs);
  }
  return dirs;
}

/** A host's name as it can stand in a file name: anything but letters, digits, `.`, `_` and `-` becomes `_`. */
export function historyHostName(hostname: string): string {
  const safe = hostname.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 200);
  return safe === '' || safe.startsWith('.') ? `_${safe}` : safe;
}

export function historySegmentName(host: string, generation: number): string {
  return `${host}.${generation}.jsonl`;
}

/** Parses a segment's name (the host may contain dots: the generation is the last number). */
export function parseHistorySegmentName(name: string): { host: string; generation: number } | undefined {
  const m = /^(.+)\.(\d{1,15})\.jsonl$/.exec(name);
  return m === null ? undefined : { host: m[1], generation: Number(m[2]) };
}

export const DEFAULT_TIMING: Timing = Object.freeze({ staleMs: 10_000, refreshMs: 2_500 });

/**
 * The longest stale threshold honoured, whoever asks for more (a setting, an option, a holder's
 * record): a week. So every timer set from one stays far below 2^31 ms, past which Node fires a
 * timer at once, again and again.
 */
export const MAX_STALE_MS = 7 * 86_400_000;

/** Node's longest timer: a delay beyond it fires at once. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

const finite = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/**
 * proper-lockfile refuses a stale threshold under 2 s and a refresh outside [1 s, stale/2]; above a
 * week is taken as a week. A value that is no finite number (a setting typed as text) counts as
 * not given: a stale threshold that is NaN would make every stale lock look held.
 */
export function clampTiming(t: Partial<Timing> = {}): Timing {
  const staleMs = Math.min(MAX_STALE_MS, Math.max(2_000, Math.round(finite(t.staleMs) ?? DEFAULT_TIMING.staleMs)));
  const wantedRefresh = finite(t.refreshMs) ?? Math.min(DEFAULT_TIMING.refreshMs, staleMs / 4);
  const refreshMs = Math.max(1_000, Math.min(Math.round(wantedRefresh), Math.floor(staleMs / 2)));
  return { staleMs, refreshMs };
}

/** The stale threshold a lock is judged by: the judge's, or the holder's own where it is longer, up to `MAX_STALE_MS`. */
export function thresholdOf(timing: Timing, holderStaleMs: number | undefined): number {
  return Math.max(timing.staleMs, Math.min(MAX_STALE_MS, finite(holderStaleMs) ?? 0));
}

/** The lock and what its protocol puts beside it: claims, trash, probes, locks being built (`devserver.lock*`). */
export function isLockName(name: string): boolean {
  return name === LOCK_NAME || name.startsWith(`${LOCK_NAME}.`);
}

/**
 * Whether a directory entry is one of ours rather than a staging area or artifact: the lock
 * target, the lock and its siblings, and everything named `.devserver-staging*`. No tag may have
 * such a segment.
 */
export function isProtocolName(name: string): boolean {
  return name === LOCK_TARGET || isLockName(name) || name.startsWith(META_DIR);
}

/**
 * Whether an artifact may not be called `segment` (one segment of its name in the area; `atTop`:
 * the first): the protocol's names anywhere, and a staging's marks at the top of the area.
 */
export function isReservedSegment(segment: string, atTop: boolean): boolean {
  return isProtocolName(segment) || (atTop && STAGING_MARKS.includes(segment));
}

/** Whether an entry of a directory's listing makes that directory a staging area: its lock or a build mark. */
export function isAreaMark(name: string): boolean {
  return name === LOCK_NAME || BUILD_MARKS.includes(name);
}

/**
 * The unique file of the Python devserver's lock (`lockfile.LinkLockFile`), which `devserver.lock`
 * is a hard link to: `<hostname>-<threadhex>.<pid><hash>`, or `<hostname>.<pid><hash>` when not
 * threaded, the hash being Python's 64-bit hash of the path (about 19 digits, after a `-` when
 * negative). Stricter than `parseLegacyName`, which reads the name of a file already known to be
 * the lock's: here the name alone decides, and `libc.so.6`, `image.bin.1` or `build.20240101`
 * must stay artifacts.
 */
const LEGACY_THREADED = /^[^/]+-[0-9a-f]{1,8}\.(?:\d{8,}|\d+-\d+)$/;
const LEGACY_UNTHREADED = /^[^/]+\.(?:\d{16,}|\d{1,7}-\d{12,})$/;

/**
 * Whether an entry at the top of a build is bookkeeping rather than an artifact: the lock and
 * everything of the lock protocol (`devserver`, `devserver.lock*`), our own files
 * (`.devserver-staging*`: manifest, fencing counter, parts), `staged.timestamp`, and the unique
 * files of the Python devserver's lock. Verification never calls these unlisted, and the
 * extension does not show them as artifacts.
 */
export function isBookkeeping(name: string): boolean {
  return isProtocolName(name) || name === TIMESTAMP_FILE || (endsInDigit(name) && (LEGACY_THREADED.test(name) || LEGACY_UNTHREADED.test(name)));
}

/** Both unique-file names end in a digit: most names are told apart without the patterns, which a walk of every build asks of each entry at its top. */
function endsInDigit(name: string): boolean {
  const last = name.charCodeAt(name.length - 1);
  return last >= 48 && last <= 57;
}
