/**
 * Committing changes to an area from the holder's work directory, so that a holder that loses its
 * lock, dies or meets a full disk at any instant leaves either its whole change or none of it.
 *
 * Everything a holder changes in its area is first made inside its work directory, which lives in
 * its lock (`devserver.lock/work.<token>`). The commit then moves each piece into the area by one
 * rename, after writing down every rename it is about to do (`commit.json`, in the work directory).
 * Deleting that record is the commit point.
 *
 * Until then the change is undone by name, never by inode: the clients of a network filesystem
 * each number files their own way, so an inode written down on one host means nothing on another.
 * A step `{ to, from, aside? }` set aside what was at `<area>/<to>` as `work/<aside>`, then moved
 * `work/<from>` to `<area>/<to>`. Its move was made iff `work/<from>` is no longer there: then what
 * is at `<area>/<to>` goes back to `work/<from>`. An aside still in the work directory goes back to
 * `<area>/<to>`. Steps are undone last first and each of these moves happens at most once, so an
 * undo cut off itself (a kill, a full disk, an I/O error) is finished by whoever comes next, on any
 * host.
 *
 * The holder undoes its own failed commit. One cut off mid-commit cannot (its work directory's name
 * leads nowhere once its lock is moved away), so whoever takes the lock next undoes it from what was
 * moved away (`devserver.lock.fenced.*`) before anything else. An undo that cannot finish keeps the
 * record and everything set aside: nothing of it is deleted until the undo is complete, and until
 * then no one may lock the area (EUNFINISHED).
 */
import * as fs from 'fs';
import * as path from 'path';
import { openBelow, readRecord, type Dir } from '../fs/anchored';
import { StagingError, errnoCode, errnoHint } from '../base/errors';
import { COMMIT_FILE, FENCE_FILE, LOCK_FENCED_PREFIX, MANIFEST_FILE, WORK_PREFIX, isProtocolName } from '../base/protocol';
import { step } from '../base/steps';

export { COMMIT_FILE };

/** The record while it is written: only a whole record ever has the name `commit.json`. */
export const COMMIT_PART = `${COMMIT_FILE}.part`;

export interface CommitStep {
  /** Where the entry goes: '/'-separated, relative to the area. Its parents exist when it runs. */
  to: string;
  /** The entry's name inside the work directory before the step; none for a step that only sets `to` aside (a destroy, trash.ts). */
  from?: string;
  /** Where the entry it replaced is set aside, inside the work directory. */
  aside?: string;
}

export interface CommitRecord {
  version: 1 | 2;
  steps: CommitStep[];
}

/** Where the entries of a work directory are reached: through the lock (the holder's own) or an opened directory. */
export interface WorkPlace {
  at(name: string): string;
  /** For messages only. */
  readonly shown: string;
}

export type UndoOutcome = { complete: true } | { complete: false; error: StagingError; reason: string };

const COMPLETE: UndoOutcome = { complete: true };

/** Commit records list one step per artifact: allow for very large builds. */
const MAX_RECORD_BYTES = 256 * 1024 * 1024;

/** A name in the work directory: one segment, never the record itself. */
function isWorkName(n: unknown): n is string {
  return typeof n === 'string' && isSegment(n) && n !== COMMIT_FILE && n !== COMMIT_PART;
}

function isSegment(s: string): boolean {
  return s !== '' && s !== '.' && s !== '..' && !s.includes('/') && !s.includes('\0');
}

/**
 * A place in the area a commit may change: the manifest, the fencing counter (a destroy sets it
 * aside), or a path of artifact names (never the lock or our other bookkeeping).
 */
function isPlace(to: unknown): to is string {
  if (typeof to !== 'string') return false;
  // Only set aside and put back (a destroy): nothing is ever placed there.
  if (to === FENCE_FILE) return true;
  if (to === MANIFEST_FILE) return true;
  return to.split('/').every((s) => isSegment(s) && !isProtocolName(s));
}

/**
 * The record, or undefined when it is not one this tool writes (not JSON, a step of the wrong
 * shape, a place outside the area or in the protocol's names). Records of the first version named
 * inodes too; those are ignored.
 */
export function parseCommit(text: string): CommitRecord | undefined {
  let raw: { version?: unknown; steps?: unknown };
  try {
    raw = JSON.parse(text) as typeof raw;
  } catch {
    return undefined;
  }
  if (typeof raw !== 'object' || raw === null || (raw.version !== 1 && raw.version !== 2) || !Array.isArray(raw.steps)) return undefined;
  const steps: CommitStep[] = [];
  for (const s of raw.steps as unknown[]) {
    if (typeof s !== 'object' || s === null) return undefined;
    const { to, from, aside } = s as Record<string, unknown>;
    if (!isPlace(to) || (aside !== undefined && !isWorkName(aside))) return undefined;
    if (from === undefined) {
      if (aside === undefined) return undefined;
      steps.push({ to, aside });
      continue;
    }
    if (to === FENCE_FILE) return undefined;
    if (!isWorkName(from)) return undefined;
    steps.push(aside === undefined ? { to, from } : { to, from, aside });
  }
  return { version: raw.version, steps };
}

/** The record's text as written. */
export function commitText(steps: readonly CommitStep[]): string {
  const record: CommitRecord = { version: 2, steps: steps.map(({ to, from, aside }) => ({ to, ...(from !== undefined ? { from } : {}), ...(aside !== undefined ? { aside } : {}) })) };
  return `${JSON.stringify(record)}\n`;
}

/** Safe relative segments: the record may have been tampered with; never act outside the area. */
function segmentsOf(rel: string): string[] | undefined {
  const segs = rel.split('/');
  if (segs.some((s) => !isSegment(s))) return undefined;
  return segs;
}

/**
 * Opens the directory holding `rel` inside the area, refusing links on the way: undefined when it
 * is not there (anymore) or a link is on the way; any other failure is thrown. The caller closes
 * it unless it is `area`.
 */
async function openParentOf(area: Dir, rel: string): Promise<{ dir: Dir; name: string } | undefined> {
  const segs = segmentsOf(rel);
  if (segs === undefined) return undefined;
  let dir = area;
  try {
    for (const seg of segs.slice(0, -1)) {
      const next = await openBelow(dir, seg);
      if (dir !== area) dir.close();
      dir = next;
    }
  } catch (err) {
    if (dir !== area) dir.close();
    const code = errnoCode(err);
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP') return undefined;
    throw err;
  }
  return { dir, name: segs[segs.length - 1] };
}

/** Whether there is an entry of any kind at `p` (never following a link). */
async function present(p: string): Promise<boolean> {
  try {
    await fs.promises.lstat(p);
    return true;
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw err;
  }
}

/**
 * An undo that could not finish, and why (`reason`: a clause, no capital, no full stop). The error
 * says what is kept and who finishes it; callers that tell a longer story start with their own words.
 */
export function unfinished(areaShown: string, workShown: string, reason: string, cause?: unknown): UndoOutcome {
  return {
    complete: false,
    reason,
    error: new StagingError('EUNFINISHED', `${areaShown} holds a staging that was cut off and could not be undone yet: ${reason}. ${keptWords(workShown)}`, {
      path: areaShown,
      ...(cause !== undefined ? { cause } : {}),
    }),
  };
}

/**
 * What an unfinished undo keeps, where, and who finishes it. `inLock`: the work directory is still
 * in the holder's lock, which is moved aside when it is let go of.
 */
export function keptWords(workShown: string, inLock = false): string {
  const where = inLock ? `${workShown} (moved aside with the lock as ${LOCK_FENCED_PREFIX}* when it is let go of)` : workShown;
  return (
    `Nothing is lost: what it replaced is kept, with its record, in ${where}, ` +
    'and the next holder of the area finishes undoing it once the cause is gone (a full disk: once space is freed). Until then the area cannot be locked.'
  );
}

/** What the filesystem said, and what the user can do about it. */
function detailOf(err: unknown): string {
  const detail = (err instanceof Error ? err.message : String(err)).replace(/\.$/, '');
  const hint = errnoHint(errnoCode(err)).trim().replace(/\.$/, '');
  return hint === '' ? detail : `${detail} (${hint.charAt(0).toLowerCase()}${hint.slice(1)})`;
}

/**
 * Moves `from` to `to` unless there is nothing at `from` any more (ENOENT, and `from` absent: what
 * the step placed is gone). ENOENT for `to`'s directory (the work directory moved away) is a failure.
 */
async function renameUnlessGone(from: string, to: string): Promise<void> {
  try {
    await fs.promises.rename(from, to);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT' && !(await present(from))) return;
    throw err;
  }
}

/**
 * Undoes the steps of a commit by name, last first (see above). Each step acts only on
 * `work/<from>`, `work/<aside>` and `<area>/<to>` reached without following a link; a place whose
 * directory is missing or is a link has nothing of this commit to take back. Stops at the first
 * move that fails, keeping everything as it is then: a later undo of the same record goes on from
 * there. Never throws.
 */
export async function undoCommit(area: Dir, work: WorkPlace, steps: readonly CommitStep[], version: 1 | 2 = 2): Promise<UndoOutcome> {
  step('commit.undo.begin');
  for (let i = steps.length - 1; i >= 0; i--) {
    const s = steps[i];
    const place = path.join(area.shown, s.to);
    let doing = `${place} back to ${path.join(work.shown, s.from ?? '')}`;
    let where: { dir: Dir; name: string } | undefined;
    try {
      where = await openParentOf(area, s.to);
      // The first version's undo took a placed entry back as `undone.<i>`: then it is taken back already.
      const taken = s.from === undefined || (await present(work.at(s.from))) || (version === 1 && (await present(work.at(`undone.${i}`))));
      if (!taken && where !== undefined) {
        step('commit.undo.take');
        await renameUnlessGone(where.dir.at(where.name), work.at(s.from!));
        step('commit.undo.taken');
      }
      if (s.aside === undefined) continue;
      doing = `${path.join(work.shown, s.aside)} back to ${place}`;
      if (!(await present(work.at(s.aside)))) continue;
      if (where === undefined) {
        return unfinished(area.shown, work.shown, `${path.join(work.shown, s.aside)} cannot go back to ${place}: a directory on its way is missing or is a symbolic link`);
      }
      step('commit.undo.restore');
      await fs.promises.rename(work.at(s.aside), where.dir.at(where.name));
      step('commit.undo.restored');
    } catch (err) {
      return unfinished(area.shown, work.shown, `could not move ${doing}: ${detailOf(err)}`, err);
    } finally {
      if (where !== undefined && where.dir !== area) where.dir.close();
    }
  }
  step('commit.undo.done');
  return COMPLETE;
}

/**
 * Undoes the commit recorded in the opened work directory `work`, if there is one, and then removes
 * the record first of all, so that nothing deleted afterwards can make a later undo take back what
 * this one put back. `found`: whether there was a record.
 */
async function undoWorkDir(area: Dir, work: Dir): Promise<UndoOutcome & { found: boolean }> {
  let text: string;
  try {
    text = await readRecord(work.at(COMMIT_FILE), path.join(work.shown, COMMIT_FILE), MAX_RECORD_BYTES);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT' || errnoCode((err as { cause?: unknown }).cause) === 'ENOENT') return { ...COMPLETE, found: false };
    return { ...unfinished(area.shown, work.shown, `its record could not be read: ${detailOf(err)}`, err), found: true };
  }
  const record = parseCommit(text);
  if (record === undefined) {
    const reason =
      `its record ${path.join(work.shown, COMMIT_FILE)} is not one this tool writes (damaged, or changed by someone); ` +
      'look at what that directory holds, move what was set aside (aside.*) back by hand, then remove the record';
    return { ...unfinished(area.shown, work.shown, reason), found: true };
  }
  const undone = await undoCommit(area, work, record.steps, record.version);
  if (!undone.complete) return { ...undone, found: true };
  try {
    await fs.promises.unlink(work.at(COMMIT_FILE));
  } catch (err) {
    if (errnoCode(err) !== 'ENOENT') return { ...unfinished(area.shown, work.shown, `its record could not be removed once it was undone: ${detailOf(err)}`, err), found: true };
  }
  step('commit.undo.cleared');
  return { ...COMPLETE, found: true };
}

/**
 * Undoes the unfinished commit kept in `<area>/<name>`, a directory moved out of a lock that was
 * taken away or let go of mid-commit (opened without following links). Two layouts: a whole lock
 * (`owner.json`, `work.<token>/commit.json`), as taken over so far, or the work directory itself
 * (`commit.json` directly inside). Complete (then the directory may be deleted) or not, with why
 * (then it must be kept, and the area not used). Something that is not a directory holds no commit.
 */
export async function undoFencedDir(area: Dir, name: string): Promise<UndoOutcome> {
  let fenced: Dir;
  try {
    fenced = await openBelow(area, name);
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP') return COMPLETE;
    return unfinished(area.shown, path.join(area.shown, name), `it could not be opened: ${detailOf(err)}`, err);
  }
  try {
    const itself = await undoWorkDir(area, fenced);
    if (!itself.complete || itself.found) return itself;
    let entries: string[];
    try {
      entries = await fs.promises.readdir(fenced.at('.'));
    } catch (err) {
      return unfinished(area.shown, fenced.shown, `it could not be read: ${detailOf(err)}`, err);
    }
    for (const entry of entries) {
      if (!entry.startsWith(WORK_PREFIX)) continue;
      let work: Dir;
      try {
        work = await openBelow(fenced, entry);
      } catch (err) {
        const code = errnoCode(err);
        if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP') continue;
        return unfinished(area.shown, path.join(fenced.shown, entry), `it could not be opened: ${detailOf(err)}`, err);
      }
      try {
        const undone = await undoWorkDir(area, work);
        if (!undone.complete) return undone;
      } finally {
        work.close();
      }
    }
    return COMPLETE;
  } finally {
    fenced.close();
  }
}
