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
 * the audit log first.
 *
 * The lock remains the only mutual exclusion: the line only decides who tries, so a fault here can
 * cost fairness, never exclusion.
 */
import * as fs from 'fs';
import * as path from 'path';
import { fdPath, isWithin, openBelow, openDir, settle, touchRecord, whereIs, type Dir } from '../fs/anchored';
import { recordFailure, recordIntent } from '../log/audit';
import { fsClockSkew } from '../fs/clock';
import { StagingError, errnoCode } from '../base/errors';
import { makeHolder, sideName } from '../base/holder';
import { asyncIo, cachesAttributes, ioFor, isLocalDevice, type Io } from '../fs/io';
import { ATTR_CACHE_MS } from './judge';
import { LOCK_NAME, META_DIR, areaKey, QUEUE_DIR, QUEUE_PROBE_PREFIX, clampTiming } from '../base/protocol';
import { pause } from '../base/slices';
import { resolveArea, type Area } from '../fs/tags';
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

/**
 * The area's path inside the static directory as the kernel places it, so that a tag reached
 * through a link queues with the tag it leads to; the tag itself when the area is not there (yet).
 */
async function areaPathOf(area: Area): Promise<string> {
  return areaPathAt(area, await fs.promises.realpath(area.dir).catch(() => undefined));
}

function areaPathAt(area: Area, real: string | undefined): string {
  if (real === undefined || real === area.realStaticDir || !isWithin(area.realStaticDir, real)) return area.tag;
  return path.relative(area.realStaticDir, real).split(path.sep).join('/');
}

/** The same for an area the caller opened: where the kernel places that very directory. */
function openedAreaPath(area: Area, opened: Dir): string {
  let real: string | undefined;
  try {
    real = whereIs(opened);
  } catch {
    real = undefined;
  }
  return areaPathAt(area, real);
}

/** Where an area's queue is, for messages (and for the cheap look whether anyone waits). */
function queuePath(staticDir: string, key: string): string {
  return path.join(staticDir, META_DIR, QUEUE_DIR, key);
}

/**
 * True when nobody waits for any area of the static directory: one lstat. A directory's link
 * count is 2 plus its subdirectories (on most filesystems; where it is not, false, and the area's
 * own queue is looked for), and each area's queue is removed by its last waiter.
 */
async function nobodyWaitsAnywhere(io: Io, realStaticDir: string): Promise<boolean> {
  const queues = await io.lstatOrNull(path.join(realStaticDir, META_DIR, QUEUE_DIR)).catch(() => null);
  return queues === null || (queues.isDirectory() && queues.nlink === 2);
}

/** The directory of the queue of `<staticDir>/<tag>`, whether or not anyone waits (it exists only while someone does). */
export async function queueDirOf(staticDir: string, tag: string): Promise<string> {
  const area = await resolveArea(staticDir, tag);
  return queuePath(area.staticDir, areaKey(await areaPathOf(area)));
}

/** Mode of the queue directories: readable by all, writable by whoever may write the static directory. */
function modeFor(staticDir: Dir): number {
  return 0o755 | (staticDir.mode & 0o022);
}

/** `sync` on a local filesystem (a few microseconds a call), else off the event loop's thread (see io.ts). */
function call<T>(sync: boolean, now: () => T, later: () => Promise<T>): Promise<T> {
  return sync ? settle(now) : later();
}

/**
 * Opens the directory `name` of ours in `parent`, making it where it is missing: with `mode`
 * exactly (whatever the umask), and then something else in its place (a link, a file, a FIFO:
 * the name is reserved for the tool) is removed, never followed. Without `mode`, as the umask
 * says, and anything else in its place is refused.
 */
async function ownDir(parent: Dir, name: string, sync: boolean, mode?: number): Promise<Dir> {
  const p = parent.at(name);
  for (let tries = 0; ; tries++) {
    try {
      return await openBelow(parent, name, sync);
    } catch (err) {
      const code = errnoCode(err);
      if (tries >= 3 || (code !== 'ENOENT' && (mode === undefined || (code !== 'ELOOP' && code !== 'ENOTDIR')))) throw err;
      if (code !== 'ENOENT') await call(sync, () => fs.unlinkSync(p), () => fs.promises.unlink(p));
    }
    try {
      await call(sync, () => void fs.mkdirSync(p, mode), () => fs.promises.mkdir(p, mode).then(() => undefined));
    } catch (err) {
      if (errnoCode(err) === 'EEXIST') continue;
      throw err;
    }
    const dir = await openBelow(parent, name, sync);
    // mkdir's mode went through the umask: set it exactly, on what was opened.
    if (mode !== undefined) await call(sync, () => fs.fchmodSync(dir.fd, mode), () => fs.promises.chmod(dir.at('.'), mode)).catch(() => undefined);
    return dir;
  }
}

interface QueueDirs {
  /** `.devserver-staging/queue`, to remove the area's directory once it is empty. */
  queue: Dir;
  /** `.devserver-staging/queue/<key>`: the tickets. */
  dir: Dir;
  /** Whether its filesystem is local (events for every change) and whether its clients cache listings. */
  local: boolean;
  caching: boolean;
}

/** Opens an area's queue through descriptors, never through a link; `create` makes what is missing. */
async function openQueue(realStaticDir: string, key: string, create: boolean, sync: boolean): Promise<QueueDirs> {
  const root = await openDir(realStaticDir, true, sync);
  const open: Dir[] = [];
  try {
    const meta = create ? await ownDir(root, META_DIR, sync) : await openBelow(root, META_DIR, sync);
    open.push(meta);
    const queue = create ? await ownDir(meta, QUEUE_DIR, sync, modeFor(root)) : await openBelow(meta, QUEUE_DIR, sync);
    open.push(queue);
    const dir = create ? await ownDir(queue, key, sync, modeFor(root)) : await openBelow(queue, key, sync);
    open.push(dir);
    await ioFor(dir.at('.'), dir.dev);
    const local = isLocalDevice(dir.dev);
    return { queue, dir, local, caching: !local && (await cachesAttributes(dir.at('.'))) };
  } catch (err) {
    for (const d of open) d.close();
    throw err;
  } finally {
    root.close();
    open[0]?.close(); // the bookkeeping directory was only a way through
  }
}

function closeQueue(q: QueueDirs): void {
  q.dir.close();
  q.queue.close();
}

function readdir(io: Io, dir: Dir): Promise<string[]> {
  return call(io.sync, () => fs.readdirSync(dir.at('.')), () => fs.promises.readdir(dir.at('.')));
}

/**
 * On a filesystem whose clients cache listings (sshfs keeps them 20 s), making and removing an
 * entry drops this client's cached listing of the queue, so the next read sees other hosts' tickets.
 */
async function dropCachedListing(q: QueueDirs): Promise<void> {
  if (!q.caching) return;
  const probe = q.dir.at(sideName(QUEUE_PROBE_PREFIX));
  await fs.promises.mkdir(probe).then(
    () => fs.promises.rmdir(probe),
    () => undefined,
  ).catch(() => undefined);
}

/**
 * The queue of an area, opened to read, with its key; undefined where nobody waits (or what is
 * there is not a directory of ours). One lstat while nobody waits anywhere.
 */
async function openExistingQueue(area: Area): Promise<{ q: QueueDirs; key: string } | undefined> {
  if (await nobodyWaitsAnywhere(area.io, area.realStaticDir)) return undefined;
  const key = areaKey(await areaPathOf(area));
  if ((await asyncIo.lstatOrNull(queuePath(area.realStaticDir, key)).catch(() => null)) === null) return undefined;
  try {
    return { q: await openQueue(area.realStaticDir, key, false, false), key };
  } catch {
    return undefined; // a link, a file: nobody can wait there
  }
}

/**
 * The queue of `<staticDir>/<tag>`: every ticket, lowest number first, the ones that count with
 * their `position` (1: next to enter), stale ones (a waiter gone, or no longer refreshing) without.
 * Only reads, and looks once: a ticket whose mtime is set in the future counts as waiting here
 * (`heartbeatAheadMs` says so). An area nobody waits for has an empty queue.
 */
export async function queueOf(staticDir: string, tag: string, options: Partial<Timing> = {}): Promise<QueueEntry[]> {
  const timing = clampTiming(options);
  const area = await resolveArea(staticDir, tag);
  const opened = await openExistingQueue(area);
  if (opened === undefined) return [];
  const { q, key } = opened;
  try {
    await dropCachedListing(q);
    const { tickets } = await readTickets(asyncIo, q.dir, queuePath(area.staticDir, key));
    const nowFs = Date.now() + (await fsClockSkew(area.realStaticDir));
    return numbered(tickets.map((t) => judgeTicket(t, timing, nowFs)));
  } finally {
    closeQueue(q);
  }
}

export interface ClearLineOptions extends Partial<Timing> {
  clientId?: string;
}

/** What `clearLine` did. */
export interface ClearedLine {
  /** The area's queue. */
  queue: string;
  /** The tickets removed, as judged just before; one that looked live was a waiter's that takes a new place at the end, if it still waits. */
  removed: QueueEntry[];
  /** Tickets that could not be removed (another user's, in a directory with the sticky bit). */
  kept: QueueEntry[];
}

/** Tickets an audit line names one by one; the rest are counted. */
const AUDIT_TICKETS = 100;

/**
 * Clears the line in front of `<staticDir>/<tag>`'s lock: removes every ticket in it (stale,
 * planted, unreadable, set in the future, or a live waiter's), each only if it is still the one
 * judged, and the litter beside them. Recorded in the audit log first, with what each ticket
 * looked like: if that cannot be written, nothing is removed (EIO). The lock is not touched.
 */
export async function clearLine(staticDir: string, tag: string, options: ClearLineOptions = {}): Promise<ClearedLine> {
  const timing = clampTiming(options);
  const area = await resolveArea(staticDir, tag);
  const opened = await openExistingQueue(area);
  if (opened === undefined) return { queue: queuePath(area.staticDir, areaKey(await areaPathOf(area))), removed: [], kept: [] };
  const { q, key } = opened;
  const shown = queuePath(area.staticDir, key);
  try {
    const io = q.local ? area.io : asyncIo;
    await dropCachedListing(q);
    const { tickets, others } = await readTickets(io, q.dir, shown);
    const nowFs = Date.now() + (await fsClockSkew(area.realStaticDir));
    const entries = numbered(tickets.map((t) => judgeTicket(t, timing, nowFs)));
    const removed: QueueEntry[] = [];
    const kept: QueueEntry[] = [];
    if (tickets.length > 0) {
      const entry = { action: 'clear-line', tag: area.tag, tickets: entries.slice(0, AUDIT_TICKETS), ticketCount: entries.length } as const;
      await recordIntent(area.staticDir, entry, options.clientId);
      for (const [i, t] of tickets.entries()) {
        const turn = pause();
        if (turn !== undefined) await turn;
        ((await removeTicket(io, q.dir, t)) ? removed : kept).push(entries[i]);
      }
      if (kept.length > 0) await recordFailure(area.staticDir, entry, `${kept.length} of ${tickets.length} tickets could not be removed`, options.clientId);
    }
    await clearLitter(io, q.dir, others, nowFs);
    await io.rmdir(q.queue.at(key)).catch(() => undefined);
    return { queue: shown, removed, kept };
  } finally {
    closeQueue(q);
  }
}

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
