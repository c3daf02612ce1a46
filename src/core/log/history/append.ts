/**
 * Appending a line to this host's segment of a tag on disk: the tag's directory reached or made
 * without following a link, one generation after another, the one two back dropped.
 */
import { type Dir, appendRecord, openDir, openDirWhere, openOrMakeBelow } from '../../fs/anchored';
import { callsFor } from '../../fs/calls';
import { openMeta } from '../../fs/meta';
import { StagingError, errnoCode } from '../../base/errors';
import { thisProcess } from '../../base/holder';
import { HISTORY_DIR, HISTORY_SEGMENT_BYTES, META_DIR, historyDirOf, historyHostName, historySegmentName, parseHistorySegmentName } from '../../base/protocol';
import { inWords } from './report';
import { type HistorySegment, knownSegments } from './segments';

/** Generations tried in one append before giving up (each step is someone else's progress). */
const MAX_STEPS = 8;

/**
 * Modes of what history creates: writable by whoever may write the static directory, whatever the
 * creator's umask. Directories take the static directory's group and other write bits (and its
 * set-group-ID bit, so a shared group stays), not its sticky bit: the writers of one host must be
 * able to drop each other's old generations. Segments take their directory's write bits.
 */
const dirModeFor = (top: Dir): number => 0o755 | (top.mode & 0o2022);
export const fileModeFor = (dir: Dir): number => 0o644 | (dir.mode & 0o022);

/** The generation each tag directory is at, as this process last found it: spares a directory read per record. */
const generations = new Map<string, number>();

/**
 * The directory of `tag`'s segments, made where missing. Usually there already and reached in one
 * lookup (`openDirWhere`); else level by level from the static directory, each level opened
 * without following a link, so a link or file planted on the way is refused, never followed.
 */
export async function openTagDir(staticDir: string, realStaticDir: string, tag: string, sync: boolean): Promise<{ dir: Dir; exact: boolean }> {
  const names = [META_DIR, HISTORY_DIR, ...historyDirOf(tag)];
  const fast = await openDirWhere(`${realStaticDir}/${names.join('/')}`, sync);
  if (fast !== undefined) return { dir: fast, exact: true };
  const top = await openDir(staticDir, true, sync);
  const opened: Dir[] = [top];
  try {
    opened.push(await openMeta(top, sync));
    for (const name of names.slice(1)) opened.push(await openOrMakeBelow(opened.at(-1)!, name, { sync, mode: dirModeFor(top) }));
    return { dir: opened.pop()!, exact: false };
  } finally {
    for (const d of opened) d.close();
  }
}

/** The names in an opened directory, synchronously on a local filesystem. */
export function readNames(dir: Dir, sync: boolean): Promise<string[]> {
  return callsFor(sync).readdir(dir.at('.'));
}

let segmentHost: string | undefined;

/** This host's name in its segments' names. */
function hostOfSegments(): string {
  segmentHost ??= historyHostName(thisProcess().hostname);
  return segmentHost;
}

/** This host's newest generation in `dir` (-1: none yet), from a directory read. */
async function newestGeneration(dir: Dir, host: string, sync: boolean): Promise<number> {
  let newest = -1;
  for (const name of await readNames(dir, sync)) {
    const seg = parseHistorySegmentName(name);
    if (seg !== undefined && seg.host === host) newest = Math.max(newest, seg.generation);
  }
  return newest;
}

/** Appends `line` to this host's current segment; resolves to a note when it was written but something else went wrong. */
export async function appendToSegments(dir: Dir, line: string, mode: number, sync: boolean, segment: HistorySegment | undefined, knownKey?: string): Promise<string | undefined> {
  const host = hostOfSegments();
  const key = `${dir.dev}:${dir.ino}:${host}`;
  let generation = generations.get(key);
  // Create only a generation known to be next: one after a full segment, or the first.
  let mayCreate = false;
  if (generation === undefined) {
    generation = Math.max(0, await newestGeneration(dir, host, sync));
    mayCreate = true;
  }
  for (let step = 0; step < MAX_STEPS; step++) {
    const name = historySegmentName(host, generation);
    let outcome;
    try {
      outcome = await appendRecord(dir.at(name), `${dir.shown}/${name}`, line, {
        mode,
        create: mayCreate ? 'exact' : false,
        fullAt: HISTORY_SEGMENT_BYTES,
        sync,
        ...(segment !== undefined ? { keep: (fd: number) => segment.keep(fd, knownKey === undefined ? undefined : { key: knownKey, path: `${dir.shown}/${name}` }) } : {}),
      });
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT' || mayCreate) throw inWords(err, `${dir.shown}/${name}`);
      // Dropped by a writer two generations on since this process last wrote: look again.
      generation = Math.max(0, await newestGeneration(dir, host, sync));
      mayCreate = true;
      continue;
    }
    if (outcome === 'full') {
      generation++;
      mayCreate = true;
      continue;
    }
    generations.set(key, generation);
    if (knownKey !== undefined) {
      if (knownSegments.size >= 1_000) knownSegments.clear();
      knownSegments.set(knownKey, `${dir.shown}/${name}`);
    }
    // The creator of generation n drops n-2: a host keeps at most two segments of a tag.
    if (outcome === 'created' && generation >= 2) {
      const old = historySegmentName(host, generation - 2);
      // unlink: a link or file planted there goes, never what a link points to.
      const dropped = callsFor(sync).unlink(dir.at(old));
      return dropped.then(
        () => undefined,
        (err: unknown) => (errnoCode(err) === 'ENOENT' ? undefined : `could not remove the old segment ${dir.shown}/${old} (${err instanceof Error ? err.message : String(err)}), so this tag's history may grow beyond its bound`),
      );
    }
    return undefined;
  }
  throw new StagingError('EIO', `the segments in ${dir.shown} kept changing while this process appended to them`, { path: dir.shown });
}
