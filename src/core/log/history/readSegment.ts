/**
 * Reading one segment's events that a query wants: its end first where that may be enough, never
 * through a link or from a FIFO, what is wrong told to `warn`.
 */
import { type Dir, readRecordTail } from '../../fs/anchored';
import { StagingError, errnoCode } from '../../base/errors';
import { HISTORY_SEGMENT_BYTES } from '../../base/protocol';
import type { HistoryEvent, HistoryKind } from './events';
import { parseTimed } from './parse';
import { type Warn, inWords, tell } from './report';

/** Reading a segment looks at no more than its last this many bytes (a planted huge file costs nothing). */
const MAX_SEGMENT_READ = 4 * HISTORY_SEGMENT_BYTES;
/** A query for the newest few events reads this much of each segment's end first. */
const TAIL_READ = 64 * 1024;

export interface Want {
  tag?: string;
  sinceMs: number;
  /** Only events at or before this instant (default: any). */
  untilMs?: number;
  limit: number;
  kinds?: ReadonlySet<HistoryKind>;
  warn: Warn;
  sync: boolean;
  /** Only the newest segment of a host, only its tail, of the newest `GLANCE_SEGMENTS` hosts. */
  glance: boolean;
}

export function warnRead(want: Want, err: unknown): void {
  const why = err instanceof Error ? err.message : String(err);
  tell(want.warn, new StagingError('EIO', `Skipped part of the history: ${why}`, err instanceof StagingError && err.path !== undefined ? { path: err.path } : {}));
}

/**
 * The last `needed` events of one segment that `want` asks for (all of them for Infinity), in file
 * order, and the time of the oldest line looked at. A small `needed` reads only the segment's end.
 */
export async function readSegment(dir: Dir, name: string, want: Want, needed: number): Promise<{ events: HistoryEvent[]; times: number[]; oldestMs: number }> {
  const shown = `${dir.shown}/${name}`;
  for (const maxBytes of want.glance ? [TAIL_READ] : needed <= 100 ? [TAIL_READ, MAX_SEGMENT_READ] : [MAX_SEGMENT_READ]) {
    let tail;
    try {
      tail = await readRecordTail(dir.at(name), shown, maxBytes, want.sync);
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') warnRead(want, inWords(err, shown));
      return { events: [], times: [], oldestMs: Infinity };
    }
    const lines = tail.data.toString('utf8').split('\n');
    // A read that starts inside the file starts inside a line: drop that part.
    if (tail.from > 0) lines.shift();
    let oldestMs = Infinity;
    const events: HistoryEvent[] = [];
    const times: number[] = [];
    for (const text of lines) {
      const timed = parseTimed(text);
      if (timed === undefined) continue;
      const { e, t } = timed;
      oldestMs = Math.min(oldestMs, t);
      if (want.tag !== undefined && e.tag !== want.tag) continue;
      if (t < want.sinceMs || t > (want.untilMs ?? Infinity) || (want.kinds !== undefined && !want.kinds.has(e.kind))) continue;
      events.push(e);
      times.push(t);
    }
    const whole = tail.from === 0 || maxBytes === MAX_SEGMENT_READ || want.glance;
    if (events.length >= needed || whole) {
      const from = needed === Infinity || events.length <= needed ? 0 : events.length - needed;
      return { events: from === 0 ? events : events.slice(from), times: from === 0 ? times : times.slice(from), oldestMs };
    }
  }
  return { events: [], times: [], oldestMs: Infinity };
}
