/**
 * Recording an event: at once on a local filesystem, queued in order on a network one, and
 * flushed before reads and exits; never failing the operation it records.
 */
import * as path from 'path';
import { fsClockSkew, knownClockSkew } from '../../fs/clock';
import { StagingError } from '../../base/errors';
import { HISTORY_DIR, META_DIR, historyDirOf } from '../../base/protocol';
import { resolveStaticDir } from '../../fs/tags';
import { appendToSegments, fileModeFor, openTagDir } from './append';
import type { NewHistoryEvent } from './events';
import { type Warn, defaultWarn, inWords, reportWrite, tell } from './report';
import { type HistorySegment, appendToKnown, closeParked } from './segments';

/** Records on network filesystems, in the order they were made: not waited for by the operations. */
let queue: Promise<void> = Promise.resolve();
const inflight = new Set<Promise<void>>();

/**
 * Appends `event` to the history of its tag. Never rejects: a failure goes to `warn`. On a local
 * filesystem the record is written when the returned promise settles (a few system calls, no
 * waiting on others); on a network filesystem it is queued, so that no lock operation waits on a
 * server's round trips, and `flushHistory` waits for it.
 */
export function recordHistory(staticDir: string, event: NewHistoryEvent, warn: Warn = defaultWarn, segment?: HistorySegment): Promise<void> {
  const atMs = Date.now();
  const real = localStaticDirs.get(staticDir);
  if (real !== undefined && appendNow(staticDir, real, event, atMs, segment, warn)) return WRITTEN;
  const write = (sd: { staticDir: string; realStaticDir: string; io: { sync: boolean } }): Promise<void> => {
    if (sd.io.sync && path.isAbsolute(staticDir)) {
      if (localStaticDirs.size >= 100) localStaticDirs.clear();
      localStaticDirs.set(staticDir, sd.realStaticDir);
    }
    return writeEvent(sd.staticDir, sd.realStaticDir, sd.io.sync, event, atMs, sd.io.sync ? segment : undefined).then(
      (note) => {
        if (note !== undefined) tell(warn, new StagingError('EIO', `Recorded the history of ${event.tag}, but ${note}.`));
      },
      (err: unknown) => reportWrite(warn, staticDir, event, err),
    );
  };
  const done = resolveStaticDir(staticDir).then(
    (sd) => {
      if (sd.io.sync) return write(sd);
      // Network filesystems: one after the other, so that a process's events keep their order.
      queue = queue.then(() => write(sd));
      return undefined;
    },
    (err: unknown) => reportWrite(warn, staticDir, event, err),
  );
  inflight.add(done);
  void done.finally(() => inflight.delete(done));
  return done;
}

const WRITTEN = Promise.resolve();

/**
 * Static directories on local filesystems that records went to, by the absolute path they were
 * given as, with their real path: the next record there is written at once (`appendNow`).
 */
const localStaticDirs = new Map<string, string>();

/** The event's line: its fields, then `time` (spliced in rather than spread into a copy of the event). */
function lineOf(event: NewHistoryEvent, fsMs: number): string {
  return `${JSON.stringify(event).slice(0, -1)},"time":"${new Date(fsMs).toISOString()}"}\n`;
}

/**
 * A record on a local filesystem whose clock offset is known, appended before this returns: to the
 * lease's segment or to the one the tag was last written to (both checked as they are used). False
 * when it takes the usual way (which then also says what is wrong).
 */
function appendNow(staticDir: string, realStaticDir: string, event: NewHistoryEvent, atMs: number, segment: HistorySegment | undefined, warn: Warn): boolean {
  const skewMs = knownClockSkew(realStaticDir);
  if (skewMs === undefined) return false;
  const line = lineOf(event, atMs + skewMs);
  try {
    return segment?.append(line) === true || appendToKnown(`${realStaticDir}\0${event.tag}`, line, segment);
  } catch (err) {
    // The lease's segment refused the write (a full disk): reported like any record not written.
    reportWrite(warn, staticDir, event, err);
    return true;
  }
}

/** Waits until every history record this process has made is written (or reported as failed). */
export async function flushHistory(): Promise<void> {
  while (inflight.size > 0) await Promise.all([...inflight]);
  let settled: Promise<void>;
  do {
    settled = queue;
    await settled;
  } while (settled !== queue);
  closeParked();
}

async function writeEvent(
  staticDir: string,
  realStaticDir: string,
  sync: boolean,
  event: NewHistoryEvent,
  atMs: number,
  segment: HistorySegment | undefined,
): Promise<string | undefined> {
  const skewMs = await fsClockSkew(realStaticDir);
  const line = lineOf(event, atMs + skewMs);
  if (segment?.append(line) === true) return undefined;
  const key = `${realStaticDir}\0${event.tag}`;
  if (sync && appendToKnown(key, line, segment)) return undefined;
  const { dir, exact } = await openTagDir(staticDir, realStaticDir, event.tag, sync).catch((err: unknown) => {
    throw inWords(err, [staticDir, META_DIR, HISTORY_DIR, ...historyDirOf(event.tag)].join('/'));
  });
  try {
    return await appendToSegments(dir, line, fileModeFor(dir), sync, segment, exact ? key : undefined);
  } finally {
    dir.close();
  }
}
