import * as os from 'os';
import type { LockInfo } from './types';

/**
 * Every failure the core reports carries one of these codes, so callers (the CLI's exit codes,
 * the extension's messages) can decide without parsing text.
 */
export type ErrorCode =
  | 'EBADTAG' // the tag is not a safe path inside the static directory
  | 'EBADSTATICDIR' // the static directory is missing, not a directory, or unusable
  | 'EEXIST' // create-once: the staging area already exists
  | 'ENOENT' // the staging area does not exist
  | 'ELOCKED' // someone else holds the lock
  | 'ENOTHELD' // release or force-release of a lock that is not held (by us)
  | 'ECOMPROMISED' // a lock we held was removed, replaced or could not be refreshed
  | 'ECANCELED' // the caller's signal aborted a wait or a staging
  | 'ESOURCE' // a staging source is missing, unreadable, or answered with an HTTP error
  | 'EUNSAFE' // an archive entry would land outside the area, or is a link or device
  | 'ETOOBIG' // a staging would write more than its size limit; a manifest too large to parse where it was asked for
  | 'ECONFLICT' // an artifact of the same name but different content is already staged
  | 'ECORRUPT' // a record the tool keeps in an area (the manifest) is damaged: not JSON, or an entry of the wrong shape
  | 'ENOMANIFEST' // the build has no manifest, so there is nothing to verify it against
  | 'ENESTED' // the tag lies inside an existing build: builds are not staged inside builds
  | 'EBADDURATION' // a reservation's length is not a duration, not above zero, or longer than allowed
  | 'ENOTOWNER' // extending or releasing a reservation that another user owns
  | 'EUNFINISHED' // the area holds a staging cut off mid-commit whose undo could not finish yet (a full disk, an I/O error); nothing of it is lost
  | 'EIO'; // any other filesystem failure, with the cause attached

/**
 * What the user can do about a failure, as data: the core says it in plain words (`nextStepWords`),
 * the command-line tool with its flags and commands, the extension with its buttons. A step names
 * the build it is about where the core knows it.
 */
export type NextStep =
  /** Wait for the lock on `tag` to be released. */
  | { kind: 'wait'; staticDir: string; tag: string }
  /** Wait for `tag` too, to take a place in the line of those who wait for it. */
  | { kind: 'join-line'; staticDir: string; tag: string }
  /** Force-release the lock on `tag` if its holder is gone. */
  | { kind: 'force-release'; staticDir: string; tag: string }
  /** Stage the build's sources again into it, so its artifacts are recorded. */
  | { kind: 'add'; staticDir: string; tag: string }
  /** Move the damaged manifest `file` aside and stage the build's sources again into it. */
  | { kind: 'repair-manifest'; file: string; tag?: string }
  /** Destroy the build and stage it anew. */
  | { kind: 'destroy'; tag?: string }
  /** Verify the build with the command-line tool, which reads its whole manifest. */
  | { kind: 'verify'; tag?: string }
  /** Free space on the filesystem of `dir` (or stage onto a larger one). */
  | { kind: 'free-space'; dir: string }
  /** Raise the size limit of one staging, now `maxBytes`. */
  | { kind: 'raise-size-limit'; maxBytes: number }
  /** Name a static directory: none was given. */
  | { kind: 'give-static-dir' }
  /** Give a reservation's length: a number with a unit, at most `maxDays` days. */
  | { kind: 'give-duration'; maxDays: number }
  /** Reserve `tag` anew (the reservation meant has ended or was removed). */
  | { kind: 'reserve-again'; staticDir: string; tag: string }
  /** Ask the reservation's owner to release it (or force-release it). */
  | { kind: 'ask-owner'; staticDir: string; tag: string };

/** Which failure of its code an error is, where callers tell them apart. */
export type ErrorReason =
  | 'no-static-dir' // EBADSTATICDIR: none given
  | 'missing' // EBADSTATICDIR: it does not exist
  | 'not-a-directory' // EBADSTATICDIR: it is something else
  | 'free-space' // ETOOBIG: the staging would leave its filesystem with less than the margin
  | 'max-size' // ETOOBIG: the staging would write more than its size limit
  | 'manifest-size'; // ETOOBIG: a manifest too large to parse where it was asked for

export interface StagingErrorExtra {
  path?: string;
  lock?: LockInfo;
  cause?: unknown;
  changed?: true;
  next?: readonly NextStep[];
  reason?: ErrorReason;
  detail?: string;
}

export class StagingError extends Error {
  override readonly name = 'StagingError';
  readonly code: ErrorCode;
  /** The path the error is about, where there is one. */
  readonly path?: string;
  /** For ELOCKED: who holds the lock. */
  readonly lock?: LockInfo;
  /** For ELOCKED: the lock is not the one the caller named (an `expect` option), so nothing was done. */
  readonly changed?: true;
  /** What the user can do next, the alternatives in order; the message ends with them in words. */
  readonly next?: readonly NextStep[];
  /** Which failure of its code this is, where that matters to a caller. */
  readonly reason?: ErrorReason;
  /** For ECORRUPT: what is wrong with the record, in words. */
  readonly detail?: string;
  /** The message without its next steps: what happened. */
  readonly facts: string;

  /** `facts` say what happened; the words of `next`, if any, are added to make the message. */
  constructor(code: ErrorCode, facts: string, extra: StagingErrorExtra = {}) {
    const next = extra.next !== undefined && extra.next.length > 0 ? extra.next : undefined;
    super(next === undefined ? facts : `${facts} ${nextStepWords(next)}`, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.code = code;
    this.facts = facts;
    if (extra.path !== undefined) this.path = extra.path;
    if (extra.lock !== undefined) this.lock = extra.lock;
    if (extra.changed === true) this.changed = true;
    if (next !== undefined) this.next = next;
    if (extra.reason !== undefined) this.reason = extra.reason;
    if (extra.detail !== undefined) this.detail = extra.detail;
  }
}

/** One next step as a clause of plain words, naming no command or flag. */
function stepWords(step: NextStep): string {
  switch (step.kind) {
    case 'wait':
      return 'wait for it to be released';
    case 'join-line':
      return 'wait for it too to take a place in line';
    case 'force-release':
      return 'force-release it if its holder is gone';
    case 'add':
      return 'to record its artifacts, stage its sources again into it (files already there are hashed and recorded)';
    case 'repair-manifest':
      return "to repair it, move it aside and stage the build's sources again into the build (files already there are hashed again and recorded; overwrite those that differ)";
    case 'destroy':
      return 'destroy the build and stage it anew';
    case 'verify':
      return 'the command-line tool reads it in full';
    case 'free-space':
      return 'free some space or stage onto a larger filesystem';
    case 'raise-size-limit':
      return 'raise the size limit if the build really is that large';
    case 'give-static-dir':
      return 'give the static directory to use';
    case 'give-duration':
      return `give a length with its unit, such as 90m, 4h or 1d, of at most ${step.maxDays} days`;
    case 'reserve-again':
      return 'reserve it anew';
    case 'ask-owner':
      return 'ask its owner to release it';
  }
}

/** Next steps as one sentence of alternatives: "Wait for it to be released, or force-release it if its holder is gone." */
export function nextStepWords(next: readonly NextStep[], words: (step: NextStep) => string = stepWords): string {
  const text = next.map(words).join(', or ');
  return `${text.charAt(0).toUpperCase()}${text.slice(1)}.`;
}

export function isStagingError(err: unknown, code?: ErrorCode): err is StagingError {
  return err instanceof StagingError && (code === undefined || err.code === code);
}

/**
 * Node's errno code of a filesystem error, if it is one. Node names an errno its I/O library does
 * not know "Unknown system error -N": ESTALE among them, what an NFS client answers for a file or
 * directory another client removed. Such a code is named from the system's table instead, so that
 * it is told apart like any other.
 */
export function errnoCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const { code, errno } = err as { code?: unknown; errno?: unknown };
  if (typeof code !== 'string') return undefined;
  if (typeof errno === 'number' && code.startsWith('Unknown system error')) return systemErrnoName(-errno) ?? code;
  return code;
}

/** The system's name for errno number `n` (ESTALE for 116 on Linux), if it has one. */
export function systemErrnoName(n: number): string | undefined {
  for (const [name, value] of Object.entries(os.constants.errno)) if (value === n) return name;
  return undefined;
}

/**
 * Turns an unexpected filesystem error into an EIO StagingError that names what we were doing
 * and the path; StagingErrors pass through untouched.
 */
export function asStagingError(err: unknown, doing: string, path: string): StagingError {
  if (err instanceof StagingError) return err;
  const detail = err instanceof Error ? err.message : String(err);
  return new StagingError('EIO', `Could not ${doing} ${path}: ${detail}.${errnoHint(errnoCode(err))}`, { path, cause: err });
}

/** What the user can do about a filesystem error of code `errno`, as a sentence after a space; '' when there is nothing to say. */
export function errnoHint(errno: string | undefined): string {
  return errno === 'EACCES' || errno === 'EPERM'
    ? ' Check the permissions of that path for this user.'
    : errno === 'ENOSPC' || errno === 'EDQUOT'
      ? ' The filesystem is full; free some space.'
      : errno === 'EROFS'
        ? ' The filesystem is read-only.'
        : errno === 'ESTALE'
          ? ' Another host removed or replaced it while this one was using it (a stale network file handle); try again.'
          : '';
}
