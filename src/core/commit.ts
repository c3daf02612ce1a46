/**
 * Committing changes to an area from the holder's work directory, so that a holder that loses its
 * lock (or dies) at any instant leaves either its whole change or none of it.
 *
 * Everything a holder changes in its area is first made inside its work directory, which lives in
 * its lock (`devserver.lock/work.<token>`). The commit then moves each piece into the area by one
 * rename, after writing down every rename it is about to do (`commit.json`, in the work directory).
 * Deleting that record is the commit point. Until then, the change can be undone by inode: each
 * step names the entry it placed and the inode it has, and the entry it set aside (back in the work
 * directory). The holder undoes its own failed commit; a holder cut off mid-commit cannot (its
 * work directory's name leads nowhere once its lock is moved away), so whoever takes the lock next
 * undoes it from the moved lock (`devserver.lock.fenced.*`) before doing anything else.
 */
import * as fs from 'fs';
import { openBelow, readRecord, type Dir } from './anchored';
import { errnoCode } from './errors';
import { COMMIT_FILE } from './protocol';

export { COMMIT_FILE };

export interface CommitStep {
  /** Where the entry goes: '/'-separated, relative to the area. Its parents exist when it runs. */
  to: string;
  /** The entry's name inside the work directory before the step; none when the step only sets `to` aside (a destroy). */
  from?: string;
  /** Its inode: what the undo recognises it by. */
  ino?: number;
  /** Where the entry it replaced was set aside, inside the work directory. */
  aside?: string;
}

export interface CommitRecord {
  version: 1;
  steps: CommitStep[];
}

/** Commit records list one step per artifact: allow for very large builds. */
const MAX_RECORD_BYTES = 256 * 1024 * 1024;

export function parseCommit(text: string): CommitRecord | undefined {
  try {
    const raw = JSON.parse(text) as Partial<CommitRecord>;
    if (raw.version !== 1 || !Array.isArray(raw.steps)) return undefined;
    const oneName = (n: unknown): boolean => typeof n === 'string' && n !== '' && n !== '.' && n !== '..' && !n.includes('/') && !n.includes('\0');
    const steps = raw.steps.filter(
      (s): s is CommitStep =>
        typeof s === 'object' && s !== null && typeof s.to === 'string' && (s.from === undefined ? s.aside !== undefined : oneName(s.from) && typeof s.ino === 'number') && (s.aside === undefined || oneName(s.aside)),
    );
    return { version: 1, steps };
  } catch {
    return undefined;
  }
}

export async function readCommit(workPath: string): Promise<CommitRecord | undefined> {
  const text = await readRecord(`${workPath}/${COMMIT_FILE}`, `${workPath}/${COMMIT_FILE}`, MAX_RECORD_BYTES).catch(() => undefined);
  return text === undefined ? undefined : parseCommit(text);
}

/** Safe relative segments: the record may have been tampered with; never act outside the area. */
function segmentsOf(rel: string): string[] | undefined {
  const segs = rel.split('/');
  if (segs.some((s) => s === '' || s === '.' || s === '..' || s.includes('\0'))) return undefined;
  return segs;
}

/**
 * Opens the directory holding `rel` inside the area, refusing links on the way: undefined when it
 * is not there (anymore). The caller closes it unless it is `area`.
 */
export async function openParentOf(area: Dir, rel: string): Promise<{ dir: Dir; name: string } | undefined> {
  const segs = segmentsOf(rel);
  if (segs === undefined) return undefined;
  let dir = area;
  try {
    for (const seg of segs.slice(0, -1)) {
      const next = await openBelow(dir, seg);
      if (dir !== area) dir.close();
      dir = next;
    }
  } catch {
    if (dir !== area) dir.close();
    return undefined;
  }
  return { dir, name: segs[segs.length - 1] };
}

/**
 * Undoes the steps of a commit, last first: an entry that is still the one the step placed (same
 * inode) goes back into the work directory, and what it had replaced comes back. Entries that are
 * something else by now are left alone. Never throws; returns how many steps it could not undo.
 */
export async function undoCommit(area: Dir, workPath: string, steps: readonly CommitStep[]): Promise<number> {
  let failed = 0;
  for (let i = steps.length - 1; i >= 0; i--) {
    const step = steps[i];
    const where = await openParentOf(area, step.to);
    if (where === undefined) continue;
    const { dir, name } = where;
    try {
      const st = await fs.promises.lstat(dir.at(name)).catch(() => null);
      if (step.from === undefined) {
        // Only set aside (a destroy): it comes back unless something new took its place.
        if (st === null && step.aside !== undefined) await fs.promises.rename(`${workPath}/${step.aside}`, dir.at(name)).catch((err: unknown) => {
          if (errnoCode(err) !== 'ENOENT') throw err;
        });
        continue;
      }
      if (st !== null && st.ino === step.ino) {
        await fs.promises.rename(dir.at(name), `${workPath}/undone.${i}`);
      }
      if (step.aside !== undefined && (st === null || st.ino === step.ino)) {
        await fs.promises.rename(`${workPath}/${step.aside}`, dir.at(name)).catch((err: unknown) => {
          if (errnoCode(err) !== 'ENOENT') throw err;
        });
      }
    } catch {
      failed++;
    } finally {
      if (dir !== area) dir.close();
    }
  }
  return failed;
}
