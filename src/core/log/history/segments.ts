/**
 * Segments kept open between records: a lease's own, one parked for a moment after its lease, and
 * the one each tag was last written to, reopened in one call where it is still exactly there.
 */
import * as fs from 'fs';
import { HISTORY_SEGMENT_BYTES } from '../../base/protocol';

/** Where a kept segment is: the tag's key (`knownSegments`) and the segment's real path. */
export interface SegmentPlace {
  key: string;
  path: string;
}

/**
 * One holder's segment, kept open from its lease's first record to its last on a local filesystem:
 * the records after the first then cost an `fstat` and a `write` instead of a dozen calls. What it
 * appends to is the regular file it opened through the checked directory, as a lease acts on the
 * area it opened; once that file is full, or gone, the next record takes the usual way. When the
 * lease ends, a segment whose place is known is left open for a moment (`park`), for the tag's
 * next lease.
 */
export class HistorySegment {
  private fd: number | undefined;
  private place: SegmentPlace | undefined;
  /** Set once the lease is over: a record still in flight then (a `lost` while releasing) keeps nothing open. */
  private ended = false;

  /** @internal */
  keep(fd: number, place?: SegmentPlace): void {
    this.close();
    if (this.ended) {
      closeQuietly(fd);
      return;
    }
    this.fd = fd;
    this.place = place;
  }

  /** The lease is over: lets the segment go (parked where its place is known), and any kept after this is closed at once. */
  end(): void {
    this.ended = true;
    if (this.fd !== undefined && this.place !== undefined) {
      park(this.place, this.fd);
      this.fd = undefined;
    }
    this.close();
  }

  /** @internal Appends `line` to the kept segment if it is still a file in place and not full; false when it is not. */
  append(line: string): boolean {
    if (this.fd === undefined) return false;
    let st: fs.Stats | undefined;
    try {
      st = fs.fstatSync(this.fd);
    } catch {
      st = undefined;
    }
    // One link exactly: removed since (0), or the same file under another name too (a hard link,
    // perhaps outside the static directory), it is left to the usual way, which says why.
    if (st === undefined || !st.isFile() || st.nlink !== 1 || st.size >= HISTORY_SEGMENT_BYTES) {
      this.close();
      return false;
    }
    fs.writeSync(this.fd, line);
    return true;
  }

  close(): void {
    if (this.fd === undefined) return;
    closeQuietly(this.fd);
    this.fd = undefined;
    this.place = undefined;
  }
}

export function closeQuietly(fd: number): void {
  try {
    fs.closeSync(fd);
  } catch {
    /* already closed */
  }
}

/**
 * How long a segment stays open once its lease is over, for the tag's next record: a loop of lock
 * cycles finds it open, an idle process lets it go (an open file keeps its filesystem from being
 * unmounted). `flushHistory` lets every one go at once.
 */
const PARK_MS = 1_000;
const MAX_PARKED = 64;
const parked = new Map<string, { fd: number; path: string; at: number }>();
let sweeper: NodeJS.Timeout | undefined;

function park(place: SegmentPlace, fd: number): void {
  const old = parked.get(place.key);
  if (old !== undefined) closeQuietly(old.fd);
  parked.delete(place.key);
  if (parked.size >= MAX_PARKED) closeParked();
  parked.set(place.key, { fd, path: place.path, at: Date.now() });
  if (sweeper === undefined) {
    sweeper = setInterval(() => {
      const now = Date.now();
      for (const [key, p] of parked) {
        if (now - p.at < PARK_MS) continue;
        closeQuietly(p.fd);
        parked.delete(key);
      }
      if (parked.size === 0) closeParked();
    }, PARK_MS);
    sweeper.unref();
  }
}

/** Closes every parked segment. */
export function closeParked(): void {
  for (const p of parked.values()) closeQuietly(p.fd);
  parked.clear();
  if (sweeper !== undefined) clearInterval(sweeper);
  sweeper = undefined;
}

/**
 * The segment this process last appended each tag's record to, by its real path, where its
 * directory was found exactly there (`openDirWhere`): the next record of the tag opens it in one
 * lookup. Bounded like `tagDirs`.
 */
export const knownSegments = new Map<string, string>();

const O_APPEND_RECORD = fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK;

/**
 * Appends `line` to the segment `key`'s tag was last written to: the one parked after the last
 * lease, or else opened by its path in one call. Used only if it is a regular file that is not
 * full, has no other name (a hard link) and the kernel places it exactly at that path: no link on
 * the way led elsewhere, and it was not moved or removed meanwhile. False (and nothing written)
 * when it is not so: then the caller takes the way level by level, which says what is wrong.
 */
export function appendToKnown(key: string, line: string, segment: HistorySegment | undefined): boolean {
  let fd: number;
  let p: string;
  const kept = parked.get(key);
  if (kept !== undefined) {
    parked.delete(key);
    fd = kept.fd;
    p = kept.path;
  } else {
    const known = knownSegments.get(key);
    if (known === undefined) return false;
    p = known;
    try {
      fd = fs.openSync(p, O_APPEND_RECORD);
    } catch {
      knownSegments.delete(key);
      return false;
    }
  }
  let handedOn = false;
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile() || st.nlink !== 1 || st.size >= HISTORY_SEGMENT_BYTES || fs.readlinkSync(`/proc/self/fd/${fd}`) !== p) {
      knownSegments.delete(key);
      return false;
    }
    fs.writeSync(fd, line);
    if (segment !== undefined) segment.keep(fd, { key, path: p });
    else park({ key, path: p }, fd);
    handedOn = true;
    return true;
  } catch {
    // A failed write goes the long way, which writes again or says why it cannot.
    knownSegments.delete(key);
    return false;
  } finally {
    if (!handedOn) closeQuietly(fd);
  }
}
