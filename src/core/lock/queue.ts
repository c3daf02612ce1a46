/**
 * The line in front of an area's lock: those who wait for it enter in the order they came, across
 * processes and hosts sharing the static directory.
 *
 * `<static>/.devserver-staging/queue/<key>/<number>` holds one ticket per waiter. A waiter reads
 * the highest number there and creates the next one with `O_EXCL` (atomic on local filesystems and
 * NFS; on EEXIST it takes the number after), writes who it is into it (a record like a holder's)
 * and sets its mtime every refresh interval, as a holder does its lock's. It tries the lock only
 * while no live ticket is numbered below its own, and removes its ticket once it holds the lock
 * or gives up. Tickets of waiters that died are judged much as locks are (a dead pid on this
 * machine at once, a stale mtime elsewhere, an unreadable ticket live until its mtime is stale),
 * and a waiter also judges every ticket by what it saw itself: one it has watched unchanged for
 * the threshold is stale, whatever its mtime or record claim (tickets.ts). Stale tickets are
 * removed by whoever finds them. `clearLine` removes a whole line on a user's word, recorded in
 * the audit log first (lineView.ts); where the line is and how it is opened, lineDirs.ts. Here: one
 * waiter's place in the line (`Line`).
 *
 * The lock remains the only mutual exclusion: the line only decides who tries, so a fault here can
 * cost fairness, never exclusion.
 */
import * as fs from 'fs';
import * as path from 'path';
import { fdPath, touchRecord, type Dir } from '../fs/anchored';
import { fsClockSkew } from '../fs/clock';
import { StagingError, errnoCode } from '../base/errors';
import { makeHolder } from '../base/holder';
import { asyncIo, ioFor, isLocalDevice } from '../fs/io';
import { ATTR_CACHE_MS } from './judge';
import { LOCK_NAME, areaKey } from '../base/protocol';
import { pause } from '../base/slices';
import { type Area } from '../fs/tags';
import { closeQueue, dropCachedListing, nobodyWaitsAnywhere, openQueue, openedAreaPath, queuePath, readdir, type QueueDirs } from './lineDirs';
import { MAX_TICKET, TICKET_NAME, type RecordCache, type Ticket, clearLitter, judgeTicket, numbered, readTickets, removeTicket, staleWhateverItSays, ticketName } from './tickets';
import type { QueueEntry, Timing } from '../base/types';
import { Alarm } from './wake';

export { describeWaiter, parseWaiter } from './tickets';

/** Waiting on a network filesystem, where another host's release makes no event here. */
const REMOTE_POLL_MS = 250;
/** At the front of the line (and second in it): a holder or a first in line that dies makes no event. */
const FRONT_POLL_MS = 250;
/** Behind others on a local filesystem: every change makes an event; in case one is missed. */
const SAFETY_POLL_MS = 2_000;
/** After a release, how long those further back in line wait before they look whether all ahead of them died. */
const PUT_OFF_MS = 100;

/** Called with this waiter's place in line (1: next) and how many wait, each time either changes. */
export type OnQueue = (position: number, waiting: number) => void;

export interface LineOptions {
  clientId?: string;
  purpose?: string;
  onQueue?: OnQueue;
  /** Whether the caller will wait if it cannot enter at once (then it takes a place as soon as it sees a line). */
  waits?: boolean;
  /** Hears what the line could not do without failing the wait (a ticket given up). Default: `process.emitWarning`. */
  warn?: (warning: StagingError) => void;
}

const defaultWarn = (warning: StagingError): void => process.emitWarning(warning.message, { type: 'DevserverStagingWarning', code: 'DEVSERVER_STAGING_QUEUE' });

/**
 * One caller's place in the line for one area, from its first look at the line until it holds the
 * lock or gives up. Without waiting it only looks (one lstat when nobody waits); a waiter joins,
 * keeps its ticket fresh, and sleeps until something it waits on changes.
 */
export class Line {
  /** The queue's directories, kept open while this caller has a ticket there. */
  private dirs: QueueDirs | undefined;
  private ticket: { name: string; number: number; ino: number } | undefined;
  /** Why this caller cannot take a place (the queue's directory cannot be made or written): it then waits without one. */
  private unusable: string | undefined;
  private readonly records: RecordCache = new Map();
  /** Each ticket this caller has seen, as it was first seen in its present form, and when (this process's clock). */
  private readonly watched = new Map<string, { identity: string; since: number; look: number }>();
  private looks = 0;
  private readonly alarm = new Alarm();
  private refreshAt = 0;
  private reported = '';
  /** The live tickets ahead of this caller's at its last look: whose departure can make it next. */
  private aheadNames = new Set<string>();
  /** A look put off after a release, for a caller further back (see `onLockChange`). */
  private putOff: NodeJS.Timeout | undefined;
  private areaLocal: boolean | undefined;
  /** Made once needed: nothing of it is computed on the way to a lock nobody waits for. */
  private keyMemo: string | undefined;

  constructor(
    private readonly area: Area,
    private areaDir: Dir,
    private readonly timing: Timing,
    private readonly options: LineOptions,
  ) {}

  /** The queue's key (see `areaKey`), from where the opened area is. */
  private get key(): string {
    this.keyMemo ??= areaKey(openedAreaPath(this.area, this.areaDir));
    return this.keyMemo;
  }

  /** Where the queue is, for messages. */
  get shown(): string {
    return queuePath(this.area.staticDir, this.key);
  }

  /** The area was opened anew (it was removed and made again while this caller waited). */
  moveTo(areaDir: Dir): void {
    this.areaDir = areaDir;
    this.areaLocal = undefined;
    this.alarm.unwatch('area');
  }

  /** Whether anyone may wait for this area: one lstat while nobody waits for any area. */
  private async anyoneWaits(): Promise<boolean> {
    const { io, realStaticDir } = this.area;
    if (await nobodyWaitsAnywhere(io, realStaticDir)) return false;
    return (await io.lstatOrNull(queuePath(realStaticDir, this.key)).catch(() => null)) !== null;
  }

  /**
   * The live waiters ahead of this caller (all of them while it has no ticket), after removing
   * the tickets of those that died. Empty when nobody waits: then the queue costs one lstat.
   */
  async ahead(): Promise<QueueEntry[]> {
    if (this.ticket === undefined) {
      if (!(await this.anyoneWaits())) return [];
      // Others wait: one who means to wait too takes its place now, as it arrives, and looks from there.
      if (this.options.waits === true) await this.join();
    }
    let q = this.dirs;
    if (q === undefined) {
      try {
        q = await openQueue(this.area.realStaticDir, this.key, false, this.area.io.sync);
      } catch {
        return []; // not a directory of ours: nobody can wait there
      }
    }
    try {
      const live = await this.look(q);
      if (this.ticket === undefined) return live;
      const mine = this.ticket.number;
      const ahead = live.filter((e) => e.ticket < mine);
      this.aheadNames = new Set(ahead.map((e) => ticketName(e.ticket)));
      this.report(ahead.length + 1, live.length);
      return ahead;
    } finally {
      if (q !== this.dirs) closeQueue(q);
    }
  }

  /** Reads and judges the line, removes dead tickets and litter, and notices if ours was taken away. */
  private async look(q: QueueDirs): Promise<QueueEntry[]> {
    const io = q.local ? this.area.io : asyncIo;
    await dropCachedListing(q);
    const lookedAt = Date.now();
    const nowFs = lookedAt + (await fsClockSkew(this.area.realStaticDir));
    let read;
    try {
      read = await readTickets(io, q.dir, this.shown, { records: this.records, skipRecord: (st) => staleWhateverItSays(st.mtimeMs, this.timing, nowFs) });
    } catch {
      return []; // the directory was removed meanwhile (its last waiter left): nobody waits
    }
    this.watchTickets(read.tickets, lookedAt);
    const live: QueueEntry[] = [];
    let ours = false;
    for (const t of read.tickets) {
      if (this.ticket !== undefined && t.name === this.ticket.name && t.ino === this.ticket.ino) {
        ours = true;
        live.push({ ticket: t.number, state: 'waiting', heartbeatAgeMs: 0 });
        continue;
      }
      const since = this.watched.get(t.name)?.since;
      const e = judgeTicket(t, this.timing, nowFs, since === undefined ? undefined : lookedAt - since);
      if (e.state === 'waiting' || !(await this.reallyStale(q, t, e, lookedAt))) {
        live.push(e);
        continue;
      }
      const turn = pause();
      if (turn !== undefined) await turn;
      await removeTicket(io, q.dir, t);
    }
    if (this.ticket !== undefined && !ours) this.lostTicket();
    await clearLitter(io, q.dir, read.others, nowFs);
    // Nobody left, and this caller has not joined: the empty directory goes, so that the next
    // acquire pays one lstat again.
    if (live.length === 0 && this.ticket === undefined) await io.rmdir(q.queue.at(this.key)).catch(() => undefined);
    return numbered(live);
  }

  /**
   * Notes, by this process's own clock, when each ticket was first seen as it is now (inode, size,
   * times): a ticket unchanged for longer than its threshold is stale whatever its mtime says.
   */
  private watchTickets(tickets: readonly Ticket[], lookedAt: number): void {
    const look = ++this.looks;
    let watching = 0;
    for (const t of tickets) {
      if (t.unread === true) continue; // stale by its age: nothing to watch
      const seen = this.watched.get(t.name);
      if (seen === undefined || seen.identity !== t.identity) this.watched.set(t.name, { identity: t.identity, since: lookedAt, look });
      else seen.look = look;
      watching++;
    }
    // Forget what is gone.
    if (this.watched.size > watching) for (const [name, seen] of this.watched) if (seen.look !== look) this.watched.delete(name);
  }

  /**
   * A ticket judged stale by its mtime, on a filesystem whose clients cache attributes, is looked
   * at again past the cache before it is removed (as a lock is, see judge.ts): its waiter may have
   * refreshed it through another client.
   */
  private async reallyStale(q: QueueDirs, t: Ticket, e: QueueEntry, lookedAt: number): Promise<boolean> {
    if (!q.caching || e.waiterAlive === false) return true;
    await dropCachedListing(q);
    const wait = lookedAt + ATTR_CACHE_MS - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    await fs.promises.readdir(q.dir.at('.')).catch(() => undefined);
    const st = await fs.promises.lstat(q.dir.at(t.name)).catch(() => null);
    return st === null || (st.ino === t.ino && st.mtimeMs === t.mtimeMs);
  }

  private lostTicket(): void {
    // Judged dead by another (this process stalled past the stale threshold): take a new place.
    this.ticket = undefined;
    if (this.dirs !== undefined) closeQueue(this.dirs);
    this.dirs = undefined;
    this.alarm.unwatch('queue');
  }

  private report(position: number, waiting: number): void {
    const now = `${position}/${waiting}`;
    if (now === this.reported || this.options.onQueue === undefined) return;
    this.reported = now;
    try {
      this.options.onQueue(position, waiting);
    } catch {
      /* a caller's display must not break its wait */
    }
  }

  /**
   * Takes a ticket at the end of the line, unless this caller has one, and watches what it waits
   * on. True when either is new: then the caller looks again before it sleeps, since what changed
   * before the watch began made no event. Where the queue cannot be used (its directory cannot be
   * made or written), the caller waits without a place: the lock still excludes.
   */
  async join(): Promise<boolean> {
    const had = this.ticket;
    await this.take();
    return this.watch() || this.ticket !== had;
  }

  private async take(): Promise<void> {
    for (let attempt = 0; this.ticket === undefined && this.unusable === undefined && attempt < 10; attempt++) {
      if (this.dirs === undefined) {
        try {
          this.dirs = await openQueue(this.area.realStaticDir, this.key, true, this.area.io.sync);
        } catch (err) {
          this.unusable = err instanceof Error ? err.message : String(err);
          return;
        }
      }
      const q = this.dirs;
      const io = q.local ? this.area.io : asyncIo;
      await dropCachedListing(q);
      let names: string[];
      try {
        names = await readdir(io, q.dir);
      } catch {
        this.lostTicket(); // removed by its last waiter meanwhile: open it anew
        continue;
      }
      let highest = 0;
      for (const name of names) if (TICKET_NAME.test(name)) highest = Math.max(highest, Number(name));
      let n = 1 + highest;
      const skew = await fsClockSkew(this.area.realStaticDir);
      const holder = makeHolder({ staleMs: this.timing.staleMs, refreshMs: this.timing.refreshMs, acquiredAtMs: Date.now() + skew, ...this.who() });
      const { acquiredAt, fence: _fence, ...rest } = holder;
      const record = `${JSON.stringify({ ...rest, queuedAt: acquiredAt })}\n`;
      for (; n <= MAX_TICKET; n++) {
        const name = ticketName(n);
        try {
          await io.writeNewFile(q.dir.at(name), record, 0o644);
        } catch (err) {
          const code = errnoCode(err);
          if (code === 'EEXIST') continue; // another took that number first: the next
          if (code === 'ENOENT') break; // the directory was removed by its last waiter: open it anew
          this.unusable = err instanceof Error ? err.message : String(err);
          return;
        }
        const st = await io.lstatOrNull(q.dir.at(name)).catch(() => null);
        if (st !== null) this.ticket = { name, number: n, ino: st.ino };
        this.refreshAt = Date.now() + this.timing.refreshMs;
        break;
      }
      if (this.ticket === undefined && n <= MAX_TICKET) this.lostTicket();
      // Numbers run out only behind a planted ticket of the highest number: wait until it is stale and gone.
      if (n > MAX_TICKET) return;
    }
  }

  private who(): { clientId?: string; purpose?: string } {
    return {
      ...(this.options.clientId !== undefined ? { clientId: this.options.clientId } : {}),
      ...(this.options.purpose !== undefined ? { purpose: this.options.purpose } : {}),
    };
  }

  /** Watches the area's lock entry and the line (where not yet); true when a watch began. */
  private watch(): boolean {
    const fdOf = (d: Dir): string => fdPath(d.fd) ?? d.at('.');
    let began = false;
    if (!this.alarm.watching('area')) began = this.alarm.watch('area', fdOf(this.areaDir), (name) => name === LOCK_NAME && this.onLockChange()) || began;
    if (this.dirs !== undefined && !this.alarm.watching('queue')) began = this.alarm.watch('queue', fdOf(this.dirs.dir), (name) => this.onLineChange(name)) || began;
    return began;
  }

  /**
   * A change of the lock entry: news only when the lock is gone (a lock taken, or its heartbeat,
   * is not), and then to the first in line and the one behind it (who takes over if the first
   * died). Those further back look only if the lock is still free a moment later: then all ahead
   * of them may be dead. So a release wakes two waiters, not every one.
   */
  private onLockChange(): boolean {
    if (!this.lockGone()) return false;
    if (this.ticket === undefined || this.aheadNames.size <= 1) return true;
    if (this.putOff === undefined) {
      this.putOff = setTimeout(() => {
        this.putOff = undefined;
        if (this.lockGone()) this.alarm.ring();
      }, PUT_OFF_MS);
      this.putOff.unref();
    }
    return false;
  }

  /**
   * Whether the lock entry is gone (released): only then is a change of it news to a waiter. A
   * lock taken, or its heartbeat, is not. One lstat on a local filesystem; elsewhere, wake.
   */
  private lockGone(): boolean {
    if (this.areaLocal !== true) return true;
    try {
      return fs.lstatSync(this.areaDir.at(LOCK_NAME), { throwIfNoEntry: false }) === undefined;
    } catch {
      return true;
    }
  }

  /**
   * A change in the line: news when it can make this caller the next (the last one known ahead of
   * it left), when it shows the caller its place (`onQueue`: any departure ahead), when it concerns
   * its own ticket, or when it is new ahead of it. Joiners behind it are not.
   */
  private onLineChange(name: string): boolean {
    if (!TICKET_NAME.test(name)) return false;
    if (this.ticket === undefined || name === this.ticket.name) return true;
    if (Number(name) > this.ticket.number) return false;
    if (!this.aheadNames.delete(name)) return true;
    return this.aheadNames.size === 0 || this.options.onQueue !== undefined;
  }

  /**
   * Sets the ticket's times, its heartbeat, through a descriptor of that very ticket (never by
   * path: something renamed into its place in between is never touched). A ticket taken away is
   * noticed here or at the next look. One that has another name now (a hard link, perhaps outside)
   * is given up, said to `warn`, and replaced by a new place at the end of the line.
   */
  private async refresh(): Promise<void> {
    const t = this.ticket;
    const q = this.dirs;
    this.refreshAt = Date.now() + this.timing.refreshMs;
    if (t === undefined || q === undefined) return;
    const now = new Date(Date.now() + (await fsClockSkew(this.area.realStaticDir)));
    let outcome;
    try {
      outcome = await touchRecord(q.dir.at(t.name), path.join(this.shown, t.name), t.ino, now, q.local && this.area.io.sync);
    } catch (err) {
      if (!(err instanceof StagingError)) return; // not touched this time (an I/O error): the next refresh tries again
      this.tell(new StagingError('EIO', `Gave up a place in the line: ${err.message}`, { path: path.join(this.shown, t.name), cause: err }));
      const io = q.local ? this.area.io : asyncIo;
      // Our name for it goes (the file stays under its other names); the next look takes a new place.
      const st = await io.lstatOrNull(q.dir.at(t.name)).catch(() => null);
      if (st !== null && st.ino === t.ino) await io.unlink(q.dir.at(t.name)).catch(() => undefined);
      outcome = 'replaced';
    }
    if (outcome === 'replaced') this.lostTicket();
  }

  private tell(warning: StagingError): void {
    try {
      (this.options.warn ?? defaultWarn)(warning);
    } catch {
      /* a listener that throws must not break the wait */
    }
  }

  /**
   * Sleeps until something this caller waits on changes (the area's lock entry, the line), a poll
   * interval passes, the deadline comes, or `signal` aborts (rejecting with its reason).
   * `atFront`: nobody live is ahead, so it is the lock that stands in the way.
   */
  async wait(deadline: number, signal: AbortSignal | undefined, atFront: boolean): Promise<void> {
    this.areaLocal ??= await ioFor(this.areaDir.at('.'), this.areaDir.dev).then(() => isLocalDevice(this.areaDir.dev));
    this.watch();
    const local = this.areaLocal && (this.dirs?.local ?? true);
    // The second in line looks as often as the first: if the first dies, no event says so.
    let ms = !local ? REMOTE_POLL_MS : atFront || this.ticket === undefined || this.aheadNames.size <= 1 ? FRONT_POLL_MS : SAFETY_POLL_MS;
    if (this.ticket !== undefined) ms = Math.min(ms, this.refreshAt - Date.now());
    await this.alarm.sleep(Math.min(ms, deadline - Date.now()), signal);
    if (this.ticket !== undefined && Date.now() >= this.refreshAt) await this.refresh();
  }

  /** Leaves the line: removes this caller's ticket (the lock is taken, or it gave up). Never throws. */
  async leave(): Promise<void> {
    this.alarm.close();
    if (this.putOff !== undefined) clearTimeout(this.putOff);
    const t = this.ticket;
    const q = this.dirs;
    this.ticket = undefined;
    this.dirs = undefined;
    if (q === undefined) return;
    try {
      if (t !== undefined) {
        const io = q.local ? this.area.io : asyncIo;
        const st = await io.lstatOrNull(q.dir.at(t.name)).catch(() => null);
        // Only our own: if ours was judged dead and its number taken again, that one is another's.
        if (st !== null && st.ino === t.ino) await io.unlink(q.dir.at(t.name)).catch(() => undefined);
        // The last to leave removes the directory (it fails while others wait), so that an
        // acquire with nobody waiting pays one lstat.
        await io.rmdir(q.queue.at(this.key)).catch(() => undefined);
      }
    } finally {
      closeQueue(q);
    }
  }
}
