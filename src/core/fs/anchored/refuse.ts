/**
 * What one of the tool's own records must be before it is read or written (a regular file, of one
 * link to be written), and the errors that say what stood in its place instead.
 */
import type * as fs from 'fs';
import { StagingError } from '../../base/errors';

export interface RecordLimits {
  /** Refuse a record larger than this many bytes. */
  maxBytes: number;
}

export function describeType(st: fs.Stats): string {
  if (st.isFIFO()) return 'a FIFO';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  if (st.isDirectory()) return 'a directory';
  if (st.isSymbolicLink()) return 'a symbolic link';
  return 'not a regular file';
}

/** What a file with `nlink` names is, for messages. */
export function hardLinked(nlink: number): string {
  return `a file with ${nlink} hard links (the same file under other names, which may be outside the static directory)`;
}

/**
 * Refuses to write, append to or touch what `st` (the open descriptor's fstat) describes unless it
 * is a regular file with one link (EIO naming `shown`). No link count is 0 as well: a file removed
 * since it was opened takes what it is given to nobody.
 */
export function refuseUnlessOneLink(st: fs.Stats, shown: string): void {
  if (!st.isFile()) throw notARecord(shown, describeType(st));
  if (st.nlink > 1) throw notARecord(shown, hardLinked(st.nlink));
}

/** An error for a record that is not what the tool writes there: a link, a FIFO, a device, too big. */
export function notARecord(shown: string, why: string): StagingError {
  return new StagingError('EIO', `Refusing ${shown}: it is ${why}, not a file this tool wrote. Move it aside (a co-user or another program put it there).`, {
    path: shown,
  });
}
