/**
 * What the extension knows of the lock states on disk: the listings the tree has asked for, kept
 * current by the watcher and two timers, and a change event that names only the areas whose
 * state (or set of children) really changed. The decisions themselves are the core's.
 */
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import { LOCK_NAME, MANIFEST_FILE, inspect, naturalOrder, lockIdOf, isHolderAlive, isOnThisMachine, isProtocolName, list, type ListEntry, type LockInfo, type Timing } from './core';
import type { Log } from './log';
import { DirectoryWatcher, type WatchEvent } from './watcher';

/** An area by its static directory and tag; the tag '' is the static directory itself. */
export interface AreaRef {
  staticDir: string;
  tag: string;
}

export interface StateChange extends AreaRef {
  /** `state`: the area's own lock changed. `children`: its subdirectories or files came or went. */
  what: 'state' | 'children';
}

/** A file in a build: what the tree shows below the build's subdirectories. */
export interface Artifact {
  name: string;
  path: string;
  size: number;
}

export const keyOf = (staticDir: string, tag: string): string => `${staticDir}\0${tag}`;

/** What a tree item shows of a lock; anything else (heartbeat age) may change silently. */
function stateKey(e: ListEntry): string {
  return [e.state, e.holder?.token ?? '', e.holder?.clientId ?? '', e.legacy?.pidAndHash ?? '', e.exists].join('\0');
}

/** What an area needs after events: a look at its lock's identity, a judgement, a listing. */
interface Pending extends AreaRef {
  probe: boolean;
  lock: boolean;
  children: boolean;
}

/** Lock events in one directory within this window count as one. */
const SETTLE_MS = 15;
/**
 * Files coming and going (a build being staged) are gathered for longer: each listing reads every
 * file's size, and a staging of thousands of files must not turn into thousands of listings.
 */
const SETTLE_LISTING_MS = 200;
/** How often holders on this machine are checked for having died. */
const LIVENESS_MS = 1_000;

export class LockStates implements vscode.Disposable {
  private readonly _onDidChange = new vscode.EventEmitter<StateChange[]>();
  readonly onDidChange = this._onDidChange.event;
  /** Fires when a directory was listed for the first time: more areas are known. */
  private readonly _onDidList = new vscode.EventEmitter<AreaRef>();
  readonly onDidList = this._onDidList.event;

  private readonly listings = new Map<string, ListEntry[]>();
  private readonly files = new Map<string, Artifact[]>();
  /** Directories whose listing has begun: events from then on may change it. */
  private readonly listed = new Set<string>();
  private readonly entries = new Map<string, { entry: ListEntry; at: number }>();
  private readonly dirs = new Map<string, AreaRef>();
  private readonly pending = new Map<string, Pending>();
  private readonly queues = new Map<string, Promise<unknown>>();
  private readonly watcher: DirectoryWatcher;
  private settleTimer: NodeJS.Timeout | undefined;
  private listingTimer: NodeJS.Timeout | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private staleTimer: NodeJS.Timeout | undefined;
  private livenessTimer: NodeJS.Timeout | undefined;
  private disposed = false;
  /** Disk work done so far: directory listings and single-lock judgements. */
  readonly work = { listings: 0, inspections: 0, probes: 0 };

  constructor(
    private timing: Timing,
    private readonly log: Log,
  ) {
    this.watcher = new DirectoryWatcher(
      (e) => this.onWatchEvent(e),
      (dir, err) => log.warn(`Cannot watch ${dir} (${String(err)}); its lock states update on refresh only.`),
    );
  }

  /** The subdirectories of an area (or of the static directory, for tag ''), listed once and then kept current. */
  children(staticDir: string, tag: string): Promise<ListEntry[]> {
    const cached = this.listings.get(keyOf(staticDir, tag));
    if (cached !== undefined) return Promise.resolve(cached);
    return this.serial(keyOf(staticDir, tag), () => this.relist(staticDir, tag, false));
  }

  /** The files of an area listed with `children`: its artifacts. */
  artifacts(staticDir: string, tag: string): Artifact[] {
    return this.files.get(keyOf(staticDir, tag)) ?? [];
  }

  entry(staticDir: string, tag: string): ListEntry | undefined {
    return this.entries.get(keyOf(staticDir, tag))?.entry;
  }

  /** Lists each static directory and the level below it, so that their builds are known. */
  scan(staticDirs: readonly string[]): void {
    for (const d of staticDirs) void this.children(d, '').catch(() => undefined);
  }

  /** A fresh judgement of one area, for a tooltip: ages as of now, without touching what is known. */
  judge(staticDir: string, tag: string): Promise<LockInfo> {
    return inspect(staticDir, tag, this.timing);
  }

  /** Every area listed so far. */
  known(): ListEntry[] {
    return [...this.entries.values()].map((v) => v.entry);
  }

  /** Every known area in a state other than free. */
  locked(): ListEntry[] {
    return this.known().filter((e) => e.state !== 'free');
  }

  /**
   * Lists every shown directory again every `ms` (0: never). Network filesystems deliver no
   * file events; only what changed is reported, as for events.
   */
  setPolling(ms: number): void {
    clearInterval(this.pollTimer);
    this.pollTimer = undefined;
    if (ms > 0) {
      this.pollTimer = setInterval(() => {
        for (const k of this.listings.keys()) {
          const [staticDir, tag] = k.split('\0') as [string, string];
          this.mark({ staticDir, tag }, { children: true });
        }
      }, ms);
    }
  }

  /** Forgets everything, as after a change of settings or an explicit refresh. */
  reset(timing?: Timing): void {
    if (timing !== undefined) this.timing = timing;
    this.listings.clear();
    this.files.clear();
    this.listed.clear();
    this.entries.clear();
    this.dirs.clear();
    this.pending.clear();
    this.watcher.dispose();
    this.scheduleTimers();
  }


  /** Runs one job at a time per key, so that two listings of one directory never cross. */
  private serial<T>(key: string, job: () => Promise<T>): Promise<T> {
    const prev = this.queues.get(key) ?? Promise.resolve();
    const next = prev.then(job, job);
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    this.queues.set(key, settled);
    void settled.then(() => {
      if (this.queues.get(key) === settled) this.queues.delete(key);
    });
    return next;
  }

  private async relist(staticDir: string, tag: string, notify: boolean): Promise<ListEntry[]> {
    const key = keyOf(staticDir, tag);
    const dir = tag === '' ? staticDir : path.join(staticDir, tag);
    // Watch before listing: a change between the two is then seen rather than lost.
    this.listed.add(key);
    this.watchDir(dir, { staticDir, tag });
    this.work.listings++;
    const [fresh, files] = await Promise.all([list(staticDir, tag, this.timing), tag === '' ? [] : readArtifacts(dir)]);
    if (this.disposed) return fresh;
    const old = this.listings.get(key);
    const oldFiles = this.files.get(key);
    this.listings.set(key, fresh);
    this.files.set(key, files);
    const now = Date.now();
    for (const e of fresh) {
      this.entries.set(keyOf(staticDir, e.tag), { entry: e, at: now });
      this.watchDir(e.dir, { staticDir, tag: e.tag });
    }
    const changes: StateChange[] = [];
    if (old !== undefined) {
      const names = new Set(fresh.map((e) => e.name));
      const gone = old.filter((e) => !names.has(e.name));
      for (const e of gone) this.forget(staticDir, e.tag, e.dir);
      // A new directory's watch starts after the listing read it: a lock taken in between would
      // be missed, so look at its lock once more.
      const known = new Set(old.map((e) => e.name));
      for (const e of fresh) if (!known.has(e.name)) this.mark({ staticDir, tag: e.tag }, { lock: true });
      if (gone.length > 0 || old.length !== fresh.length || filesKey(oldFiles ?? []) !== filesKey(files)) {
        changes.push({ staticDir, tag, what: 'children' });
      } else {
        const before = new Map(old.map((e) => [e.name, e]));
        for (const e of fresh) if (stateKey(before.get(e.name)!) !== stateKey(e)) changes.push({ staticDir, tag: e.tag, what: 'state' });
      }
    }
    this.scheduleTimers();
    if (notify && changes.length > 0) this._onDidChange.fire(changes);
    if (old === undefined) this._onDidList.fire({ staticDir, tag });
    // One level below a static directory are the boards; listing them too makes every build
    // known (and watched) before anyone expands a board, so the status bar can count them.
    if (tag === '') for (const e of fresh) if (!this.listings.has(keyOf(staticDir, e.tag))) void this.children(staticDir, e.tag).catch(() => undefined);
    return fresh;
  }

  /** Judges one area's lock again and reports it if its state changed. */
  private async recheck(staticDir: string, tag: string): Promise<void> {
    const key = keyOf(staticDir, tag);
    const known = this.entries.get(key);
    if (known === undefined) return;
    this.work.inspections++;
    const info = await inspect(staticDir, tag, this.timing).catch(() => undefined);
    if (this.disposed) return;
    if (info === undefined || !info.exists) {
      // Gone, or unreadable: the parent's listing decides what remains.
      await this.relist(staticDir, parentOf(tag), true).catch(() => undefined);
      return;
    }
    const entry: ListEntry = { name: known.entry.name, ...info };
    this.entries.set(key, { entry, at: Date.now() });
    const siblings = this.listings.get(keyOf(staticDir, parentOf(tag)));
    const i = siblings?.findIndex((e) => e.name === entry.name) ?? -1;
    if (siblings !== undefined && i >= 0) siblings[i] = entry;
    this.scheduleTimers();
    if (stateKey(known.entry) !== stateKey(entry)) this._onDidChange.fire([{ staticDir, tag, what: 'state' }]);
  }

  private watchDir(dir: string, ref: AreaRef): void {
    this.dirs.set(dir, ref);
    this.watcher.watch(dir);
  }

  private forget(staticDir: string, tag: string, dir: string): void {
    const prefix = keyOf(staticDir, tag);
    for (const k of [...this.entries.keys()]) if (k === prefix || k.startsWith(`${prefix}/`)) this.entries.delete(k);
    for (const k of [...this.listings.keys()]) if (k === prefix || k.startsWith(`${prefix}/`)) this.listings.delete(k);
    for (const k of [...this.files.keys()]) if (k === prefix || k.startsWith(`${prefix}/`)) this.files.delete(k);
    for (const k of [...this.listed]) if (k === prefix || k.startsWith(`${prefix}/`)) this.listed.delete(k);
    for (const d of [...this.dirs.keys()]) if (d === dir || d.startsWith(`${dir}/`)) this.dirs.delete(d);
    this.watcher.unwatchTree(dir);
  }

  private onWatchEvent(e: WatchEvent): void {
    const ref = this.dirs.get(e.dir);
    if (ref === undefined) return;
    if (e.name === LOCK_NAME) {
      // Taken, released, or only a heartbeat: inotify reports a directory's utimes like a
      // rename, so a look at the lock's identity tells which before any real work is done.
      if (ref.tag !== '') this.mark(ref, { probe: true });
      return;
    }
    // Writes into files (artifacts being staged) change no lock state and no listing.
    if (e.kind === 'change') return;
    if (e.name !== null && isProtocolName(e.name)) {
      // Claims of a takeover, legacy lock files: the lock itself may have changed.
      if (ref.tag !== '') this.mark(ref, { lock: true });
      return;
    }
    const listed = this.listed.has(keyOf(ref.staticDir, ref.tag));
    this.mark(ref, { lock: e.name === null && ref.tag !== '', children: listed || e.name === null });
  }

  private mark(ref: AreaRef, what: Partial<Pending>): void {
    if (what.lock !== true && what.children !== true && what.probe !== true) return;
    const key = keyOf(ref.staticDir, ref.tag);
    const p = this.pending.get(key) ?? { staticDir: ref.staticDir, tag: ref.tag, lock: false, children: false, probe: false };
    p.lock ||= what.lock === true;
    p.children ||= what.children === true;
    p.probe ||= what.probe === true;
    this.pending.set(key, p);
    if (this.waitsLonger(p)) this.listingTimer ??= setTimeout(() => this.flush(true), SETTLE_LISTING_MS);
    else this.settleTimer ??= setTimeout(() => this.flush(false), SETTLE_MS);
  }

  /**
   * Whether pending work may wait the longer settle time: only a listing of a directory with
   * files (a build being staged). A lock, or a board or static directory gaining a build, is news
   * to show at once.
   */
  private waitsLonger(p: Pending): boolean {
    return !p.lock && !p.probe && (this.files.get(keyOf(p.staticDir, p.tag))?.length ?? 0) > 0;
  }

  /** Runs what is pending: everything, or (`listingsOnly`) just what waits the longer time. */
  private flush(listingsOnly: boolean): void {
    if (listingsOnly) this.listingTimer = undefined;
    else this.settleTimer = undefined;
    const jobs = [...this.pending.values()].filter((p) => !listingsOnly || this.waitsLonger(p));
    for (const p of jobs) this.pending.delete(keyOf(p.staticDir, p.tag));
    for (const p of jobs) {
      void this.serial(keyOf(p.staticDir, p.tag), async () => {
        if (p.children && this.listed.has(keyOf(p.staticDir, p.tag))) await this.relist(p.staticDir, p.tag, true);
        if (p.lock || (p.probe && !(await this.sameLock(p)))) await this.recheck(p.staticDir, p.tag);
      }).catch((err: unknown) => this.log.warn(`Could not update ${p.tag || p.staticDir}: ${String(err)}`));
    }
  }

  /** Whether the lock on disk is still the one last judged, and that judgement cannot have aged. */
  private async sameLock(ref: AreaRef): Promise<boolean> {
    const key = keyOf(ref.staticDir, ref.tag);
    const known = this.entries.get(key);
    if (known === undefined) return true;
    const e = known.entry;
    // A stale lock that is touched again may have a live holder once more; a lock judged before
    // its holder had written the owner record has a holder to show now.
    if (e.state === 'stale' || (e.state === 'held' && e.holder === undefined)) return false;
    this.work.probes++;
    const st = await fs.promises.lstat(e.lockPath).catch(() => null);
    if ((st === null ? undefined : lockIdOf(st)) !== e.lockId) return false;
    // A heartbeat: the lock's expiry moves with it, and the stale timer has nothing to judge
    // again. The mtime is read as local time, which it is where inotify reports heartbeats (local
    // filesystems); the expiry never moves earlier than judged.
    const now = Date.now();
    if (st !== null && e.state === 'held' && st.mtimeMs > known.at - (e.heartbeatAgeMs ?? 0)) {
      e.heartbeatAgeMs = Math.max(0, now - st.mtimeMs);
      known.at = now;
    }
    return true;
  }

  /**
   * A lock turns stale without any file event: its holder stops refreshing it, or dies. Check
   * held locks when their heartbeat would expire, and holders on this machine every second
   * (a cheap look at /proc), and only while some lock is held.
   */
  private scheduleTimers(): void {
    if (this.disposed) return;
    clearTimeout(this.staleTimer);
    this.staleTimer = undefined;
    let next = Infinity;
    let local = false;
    for (const { entry, at } of this.entries.values()) {
      if (entry.state !== 'held') continue;
      next = Math.min(next, this.expiresAt(entry, at));
      if (entry.holder !== undefined && isOnThisMachine(entry.holder)) local = true;
    }
    if (next !== Infinity) {
      // A little past the expiry, so that the judge agrees it has passed.
      this.staleTimer = setTimeout(() => this.checkExpired(), Math.max(50, next - Date.now() + 100));
    }
    if (local && this.livenessTimer === undefined) {
      this.livenessTimer = setInterval(() => this.checkLiveness(), LIVENESS_MS);
    } else if (!local && this.livenessTimer !== undefined) {
      clearInterval(this.livenessTimer);
      this.livenessTimer = undefined;
    }
  }

  /** When a held lock, judged at `at`, turns stale unless a heartbeat comes first. */
  private expiresAt(entry: ListEntry, at: number): number {
    return at + Math.max(this.timing.staleMs, entry.holder?.staleMs ?? 0) - (entry.heartbeatAgeMs ?? 0);
  }

  private checkExpired(): void {
    const now = Date.now();
    let due = 0;
    for (const { entry, at } of [...this.entries.values()]) {
      if (entry.state !== 'held') continue;
      if (this.expiresAt(entry, at) <= now) {
        this.mark(entry, { lock: true });
        due++;
      }
    }
    // Each recheck schedules the next expiry itself.
    if (due === 0) this.scheduleTimers();
  }

  private checkLiveness(): void {
    for (const { entry } of this.entries.values()) {
      const h = entry.holder;
      if (entry.state === 'held' && h !== undefined && isOnThisMachine(h) && !isHolderAlive(h)) this.mark(entry, { lock: true });
    }
  }

  dispose(): void {
    this.disposed = true;
    clearTimeout(this.settleTimer);
    clearTimeout(this.listingTimer);
    clearInterval(this.pollTimer);
    clearTimeout(this.staleTimer);
    clearInterval(this.livenessTimer);
    this.watcher.dispose();
    this._onDidChange.dispose();
    this._onDidList.dispose();
  }
}

/** The files of a build directory, with sizes; the tool's own bookkeeping left out. */
async function readArtifacts(dir: string): Promise<Artifact[]> {
  const entries = await fs.promises.readdir(dir, { withFileTypes: true }).catch(() => []);
  const files = entries.filter((e) => !e.isDirectory() && !isProtocolName(e.name) && e.name !== MANIFEST_FILE);
  const sized = await Promise.all(
    files.map(async (e) => {
      const p = path.join(dir, e.name);
      const st = await fs.promises.stat(p).catch(() => undefined);
      // A link to a directory is a subdirectory, listed as such.
      return st?.isDirectory() === true ? undefined : { name: e.name, path: p, size: st?.size ?? 0 };
    }),
  );
  return sized.filter((a): a is Artifact => a !== undefined).sort((a, b) => naturalOrder.compare(a.name, b.name));
}

const parentOf = (tag: string): string => (path.posix.dirname(tag) === '.' ? '' : path.posix.dirname(tag));
const filesKey = (files: readonly Artifact[]): string => files.map((f) => `${f.name}\0${f.size}`).join('\0');
