/**
 * The lines `devserver-stage watch` writes, and the queue that keeps it within a fixed amount of
 * memory whatever its reader does. A reader that stops reading (a paused terminal, a stuck
 * consumer) must not make the process buffer every change it would print, for as long as it
 * runs: the queue writes while the reader keeps up, and while it is behind keeps one line per
 * build, the latest (earlier ones for the same build are coalesced into it and counted). When the
 * reader catches up, a line says how many updates were coalesced, then the builds' latest states
 * follow. So what is held is at most one line per build the watch follows, as the model itself
 * holds a record per build, however long the reader lags and however fast the builds change.
 */
import type { AreaRecord } from '../core/watch/records';
import { jsonText, messageText, printable, printableTime } from './output';

/**
 * What happened, on `change` and `gone` lines: a lock `taken`; a reservation `reserved` or
 * `extended`; a lock `released` by its holder, `force-released` or `taken-over` (by `by`), or
 * `removed` with nothing recorded; the build `destroyed` (by `by`) or otherwise `gone`; a lock
 * turned `stale`; a build that `appeared`; anything else `changed`.
 */
export type WatchKind = 'taken' | 'reserved' | 'extended' | 'released' | 'force-released' | 'taken-over' | 'removed' | 'destroyed' | 'gone' | 'stale' | 'appeared' | 'changed';

/** A process, as its lock or the history recorded it. */
export interface WatchActor {
  user: string;
  host: string;
  pid?: number;
  purpose?: string;
}

/** One line of the output: a build as it is now, or that it is gone. */
export interface WatchLine {
  time: string;
  /**
   * `snapshot`: as found at the start; `change`: its lock changed, or it appeared; `gone`:
   * removed; `coalesced`: `count` updates were folded into the lines that follow, the reader
   * having been slower than the changes.
   */
  event: 'snapshot' | 'change' | 'gone' | 'coalesced';
  kind?: WatchKind;
  tag?: string;
  state?: string;
  /** `user@host` of the holder, or the Python devserver's host for a legacy lock. */
  holder?: string;
  /** The holder's user and host apart. */
  user?: string;
  host?: string;
  pid?: number;
  clientId?: string;
  purpose?: string;
  /** The fencing token of the lock. */
  token?: number;
  staleReason?: string;
  /** A reservation: when it ends (ISO 8601, the filesystem's clock). */
  reservedUntil?: string;
  /** Who force-released, took over or destroyed it, as the history recorded. */
  by?: WatchActor;
  /** The holder of the lock that ended. */
  previous?: WatchActor;
  /** For `coalesced`: how many updates the lines that follow stand for, beyond themselves. */
  count?: number;
}

export function lineOf(r: AreaRecord | undefined, tag: string, event: 'snapshot' | 'change' | 'gone'): WatchLine {
  const out: WatchLine = { time: new Date().toISOString(), event, tag };
  if (r === undefined || event === 'gone') return out;
  const e = r.lock;
  out.state = e?.state ?? 'free';
  if (e?.holder !== undefined && e.state !== 'free') {
    out.holder = `${e.holder.user}@${e.holder.hostname}`;
    out.user = e.holder.user;
    out.host = e.holder.hostname;
    out.pid = e.holder.pid;
    out.clientId = e.holder.clientId;
    if (e.holder.purpose !== undefined) out.purpose = e.holder.purpose;
    if (e.holder.fence !== undefined) out.token = e.holder.fence;
  } else if (e?.legacy !== undefined) {
    out.holder = e.legacy.hostname;
    out.host = e.legacy.hostname;
    if (e.legacy.pid !== undefined) out.pid = e.legacy.pid;
  }
  if (e?.reservation !== undefined) out.reservedUntil = e.reservation.until;
  if (e?.staleReason !== undefined) out.staleReason = e.staleReason;
  return out;
}

/** What a line shows of a build: when it differs, a line is due. */
export const keyOfLine = (l: WatchLine): string => [l.state, l.holder, l.pid, l.clientId, l.token, l.reservedUntil].join('\0');

/** A line as text: every field a co-user wrote escaped (`printable`, `messageText`), one line whatever they hold. */
export function textOf(l: WatchLine): string {
  if (l.event === 'coalesced') {
    return `${l.time}  (${l.count} update${l.count === 1 ? ' was' : 's were'} coalesced while the reader was behind; the latest state of each build follows)\n`;
  }
  const parts = [l.time, printable(l.tag ?? ''), l.event === 'gone' ? (l.kind === 'destroyed' ? 'destroyed' : 'gone') : (l.state ?? '')];
  if (l.event === 'change' && l.kind !== undefined && l.kind !== 'changed' && l.kind !== l.state) parts.push(`(${l.kind})`);
  if (l.by !== undefined) parts.push(`by ${printable(`${l.by.user}@${l.by.host}`)}${l.by.pid !== undefined ? ` pid ${l.by.pid}` : ''}`);
  if (l.holder !== undefined) parts.push(printable(l.holder) + (l.reservedUntil !== undefined ? ` reserved until ${printableTime(l.reservedUntil)}` : l.pid !== undefined ? ` pid ${l.pid}` : ''));
  if (l.reservedUntil !== undefined && l.purpose !== undefined) parts.push(printable(l.purpose));
  if (l.token !== undefined) parts.push(`token ${l.token}`);
  if (l.staleReason !== undefined) parts.push(`(${messageText(l.staleReason)})`);
  return `${parts.join('  ')}\n`;
}

/** Where the lines go: a stream that says when its reader is behind (`write` answers false) and when it has caught up (`drain`). */
export interface LineSink {
  write(text: string): boolean;
  once(event: 'drain', listener: () => void): unknown;
}

/** The lines of a watch on their way to a reader that may fall behind (see above). */
export class WatchQueue {
  /** While the reader is behind: the latest line of each build not yet written, in the order they first waited. */
  private readonly waiting = new Map<string, WatchLine>();
  /** Builds the reader has been told of (a line written that was not `gone`). */
  private readonly told = new Set<string>();
  private behind = false;
  private coalesced = 0;

  constructor(
    private readonly sink: LineSink,
    private readonly json: boolean,
  ) {}

  put(line: WatchLine): void {
    const tag = line.tag ?? '';
    if (!this.behind) {
      this.send(line);
      return;
    }
    const before = this.waiting.get(tag);
    if (before === undefined) {
      this.waiting.set(tag, line);
      return;
    }
    this.coalesced++;
    const merged = merge(before, line, this.told.has(tag));
    if (merged === undefined) this.waiting.delete(tag);
    else this.waiting.set(tag, merged);
  }

  private send(line: WatchLine): void {
    if (line.tag !== undefined) {
      if (line.event === 'gone') this.told.delete(line.tag);
      else this.told.add(line.tag);
    }
    if (!this.sink.write(this.json ? `${jsonText(line)}\n` : textOf(line))) {
      this.behind = true;
      this.sink.once('drain', () => this.catchUp());
    }
  }

  /** The reader took what was written: say how much was coalesced, then the latest lines, as long as it keeps up. */
  private catchUp(): void {
    this.behind = false;
    if (this.coalesced > 0) {
      const count = this.coalesced;
      this.coalesced = 0;
      this.send({ time: new Date().toISOString(), event: 'coalesced', count });
    }
    for (const [tag, line] of this.waiting) {
      if (this.behind) return;
      this.waiting.delete(tag);
      this.send(line);
    }
  }
}

/**
 * Two lines of one build the reader has not seen yet, as one: the newer, still a `snapshot` if the
 * older was (it is the reader's first sight of the build). A build the reader was never told of
 * that is gone again leaves nothing.
 */
function merge(older: WatchLine, newer: WatchLine, told: boolean): WatchLine | undefined {
  if (newer.event === 'gone') return told ? newer : undefined;
  return older.event === 'snapshot' ? { ...newer, event: 'snapshot' } : newer;
}
