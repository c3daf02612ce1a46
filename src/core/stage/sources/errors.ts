/**
 * The errors of staging sources, in words the user can act on: ESOURCE naming the source (a path,
 * a URL, an archive's entry) and what to check, ECANCELED when the staging was stopped. Every
 * source reports its failures through these.
 */
import { StagingError, errnoCode } from '../../base/errors';

/** The error to throw once `signal` has aborted: its own StagingError reason, else ECANCELED. */
export function canceledError(signal: AbortSignal, source: string): StagingError {
  const reason: unknown = signal.reason;
  if (reason instanceof StagingError) return reason;
  return new StagingError('ECANCELED', `Staging from ${source} was canceled.`, { cause: reason });
}

export function throwIfAborted(signal: AbortSignal, source: string): void {
  if (signal.aborted) throw canceledError(signal, source);
}

export function sourceError(message: string, source: string, cause?: unknown): StagingError {
  return new StagingError('ESOURCE', message, cause === undefined ? { path: source } : { path: source, cause });
}

/** A local source file or directory that is not what the walk saw when it is opened, or changed while read. */
export function changedSourceError(file: string): StagingError {
  return sourceError(`${file} changed while it was being staged; stage it again once it is complete.`, file);
}

/** An error's message, without the final period a sentence around it adds again. */
export function messageOf(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).replace(/\.+$/, '');
}

/** A filesystem error reading a local source, as an ESOURCE naming the path and the cause. */
export function fsSourceError(err: unknown, file: string, within?: string): StagingError {
  const inside = within !== undefined && within !== file;
  const where = inside ? `${file} (in the staging source ${within})` : `the staging source ${file}`;
  switch (errnoCode(err)) {
    case 'ENOENT':
      return sourceError(`${inside ? where : `The staging source ${file}`} does not exist; check the path.`, file, err);
    case 'EACCES':
    case 'EPERM':
      return sourceError(`Cannot read ${where}: permission denied; check its permissions for this user.`, file, err);
    case 'ENOTDIR':
      return sourceError(`Cannot read ${where}: a part of its path is not a directory; check the path.`, file, err);
    case 'ELOOP':
      return sourceError(`Cannot read ${where}: too many levels of symbolic links; check the path.`, file, err);
    default:
      return sourceError(`Cannot read ${where}: ${messageOf(err)}.`, file, err);
  }
}
