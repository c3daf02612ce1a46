/**
 * How much one staging may write: the lower of the caller's size limit and the filesystem's free
 * space minus a safety margin, so that one staging (an archive bomb, an endless download, a wrong
 * directory) never fills the disk that everyone shares, even while it is still running and
 * before its rollback gives the space back.
 */
import * as fs from 'fs';
import { StagingError, type NextStep } from '../base/errors';
import { formatBytes } from '../base/format';

/** The margin is this share of the filesystem's size, */
export const MARGIN_FRACTION = 0.05;
/** at least this much, */
export const MARGIN_MIN_BYTES = 256 * 1024 ** 2;
/** but never more than this share of the filesystem (a small one stays usable) */
export const MARGIN_MAX_FRACTION = 0.25;
/** nor than this (5% of a large disk is far more than anyone needs to keep working). */
export const MARGIN_MAX_BYTES = 10 * 1024 ** 3;

/** The rule in words, for `--help`, the README and error messages. */
export const MARGIN_RULE = '5% of its size, at least 256 MiB, at most a quarter of it and 10 GiB';

/** The free space a staging leaves untouched on a filesystem of `totalBytes`. */
export function safetyMargin(totalBytes: number): number {
  return Math.floor(Math.min(Math.max(totalBytes * MARGIN_FRACTION, MARGIN_MIN_BYTES), totalBytes * MARGIN_MAX_FRACTION, MARGIN_MAX_BYTES));
}

export interface SizeLimit {
  /** Bytes the staging may write. */
  bytes: number;
  /** Which limit that is: the caller's, or the free space above the margin. */
  by: 'max-size' | 'free-space';
  maxBytes: number;
  /** Free space for this user when the staging began, and the margin kept of it (where statfs answered). */
  freeBytes?: number;
  marginBytes?: number;
  /** The ETOOBIG error for a staging of `source` into `dir` that would pass the limit. */
  tooBig(source: string, dir: string): StagingError;
}

/**
 * The limit for a staging into `dir`, from the free space of its filesystem now. Where the
 * filesystem cannot tell (statfs fails), only `maxBytes` applies.
 */
export async function sizeLimit(dir: string, maxBytes: number): Promise<SizeLimit> {
  let free: { freeBytes: number; marginBytes: number } | undefined;
  try {
    const st = await fs.promises.statfs(dir);
    // bavail, not bfree: what this user may write (root's reserve is not ours to fill).
    free = { freeBytes: st.bavail * st.bsize, marginBytes: safetyMargin(st.blocks * st.bsize) };
  } catch {
    free = undefined;
  }
  return limitOf(maxBytes, free);
}

/** The limit from figures already known (also what `sizeLimit` returns). */
export function limitOf(maxBytes: number, free: { freeBytes: number; marginBytes: number } | undefined): SizeLimit {
  const room = free === undefined ? Infinity : Math.max(0, free.freeBytes - free.marginBytes);
  const by = room < maxBytes ? 'free-space' : 'max-size';
  const bytes = Math.min(room, maxBytes);
  return {
    bytes,
    by,
    maxBytes,
    ...(free ?? {}),
    tooBig(source, dir) {
      const message =
        by === 'max-size'
          ? `Staging ${source} would write more than the size limit of ${formatBytes(maxBytes)} into ${dir}; stopped.`
          : `Staging ${source} would write more than ${formatBytes(bytes)} into ${dir}; stopped before the filesystem fills: ` +
            `it had ${formatBytes(free!.freeBytes)} free, and staging always leaves ${formatBytes(free!.marginBytes)} of it free ` +
            `(${MARGIN_RULE}).`;
      const next: NextStep = by === 'max-size' ? { kind: 'raise-size-limit', maxBytes } : { kind: 'free-space', dir };
      return new StagingError('ETOOBIG', message, { path: dir, reason: by, next: [next] });
    },
  };
}
