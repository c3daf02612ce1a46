/**
 * The history of every build: each transition of each area (taken, released, lost, taken over,
 * force-released, destroyed, staged, verified), whichever client made it, appended by the core to
 * `<static>/.devserver-staging/history/<h[0..2]>/<h>/<hostname>.<n>.jsonl` (h: SHA-256 of the tag).
 *
 * One file per host: O_APPEND keeps whole the lines of all processes of one host (on a local
 * filesystem and on one NFS client), and no two hosts ever append to the same file. A segment
 * that reaches HISTORY_SEGMENT_BYTES is full: the host's writers go on in the next generation,
 * and whoever creates generation n drops n-2, so a host keeps at most two segments per tag.
 * Creating a generation is `O_EXCL`, so exactly one writer does it and nothing is renamed or lost
 * in a race.
 *
 * History is best effort for the operation it records: a record that cannot be written never
 * fails or undoes the operation, but is reported through the caller's `warn` (unlike the audit log,
 * which is written first and gates force-release and destroy).
 *
 * One file per job here: the events (events.ts) and reading a line back (parse.ts); recording
 * (record.ts), appending to the segments on disk (append.ts), the segments kept open between
 * records (segments.ts); reading (read.ts, readSegment.ts, kept.ts) and the glance at who held
 * an area last (lastHeld.ts); who used what (stats.ts: holdings and waits of one area in holds.ts,
 * the figures of a window in tally.ts); what could not be done, told to `warn` (report.ts).
 */
export {
  type HistoryActor,
  type HistoryEvent,
  type HistoryKind,
  type HistoryOptions,
  type HistoryPrevious,
  type NewHistoryEvent,
  HISTORY_KINDS,
  actorOf,
  previousOf,
  removalEvent,
  thisActor,
} from './events';
export { parseEvent } from './parse';
export { flushHistory, recordHistory } from './record';
export { HistorySegment } from './segments';
export { AHEAD_MS, type HistoryQuery, history } from './read';
export { type LastHeld, lastHeld } from './lastHeld';
export { type Hold, type HoldEnd, type Wait, type Who, WAIT_FLOOR_MS, holdsOf } from './holds';
export { type BuildFigures, type Lane, type UsageFigures, MAX_LANE_ITEMS } from './tally';
export { DAY_MS, WEEK_MS, type StatsQuery, historyStats } from './stats';
