/**
 * A file below a directory opened for reading as the core opens everything: each directory on
 * the way opened through the one before it, never through a link put there since, and the file
 * itself never through a link or by waiting on a FIFO. For readers outside the core (the editor's
 * read-only artifacts) that were given a path.
 */
import * as fs from 'fs';
import { openBelow, openDir } from './anchored';
import { fsPath } from '../base/rawNames';

/**
 * Opens `<dir>/<rel>` read-only (`rel`: '/'-separated, no `.` or `..`), `dir` followed as given.
 * ELOOP or ENOTDIR when a directory on the way is a link or no directory now; ELOOP when the file
 * is a link. The caller closes the handle and judges what it opened (`stat`).
 */
export async function openFileBelow(dir: string, rel: string): Promise<fs.promises.FileHandle> {
  const segments = rel.split('/');
  const name = segments.pop()!;
  let current = await openDir(dir);
  try {
    for (const seg of segments) {
      const next = await openBelow(current, seg);
      current.close();
      current = next;
    }
    // O_NONBLOCK: a FIFO put in its place opens at once instead of waiting for a writer.
    return await fs.promises.open(fsPath(current.at(name)), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } finally {
    current.close();
  }
}
