/**
 * A build's artifacts as the model shows them: the entries of a directory inside a build, read in
 * slices, bookkeeping left out, folders first; and a key that tells whether a listing changed.
 */
import * as path from 'path';
import { readBuildDir } from '../build/browse';
import { isBookkeeping } from '../base/protocol';
import { sortNatural } from '../base/natural';
import { pause } from '../base/slices';
import type { ListEntry } from '../base/types';
import type { Artifact } from './records';

/** Entries of a listing taken in between two looks at the clock. */
export const PER_CHECK = 64;

/**
 * The entries of a directory inside a build (`rel`, '' for its top), with sizes; the tool's own
 * bookkeeping (lock, manifest, timestamp, fencing counter, and the file a Python devserver lock is a
 * link to) left out. Links are shown as what they lead to, never followed to list what is inside
 * them: the build and the folder are opened by the core, which never follows a link out of the
 * static directory, even one swapped in for a folder after it was listed.
 */
export async function readArtifacts(staticDir: string, tag: string, rel: string, lock: ListEntry | undefined): Promise<Artifact[]> {
  const entries = await readBuildDir(staticDir, tag, rel).catch(() => []);
  const legacyFile = rel === '' ? lock?.legacy?.uniqueFile : undefined;
  const dir = path.join(staticDir, tag, rel);
  // The core names bookkeeping; the file this lock is a link to is known exactly, too. In slices:
  // a build may hold 100,000 files.
  const shown: Artifact[] = [];
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i];
    if (!(rel === '' && (isBookkeeping(e.name) || e.name === legacyFile))) {
      shown.push({ name: e.name, path: `${dir}/${e.name}`, rel: rel === '' ? e.name : `${rel}/${e.name}`, size: e.size, directory: e.directory });
    }
    if (i % PER_CHECK === PER_CHECK - 1) {
      const p = pause();
      if (p !== undefined) await p;
    }
  }
  // Folders first, as a file explorer shows them.
  const sorted = await sortNatural(shown, (a) => a.name);
  return [...sorted.filter((a) => a.directory), ...sorted.filter((a) => !a.directory)];
}

export const artifactsKey = (files: readonly Artifact[]): string => files.map((f) => `${f.name}\0${f.size}\0${f.directory}`).join('\0');
