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
  | 'EUNFINISHED' // the area holds a staging cut off mid-commit whose undo could not finish yet (a full disk, an I/O error); nothing of it is lost
  | 'EIO'; // any other filesystem failure, with the cause attached

export class StagingError extends Error {
  override readonly name = 'StagingError';
  readonly code: ErrorCode;
  /** The path the error is about, where there is one. */
  readonly path?: string;
  /** For ELOCKED: who holds the lock. */
  readonly lock?: LockInfo;
  /** For ELOCKED: the lock is not the one the caller named (an `expect` option), so nothing was done. */
  readonly changed?: true;

  constructor(code: ErrorCode, message: string, extra: { path?: string; lock?: LockInfo; cause?: unknown; changed?: true } = {}) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.code = code;
    if (extra.path !== undefined) this.path = extra.path;
    if (extra.lock !== undefined) this.lock = extra.lock;
    if (extra.changed === true) this.changed = true;
  }
}

export function isStagingError(err: unknown, code?: ErrorCode): err is StagingError {
  return err instanceof StagingError && (code === undefined || err.code === code);
}

/** Node's errno code of a filesystem error, if it is one. */
export function errnoCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && typeof (err as { code?: unknown }).code === 'string'
    ? (err as { code: string }).code
    : undefined;
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
        : '';
}
