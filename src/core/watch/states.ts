/**
 * What is known of the static directories as they change: one record per area (root, folder or
 * build), found by scanning every folder, kept current by a directory watcher (and by polling
 * where the filesystem sends no events) and two timers, with a change event that names only the
 * areas whose state or contents really changed. The extension's tree and `devserver-stage watch`
 * both follow a static directory through it; the decisions themselves are the judge's.
 */
import * as fs from 'fs';
import * as path from 'path';
import { readBuildDir } from '../build/browse';
import { errnoCode } from '../base/errors';
import { naturalOrder } from '../base/format';
import { isHolderAlive, isOnThisMachine } from '../base/holder';
import { inspect, list } from '../lock/inspect';
import { isLocalFilesystem } from '../fs/io';
import { lockIdOf } from '../lock/judge';
import { BUILD_MARKS, LOCK_NAME, MAX_TIMER_MS, isBookkeeping, isProtocolName, thresholdOf } from '../base/protocol';
import { fsPath } from '../base/rawNames';
import { sortNatural } from '../base/natural';
import { pause } from '../base/slices';
import { usage } from '../usage';
import type { ListEntry, LockInfo, Timing } from '../base/types';
import { Emitter, type Disposable } from './emitter';
import { isAtOrBelow, keyOf, parentTag, type AreaKind, type AreaRecord, type AreaRef, type Artifact, type Counts, type Owner } from './records';
import { MAX_SCANNED_FOLDERS, ScannedDirs, checkScanRoot, dirIdentity } from './scope';
import { inThreadWatcher, WATCH_THREAD_STOPPED, type WatchEvent, type Watcher, type WatcherFactory } from './watcher';

export interface StateChange extends AreaRef {
  /**
   * `state`: the area's own lock (or marks) changed. `children`: what is inside it came or went.
   * `usage`: a build's measured size or last use changed (only builds someone had measured).
   */
  what: 'state' | 'children' | 'usage';
}

/** Where the model reports what it could not do; the extension passes its log. */
export interface Warnings {
  warn(message: string): void;
}

/** What a tree item shows of a lock; anything else (heartbeat age) may change silently. */
function stateKey(e: ListEntry | undefined): string {
  if (e === undefined) return '';
  return [e.kind, e.state, e.holder?.token ?? '', e.holder?.clientId ?? '', e.legacy?.pidAndHash ?? '', e.exists].join('\0');
}

/** What an area needs after events: a look at its lock's identity, a judgement, a listing. */
interface Pending extends AreaRef {
  probe: boolean;
  lock: boolean;
  children: boolean;
}

/** The builds at or below a root or folder, by state: kept as records change, never counted again. */
interface Tally {
  builds: number;
  held: number;
  stale: number;
  legacy: number;
}

/** What one build counts for. */
function tallyOf(r: AreaRecord): Tally {
  const t: Tally = { builds: 1, held: 0, stale: 0, legacy: 0 };
  const state = r.lock?.state ?? 'free';
  if (state !== 'free') t[state] = 1;
  return t;
}

/** Entries of a listing taken in between two looks at the clock. */
const PER_CHECK = 64;

/** Lock events in one directory within this window count as one. */
const SETTLE_MS = 15;
/**
 * Files coming and going (a build being staged) are gathered for longer: each listing reads every
 * file's size, and a staging of thousands of files must not turn into thousands of listings.
 */
const SETTLE_LISTING_MS = 200;
/** Builds measured again one by one when fewer than this lack a measure; more, and their folder is walked once. */
const MEASURE_ONE_BY_ONE = 32;
/** Builds whose lock or files changed are measured again after this, together. */
const REMEASURE_MS = 250;
/** How often holders on this machine are checked for having died. */
const LIVENESS_MS = 1_000;
/**
 * Polling a static directory on a network filesystem, which sends no events for what other
 * machines do: often while something changed lately (a staging, a queue moving), less when idle,
 * so that a lock taken on another host shows within about two seconds either way.
 */
export const POLL_FAST_MS = 750;
export const POLL_IDLE_MS = 1_500;
/** How long after the last change polling stays fast. */
const RECENT_MS = 30_000;

export class LockStates implements Disposable {
  private readonly _onDidChange = new Emitter<StateChange[]>();
  readonly onDidChange = this._onDidChange.event;
  /** Fires when a directory was listed for the first time (more areas are known), or found to be one listed already. */
  private readonly _onDidList = new Emitter<AreaRef>();
  readonly onDidList = this._onDidList.event;

  private readonly records = new Map<string, AreaRecord>();
  /**
   * Builds whose lock is not free, and the tally of every root and folder: what the timers, the
   * counts and the status bar need, without a pass over every record on each event.
   */
  private readonly lockedSet = new Set<AreaRecord>();
  /** Builds a verification found damaged (`markDamaged`). */
  private readonly damagedSet = new Set<AreaRecord>();
  private readonly tallies = new Map<string, Tally>();
  /** Areas whose listing has begun: events from then on may change it. */
  private readonly listed = new Set<string>();
  private readonly pending = new Map<string, Pending>();
  private readonly queues = new Map<string, Promise<unknown>>();
  private readonly measuring = new Map<string, Promise<void>>();
  /** Measured builds whose lock or files changed since: measured again, each alone (`REMEASURE_MS`). */
  private readonly stale = new Map<string, AreaRecord>();
  private remeasureTimer: NodeJS.Timeout | undefined;
  private readonly watcher: Watcher<AreaRef>;
  /** Grows with every reset: a listing begun before one is dropped when it ends. */
  private generation = 0;
  /** Per static directory, the real directories its scan listed (each once, whatever links lead to it). */
  private readonly scanned = new Map<string, ScannedDirs>();
  /** Folders the scan did not list because their directory was listed as another tag: that tag. */
  private readonly duplicates = new Map<string, string>();
  /** Folders the scan found and is looking at (their identity) before listing them. */
  private readonly scanning = new Set<Promise<void>>();
  private roots: readonly string[] = [];
  private settleTimer: NodeJS.Timeout | undefined;
  private listingTimer: NodeJS.Timeout | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  /** Set by the user (`pollSeconds`): poll every root this often, whatever its filesystem. */
  private pollOverrideMs = 0;
  /** Roots on filesystems that send no events for other machines' changes. */
  private readonly networkRoots = new Set<string>();
  /** Whether anyone looks: a hidden view needs no polling. */
  private visible = true;
  private lastChangeAt = 0;
  private staleTimer: NodeJS.Timeout | undefined;
  private livenessTimer: NodeJS.Timeout | undefined;
  private disposed = false;
  /** Grows with every change: what is computed from the records (counts) is kept per version. */
  private version = 0;
  private readonly countCache = new Map<string, { version: number; ownerVersion: number; counts: Counts }>();
  /** Disk work done so far: directory listings and single-lock judgements. */
  readonly work = { listings: 0, inspections: 0, probes: 0 };

  /** `watcher`: where the watches are kept; in this thread unless told otherwise (threadWatcher.ts). */
  constructor(
    private timing: Timing,
    private readonly warnings: Warnings,
    { watcher = inThreadWatcher }: { watcher?: WatcherFactory } = {},
  ) {
    this.watcher = watcher<AreaRef>(
      (e) => this.onWatchEvent(e),
      (dir, err) =>
        warnings.warn(
          (err as { code?: unknown }).code === WATCH_THREAD_STOPPED ? (err as Error).message : `Cannot watch ${dir} (${String(err)}); its lock states update on refresh only.`,
        ),
    );
  }

  /**
   * Lists each static directory and every folder below it, so that every build is known (and
   * watched) before anyone expands anything: the status bar, the pickers and the filter need them.
   */
  scan(staticDirs: readonly string[]): void {
    this.roots = staticDirs;
    for (const d of staticDirs) {
      void isLocalFilesystem(d).then((local) => {
        if (this.disposed || !this.roots.includes(d)) return;
        if (local) this.networkRoots.delete(d);
        else this.networkRoots.add(d);
        this.schedulePoll();
      });
    }
    for (const d of staticDirs) {
      if (!this.records.has(keyOf(d, ''))) this.put({ staticDir: d, tag: '', kind: 'root', lock: undefined, judgedAt: Date.now() });
      void this.children(d, '').catch(() => undefined);
    }
  }

  /** Resolves once every listing begun so far (the scan of every folder included) has ended. */
  async settled(): Promise<void> {
    while (this.queues.size > 0 || this.scanning.size > 0) await Promise.all([...this.queues.values(), ...this.scanning]);
  }

  /** The areas directly inside a root or folder, listed once and then kept current. */
  async children(staticDir: string, tag: string): Promise<AreaRecord[]> {
    const key = keyOf(staticDir, tag);
    let r = this.records.get(key);
    if (r?.children === undefined) {
      await this.serial(key, () => this.relist(staticDir, tag, false));
      r = this.records.get(key);
    }
    return (r?.children ?? []).map((t) => this.records.get(keyOf(staticDir, t))).filter((c): c is AreaRecord => c !== undefined);
  }

  /** The files and artifact folders at the top of a build, listed once and then kept current. */
  async artifacts(staticDir: string, tag: string): Promise<Artifact[]> {
    const key = keyOf(staticDir, tag);
    let r = this.records.get(key);
    if (r?.artifacts === undefined) {
      await this.serial(key, () => this.relistBuild(staticDir, tag, false));
      r = this.records.get(key);
    }
    return r?.artifacts ?? [];
  }

  /** The contents of an artifact folder inside a build: read each time, never watched. */
  async artifactDir(staticDir: string, tag: string, rel: string): Promise<Artifact[]> {
    const build = this.records.get(keyOf(staticDir, tag));
    return readArtifacts(staticDir, tag, rel, build?.lock);
  }

  record(staticDir: string, tag: string): AreaRecord | undefined {
    return this.records.get(keyOf(staticDir, tag));
  }

  /** The last judgement of an area's lock, if it is known. */
  entry(staticDir: string, tag: string): ListEntry | undefined {
    return this.records.get(keyOf(staticDir, tag))?.lock;
  }

  /** A fresh judgement of one area, for a tooltip: ages as of now, without touching what is known. */
  judge(staticDir: string, tag: string): Promise<LockInfo> {
    return inspect(staticDir, tag, this.timing);
  }

  /** Every build known that passes `where`, in no particular order. */
  builds(where: (r: AreaRecord) => boolean = () => true): AreaRecord[] {
    const out: AreaRecord[] = [];
    for (const r of this.records.values()) if (r.kind === 'build' && where(r)) out.push(r);
    return out;
  }

  /** Every build known, in the static directories' order and natural tag order: for pickers. */
  sortedBuilds(): AreaRecord[] {
    const order = new Map(this.roots.map((d, i) => [d, i]));
    return this.builds().sort((a, b) => (order.get(a.staticDir) ?? 0) - (order.get(b.staticDir) ?? 0) || naturalOrder.compare(a.tag, b.tag));
  }

  /**
   * Every known build at or below an area (a folder, or a root for tag ''): a folder's are found
   * through the listings below it, not by a look at every record.
   */
  buildsUnder(staticDir: string, tag: string): AreaRecord[] {
    if (tag === '') return this.builds((r) => r.staticDir === staticDir);
    const out: AreaRecord[] = [];
    // A stack of its own, not recursion: how deep folders go is up to whoever makes them.
    const todo = [tag];
    for (let t = todo.pop(); t !== undefined; t = todo.pop()) {
      const r = this.records.get(keyOf(staticDir, t));
      if (r === undefined) continue;
      if (r.kind === 'build') out.push(r);
      // Reversed onto the stack, so that they come off in their order.
      else if (r.children !== undefined) for (let i = r.children.length - 1; i >= 0; i--) todo.push(r.children[i]);
    }
    return out;
  }

  /** Every known build whose lock is not free (held, stale or legacy). */
  lockedBuilds(): AreaRecord[] {
    return [...this.lockedSet];
  }

  /** Every known build a verification found damaged. */
  damagedBuilds(): AreaRecord[] {
    return [...this.damagedSet];
  }

  /**
   * The builds at or below an area counted by state. `mine` says which are this window's; they
   * are counted as mine and not as held. Only builds whose lock is not free and the areas in
   * `also` are asked: this window's locks and stagings whose lock the watcher has not seen yet.
   */
  counts(staticDir: string, tag: string, owner: Owner | ((r: AreaRecord) => boolean), also: Iterable<AreaRef> = []): Counts {
    const key = keyOf(staticDir, tag);
    const mine = typeof owner === 'function' ? owner : (r: AreaRecord): boolean => owner.has(r);
    const ownerVersion = typeof owner === 'function' ? -1 : owner.version;
    if (typeof owner !== 'function') also = [...also, ...owner.refs()];
    const cached = this.countCache.get(key);
    // A function says nothing of when its answers change: counted afresh each time.
    if (cached !== undefined && cached.version === this.version && ownerVersion >= 0 && cached.ownerVersion === ownerVersion) return cached.counts;
    const self = this.records.get(key);
    // A build counts itself; a root or folder, what its tally holds.
    const t = self?.kind === 'build' ? tallyOf(self) : this.tallies.get(key);
    const c: Counts = { builds: t?.builds ?? 0, held: t?.held ?? 0, stale: t?.stale ?? 0, legacy: t?.legacy ?? 0, mine: 0 };
    const claimed = new Set<AreaRecord>();
    const claim = (r: AreaRecord | undefined): void => {
      if (r === undefined || r.kind !== 'build' || r.staticDir !== staticDir || !isAtOrBelow(r.tag, tag) || claimed.has(r) || !mine(r)) return;
      claimed.add(r);
      c.mine++;
      const state = r.lock?.state;
      if (state === 'held' || state === 'stale' || state === 'legacy') c[state]--;
    };
    for (const r of this.lockedSet) claim(r);
    for (const ref of also) claim(this.records.get(keyOf(ref.staticDir, ref.tag)));
    this.countCache.set(key, { version: this.version, ownerVersion, counts: c });
    return c;
  }

  /** The counts over every static directory. */
  totals(mine: Owner | ((r: AreaRecord) => boolean), also: Iterable<AreaRef> = []): Counts {
    const total: Counts = { builds: 0, held: 0, stale: 0, legacy: 0, mine: 0 };
    const refs = [...also];
    for (const d of this.roots) {
      const c = this.counts(d, '', mine, refs);
      for (const k of Object.keys(total) as (keyof Counts)[]) total[k] += c[k];
    }
    return total;
  }

  /** Whether a root or folder has been listed (its counts are complete once all below it are). */
  isListed(staticDir: string, tag: string): boolean {
    return this.records.get(keyOf(staticDir, tag))?.children !== undefined;
  }

  /**
   * For a folder the scan left unlisted because it is a directory listed already (a link to it,
   * or to a folder above it): the tag it was listed as. Listed when someone asks for its children.
   */
  sameAs(staticDir: string, tag: string): string | undefined {
    return this.duplicates.get(keyOf(staticDir, tag));
  }

  /** Marks a build found damaged by a verification (`summary`), or whole again (undefined). */
  markDamaged(staticDir: string, tag: string, summary: string | undefined): void {
    const r = this.records.get(keyOf(staticDir, tag));
    if (r === undefined || r.damaged === summary) return;
    if (summary === undefined) {
      delete r.damaged;
      this.damagedSet.delete(r);
    } else {
      r.damaged = summary;
      this.damagedSet.add(r);
    }
    this.changed([{ staticDir, tag, what: 'state' }]);
  }

  /**
   * Measures size and last use of the builds at or below an area that have no measure yet (a walk
   * of their files): a few one by one, many by one walk of the area. The records say it, and a
   * change event names each build whose measure changed. Once measured, a build is measured again
   * on its own when its lock or its files change, and nothing else is.
   */
  measure(staticDir: string, tag: string): Promise<void> {
    const key = keyOf(staticDir, tag);
    const running = this.measuring.get(key);
    if (running !== undefined) return running;
    const job = (async () => {
      // After the scan: every folder's count comes before any walk of builds' files.
      await this.settled();
      const missing = this.buildsUnder(staticDir, tag).filter((r) => r.usage === undefined);
      if (missing.length === 0 || this.disposed) return;
      if (missing.length < MEASURE_ONE_BY_ONE) await this.measureEach(missing);
      // Asynchronously: a build of 100,000 files is walked while the view stays responsive.
      else this.changed(this.take(staticDir, await usage(staticDir, { ...this.timing, async: true, ...(tag === '' ? {} : { subpath: tag }) })));
    })().finally(() => this.measuring.delete(key));
    this.measuring.set(key, job);
    return job;
  }

  /** Measures builds one by one, and reports those whose measure changed. */
  private async measureEach(builds: readonly AreaRecord[]): Promise<void> {
    const changes: StateChange[] = [];
    for (const r of builds) {
      const measured = await usage(r.staticDir, { ...this.timing, async: true, subpath: r.tag }).catch(() => []);
      changes.push(...this.take(r.staticDir, measured));
    }
    this.changed(changes);
  }

  /** Puts measures into the records: the changes for those that differ from what was known. */
  private take(staticDir: string, measured: readonly { tag: string; bytes: number; lastUsedMs: number }[]): StateChange[] {
    if (this.disposed) return [];
    const changes: StateChange[] = [];
    for (const u of measured) {
      const r = this.records.get(keyOf(staticDir, u.tag));
      if (r === undefined || r.kind !== 'build' || (r.usage?.bytes === u.bytes && r.usage.lastUsedMs === u.lastUsedMs)) continue;
      r.usage = { bytes: u.bytes, lastUsedMs: u.lastUsedMs };
      changes.push({ staticDir, tag: u.tag, what: 'usage' });
    }
    return changes;
  }

  /**
   * A measured build whose lock changed hands may have been staged into, and one whose files
   * changed has: it is measured again (alone), keeping its last measure until then, so that its
   * row neither loses its size nor moves meanwhile.
   */
  private remeasure(r: AreaRecord): void {
    if (r.usage === undefined || this.disposed) return;
    this.stale.set(keyOf(r.staticDir, r.tag), r);
    this.remeasureTimer ??= setTimeout(() => {
      this.remeasureTimer = undefined;
      const due = [...this.stale.values()].filter((b) => this.records.get(keyOf(b.staticDir, b.tag)) === b);
      this.stale.clear();
      void this.measureEach(due).catch(() => undefined);
    }, REMEASURE_MS);
  }

  /**
   * Lists every listed directory again every `ms`, whatever the filesystem (0: only where it
   * sends no events, on its own schedule). Only what changed is reported, as for events.
   */
  setPolling(ms: number): void {
    this.pollOverrideMs = ms;
    this.schedulePoll();
  }

  /** Whether anyone looks at what is known: polling stops while nobody does. */
  setVisible(visible: boolean): void {
    if (this.visible === visible) return;
    this.visible = visible;
    this.schedulePoll();
  }

  /** How polling goes now: which roots, how often (0: not at all). */
  get polling(): { roots: string[]; intervalMs: number } {
    if (this.pollOverrideMs > 0) return { roots: [...this.roots], intervalMs: this.pollOverrideMs };
    const roots = this.roots.filter((d) => this.networkRoots.has(d));
    if (!this.visible || roots.length === 0) return { roots: [], intervalMs: 0 };
    return { roots, intervalMs: Date.now() - this.lastChangeAt < RECENT_MS ? POLL_FAST_MS : POLL_IDLE_MS };
  }

  private schedulePoll(): void {
    clearTimeout(this.pollTimer);
    this.pollTimer = undefined;
    if (this.disposed) return;
    const { roots, intervalMs } = this.polling;
    if (intervalMs === 0) return;
    this.pollTimer = setTimeout(() => {
      this.pollOnce(roots);
      this.schedulePoll();
    }, intervalMs);
  }

  /**
   * One round of polling: every directory listed so far is listed again, its children's locks
   * judged, and only what changed reported. Not a cheaper look at each directory's mtime first:
   * network clients cache attributes (sshfs for 20 s, NFS for 3 to 60 s by default), so a stamp
   * can stay as it was long after a lock came or went, while the lookups of a listing are
   * answered fresh far sooner.
   */
  private pollOnce(roots: readonly string[]): void {
    for (const k of this.listed) {
      const r = this.records.get(k);
      if (r !== undefined && roots.includes(r.staticDir)) this.mark(r, { children: true });
    }
  }

  /** Forgets everything and scans again, as after a change of settings or an explicit refresh. */
  reset(timing?: Timing, staticDirs: readonly string[] = this.roots): void {
    if (timing !== undefined) this.timing = timing;
    this.generation++;
    this.records.clear();
    this.lockedSet.clear();
    this.damagedSet.clear();
    this.tallies.clear();
    this.listed.clear();
    this.pending.clear();
    this.stale.clear();
    this.countCache.clear();
    this.scanned.clear();
    this.duplicates.clear();
    this.version++;
    this.watcher.unwatchAll();
    this.scheduleTimers();
    this.scan(staticDirs);
  }

  private changed(changes: StateChange[]): void {
    if (changes.length === 0) return;
    this.version++;
    // Something moves: poll fast for a while (the next poll picks the shorter interval).
    if (Date.now() - this.lastChangeAt >= RECENT_MS && this.pollTimer !== undefined) {
      this.lastChangeAt = Date.now();
      this.schedulePoll();
    }
    this.lastChangeAt = Date.now();
    this._onDidChange.fire(changes);
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

  /**
   * Lists a root or folder: its child areas, each judged and classified by the core. Taken in
   * slices: a folder of 10,000 builds means as many records and watches.
   */
  private async relist(staticDir: string, tag: string, notify: boolean): Promise<void> {
    const key = keyOf(staticDir, tag);
    const dir = tag === '' ? staticDir : path.join(staticDir, tag);
    const generation = this.generation;
    const known = this.records.get(key);
    if (tag === '') await this.claimRoot(staticDir);
    // Watch before listing: a change between the two is then seen rather than lost.
    this.listed.add(key);
    this.watchDir(dir, { staticDir, tag });
    // (A watch kept in another thread is in place once this resolves.)
    await this.watcher.ready();
    this.work.listings++;
    const listedAt = Date.now();
    const fresh = await list(staticDir, tag, this.timing);
    // Forgotten meanwhile (a reset, or the folder went): what it held is not to be recorded.
    const gone = (): boolean => this.disposed || this.generation !== generation || (known !== undefined && this.records.get(key) !== known);
    if (gone()) return;
    let self = this.records.get(key);
    if (self === undefined) {
      self = { staticDir, tag, kind: tag === '' ? 'root' : 'folder', lock: undefined, judgedAt: listedAt };
      this.put(self);
    }
    const old = self.children;
    const changes: StateChange[] = [];
    let childrenChanged = old !== undefined && old.length !== fresh.length;
    const added: AreaRecord[] = [];
    const tags: string[] = [];
    for (let i = 0; i < fresh.length; i++) {
      const e = fresh[i];
      tags.push(e.tag);
      const ckey = keyOf(staticDir, e.tag);
      const before = this.records.get(ckey);
      const kind: AreaKind = e.kind;
      if (before === undefined) {
        const r: AreaRecord = { staticDir, tag: e.tag, kind, lock: e, judgedAt: listedAt };
        this.put(r);
        added.push(r);
        childrenChanged = true;
        // A new directory's watch starts after the listing read it: a lock taken in between
        // would be missed, so look at its lock once more.
        if (old !== undefined) this.mark({ staticDir, tag: e.tag }, { lock: true });
      } else if (before.kind !== kind) {
        // A folder that was staged into is a build now (or the reverse): what was listed
        // inside it means something else.
        this.forgetBelow(staticDir, e.tag);
        this.update(before, () => {
          before.kind = kind;
          before.lock = e;
          before.judgedAt = listedAt;
        });
        delete before.children;
        delete before.artifacts;
        childrenChanged = true;
      } else if (before.judgedAt <= listedAt) {
        // (A judgement begun after this listing began is newer than what it says.)
        if (stateKey(before.lock) !== stateKey(e)) {
          changes.push({ staticDir, tag: e.tag, what: 'state' });
          this.remeasure(before);
        }
        this.update(before, () => {
          before.lock = e;
          before.judgedAt = listedAt;
        });
      }
      // The record itself goes with the watch: an object more for each of 100,000 would cost.
      this.watchDir(e.dir, this.records.get(ckey) ?? { staticDir, tag: e.tag });
      if (i % PER_CHECK === PER_CHECK - 1) {
        const p = pause();
        if (p !== undefined) {
          await p;
          if (gone() || this.records.get(key) !== self) {
            // Forgotten while this was taken in: what it added goes too, or counts would keep it.
            for (const r of added) if (this.records.get(keyOf(staticDir, r.tag)) === r) this.forget(staticDir, r.tag);
            return;
          }
        }
      }
    }
    if (old !== undefined) {
      const names = new Set(tags);
      for (const t of old) {
        if (!names.has(t)) {
          this.forget(staticDir, t);
          childrenChanged = true;
        }
      }
    }
    self.children = tags;
    if (old !== undefined && childrenChanged) changes.unshift({ staticDir, tag, what: 'children' });
    else if (old === undefined) this.version++;
    this.scheduleTimers();
    if (notify) this.changed(changes);
    else if (changes.length > 0) this.version++;
    if (old === undefined) this._onDidList.fire({ staticDir, tag });
    // Folders are listed too, so that every build is known before anyone expands anything.
    for (const e of fresh) {
      if (e.kind === 'folder' && this.records.get(keyOf(staticDir, e.tag))?.children === undefined) {
        const job = this.scanFolder(staticDir, e.tag, e.dir, generation).catch(() => undefined);
        this.scanning.add(job);
        void job.then(() => this.scanning.delete(job));
      }
    }
  }

  /** A static directory's own real directory, first of what its scan lists; refused when it holds everything. */
  private async claimRoot(staticDir: string): Promise<void> {
    const real = await fs.promises.realpath(staticDir).catch(() => staticDir);
    checkScanRoot(staticDir, real);
    const id = await dirIdentity(staticDir);
    if (id !== undefined) this.scannedOf(staticDir).claim(id, '', () => true);
  }

  private scannedOf(staticDir: string): ScannedDirs {
    let s = this.scanned.get(staticDir);
    if (s === undefined) this.scanned.set(staticDir, (s = new ScannedDirs()));
    return s;
  }

  /** Lists a folder the scan found, unless its real directory was listed already (or the scan is full). */
  private async scanFolder(staticDir: string, tag: string, dir: string, generation: number): Promise<void> {
    const id = await dirIdentity(dir);
    if (id === undefined || this.disposed || this.generation !== generation) return;
    const scanned = this.scannedOf(staticDir);
    const wasStopped = scanned.stopped;
    const claimed = scanned.claim(id, tag, (t) => t === '' || this.records.get(keyOf(staticDir, t)) !== undefined);
    if (claimed === true) {
      this.duplicates.delete(keyOf(staticDir, tag));
      await this.children(staticDir, tag);
      return;
    }
    if (claimed === false) {
      this.duplicates.set(keyOf(staticDir, tag), scanned.tagOf(id)!);
      // Its row says so now, instead of counting for ever.
      this._onDidList.fire({ staticDir, tag });
      return;
    }
    if (!wasStopped) this.warnings.warn(`Stopped listing the folders of ${staticDir} on their own after ${MAX_SCANNED_FOLDERS}: is it really a static directory of builds? The others are listed when they are expanded.`);
  }

  /** Lists the top of a build: its artifacts. */
  private async relistBuild(staticDir: string, tag: string, notify: boolean): Promise<void> {
    const key = keyOf(staticDir, tag);
    const r = this.records.get(key);
    if (r === undefined) return;
    this.listed.add(key);
    this.watchDir(path.join(staticDir, tag), { staticDir, tag });
    this.work.listings++;
    const files = await readArtifacts(staticDir, tag, '', r.lock);
    if (this.disposed) return;
    const old = r.artifacts;
    r.artifacts = files;
    if (old !== undefined && artifactsKey(old) !== artifactsKey(files)) {
      this.remeasure(r);
      if (notify) this.changed([{ staticDir, tag, what: 'children' }]);
    }
  }

  /** Judges one area's lock again and reports it if its state changed. */
  private async recheck(staticDir: string, tag: string): Promise<void> {
    const r = this.records.get(keyOf(staticDir, tag));
    if (r === undefined || r.lock === undefined) return;
    this.work.inspections++;
    const judgedAt = Date.now();
    const info = await inspect(staticDir, tag, this.timing).catch(() => undefined);
    if (this.disposed || this.records.get(keyOf(staticDir, tag)) !== r) return;
    if (info === undefined || !info.exists || (info.state === 'free' && r.kind === 'folder') || (info.state !== 'free' && r.kind !== 'build')) {
      // Gone, unreadable, or perhaps of another kind now: the parent's listing decides.
      await this.serial(keyOf(staticDir, parentTag(tag)), () => this.relist(staticDir, parentTag(tag), true)).catch(() => undefined);
      return;
    }
    const before = r.lock;
    this.update(r, () => {
      r.lock = { name: before.name, kind: r.kind === 'build' ? 'build' : 'folder', ...info };
      r.judgedAt = judgedAt;
    });
    this.scheduleTimers();
    if (stateKey(before) !== stateKey(r.lock)) {
      this.remeasure(r);
      this.changed([{ staticDir, tag, what: 'state' }]);
    }
  }

  private watchDir(dir: string, ref: AreaRef): void {
    this.watcher.watch(dir, ref);
  }

  /** Records an area, counted in the tallies above it. */
  private put(r: AreaRecord): void {
    this.records.set(keyOf(r.staticDir, r.tag), r);
    this.account(r, 1);
  }

  /** Changes an area's kind or lock, its tallies following. */
  private update(r: AreaRecord, change: () => void): void {
    this.account(r, -1);
    change();
    this.account(r, 1);
  }

  /** Adds (1) or takes away (-1) what a build counts for in the tallies of the areas above it. */
  private account(r: AreaRecord, sign: 1 | -1): void {
    if (r.kind !== 'build') return;
    const state = r.lock?.state ?? 'free';
    if (state !== 'free') {
      if (sign > 0) this.lockedSet.add(r);
      else this.lockedSet.delete(r);
    }
    for (let t = parentTag(r.tag); ; t = parentTag(t)) {
      const key = keyOf(r.staticDir, t);
      let tally = this.tallies.get(key);
      if (tally === undefined) {
        tally = { builds: 0, held: 0, stale: 0, legacy: 0 };
        this.tallies.set(key, tally);
      }
      tally.builds += sign;
      if (state !== 'free') tally[state] += sign;
      if (t === '') break;
    }
  }

  /** Forgets an area and everything below it, found through the listings below it. */
  private forget(staticDir: string, tag: string): void {
    // A stack of its own, not recursion: how deep folders go is up to whoever makes them. Found
    // parents first, forgotten children first (a build's tally goes from folders still there).
    const found: string[] = [];
    const todo = [tag];
    for (let t = todo.pop(); t !== undefined; t = todo.pop()) {
      found.push(t);
      for (const c of this.records.get(keyOf(staticDir, t))?.children ?? []) todo.push(c);
    }
    for (let i = found.length - 1; i >= 0; i--) {
      const key = keyOf(staticDir, found[i]);
      const r = this.records.get(key);
      if (r !== undefined) {
        this.account(r, -1);
        this.damagedSet.delete(r);
        this.records.delete(key);
      }
      this.listed.delete(key);
      this.tallies.delete(key);
      this.countCache.delete(key);
      this.duplicates.delete(key);
      this.watcher.unwatch(path.join(staticDir, found[i]));
    }
  }

  /** Forgets what is below an area, keeping the area itself. */
  private forgetBelow(staticDir: string, tag: string): void {
    for (const t of this.records.get(keyOf(staticDir, tag))?.children ?? []) this.forget(staticDir, t);
    this.tallies.delete(keyOf(staticDir, tag));
  }

  private onWatchEvent(e: WatchEvent<AreaRef>): void {
    const ref = e.data;
    const r = this.records.get(keyOf(ref.staticDir, ref.tag));
    if (e.name === LOCK_NAME) {
      // Taken, released, or only a heartbeat: inotify reports a directory's utimes like a
      // rename, so a look at the lock's identity tells which before any real work is done.
      if (ref.tag !== '') this.mark(ref, { probe: true });
      return;
    }
    // Writes into files (artifacts being staged) change no lock state and no listing.
    if (e.kind === 'change') return;
    if (e.name !== null && ref.tag !== '' && r?.kind === 'folder' && BUILD_MARKS.includes(e.name)) {
      // A folder gained a manifest or timestamp: it is a build now, which its parent's listing tells.
      this.mark({ staticDir: ref.staticDir, tag: parentTag(ref.tag) }, { children: true });
      return;
    }
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
   * Whether pending work may wait the longer settle time: only a listing of a build's files (a
   * build being staged). A lock, or a folder gaining a build, is news to show at once.
   */
  private waitsLonger(p: Pending): boolean {
    return !p.lock && !p.probe && this.records.get(keyOf(p.staticDir, p.tag))?.kind === 'build';
  }

  /** Runs what is pending: everything, or (`listingsOnly`) just what waits the longer time. */
  private flush(listingsOnly: boolean): void {
    if (listingsOnly) this.listingTimer = undefined;
    else this.settleTimer = undefined;
    const jobs = [...this.pending.values()].filter((p) => !listingsOnly || this.waitsLonger(p));
    for (const p of jobs) this.pending.delete(keyOf(p.staticDir, p.tag));
    for (const p of jobs) {
      const key = keyOf(p.staticDir, p.tag);
      void this.serial(key, async () => {
        if (p.children && this.listed.has(key)) {
          if (this.records.get(key)?.kind === 'build') await this.relistBuild(p.staticDir, p.tag, true);
          else await this.relist(p.staticDir, p.tag, true);
        }
        if (p.lock || (p.probe && !(await this.sameLock(p)))) await this.recheck(p.staticDir, p.tag);
      }).catch((err: unknown) => {
        // Removed while we looked: its parent's listing, which the same removal triggers, tells.
        const code = errnoCode(err);
        if (code === 'ENOENT' || code === 'ENOTDIR') return;
        this.warnings.warn(`Could not update ${p.tag || p.staticDir}: ${String(err)}`);
      });
    }
  }

  /** Whether the lock on disk is still the one last judged, and that judgement cannot have aged. */
  private async sameLock(ref: AreaRef): Promise<boolean> {
    const known = this.records.get(keyOf(ref.staticDir, ref.tag));
    const e = known?.lock;
    if (known === undefined || e === undefined) return true;
    // A stale lock that is touched again may have a live holder once more; a lock judged before
    // its holder had written the owner record has a holder to show now.
    if (e.state === 'stale' || (e.state === 'held' && e.holder === undefined)) return false;
    this.work.probes++;
    const st = await fs.promises.lstat(fsPath(e.lockPath)).catch(() => null);
    if ((st === null ? undefined : lockIdOf(st)) !== e.lockId) return false;
    // A heartbeat: the lock's expiry moves with it, and the stale timer has nothing to judge
    // again. The mtime is read as local time, which it is where inotify reports heartbeats (local
    // filesystems); the expiry never moves earlier than judged.
    const now = Date.now();
    if (st !== null && e.state === 'held' && st.mtimeMs > known.judgedAt - (e.heartbeatAgeMs ?? 0)) {
      e.heartbeatAgeMs = Math.max(0, now - st.mtimeMs);
      known.judgedAt = now;
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
    for (const r of this.lockedSet) {
      if (r.lock?.state !== 'held') continue;
      next = Math.min(next, this.expiresAt(r.lock, r.judgedAt));
      if (r.lock.holder !== undefined && isOnThisMachine(r.lock.holder)) local = true;
    }
    if (next !== Infinity) {
      // A little past the expiry, so that the judge agrees it has passed; never past Node's
      // longest timer (a record's times are a co-user's: that one fires again, and looks again).
      this.staleTimer = setTimeout(() => this.checkExpired(), Math.min(MAX_TIMER_MS, Math.max(50, next - Date.now() + 100)));
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
    return at + thresholdOf(this.timing, entry.holder?.staleMs) - (entry.heartbeatAgeMs ?? 0);
  }

  private checkExpired(): void {
    const now = Date.now();
    let due = 0;
    for (const r of [...this.lockedSet]) {
      if (r.lock?.state !== 'held') continue;
      if (this.expiresAt(r.lock, r.judgedAt) <= now) {
        this.mark(r, { lock: true });
        due++;
      }
    }
    // Each recheck schedules the next expiry itself.
    if (due === 0) this.scheduleTimers();
  }

  private checkLiveness(): void {
    for (const r of this.lockedSet) {
      const h = r.lock?.holder;
      if (r.lock?.state === 'held' && h !== undefined && isOnThisMachine(h) && !isHolderAlive(h)) this.mark(r, { lock: true });
    }
  }

  dispose(): void {
    this.disposed = true;
    clearTimeout(this.settleTimer);
    clearTimeout(this.listingTimer);
    clearTimeout(this.pollTimer);
    clearTimeout(this.staleTimer);
    clearTimeout(this.remeasureTimer);
    clearInterval(this.livenessTimer);
    this.watcher.dispose();
    this._onDidChange.dispose();
    this._onDidList.dispose();
  }
}

/**
 * The entries of a directory inside a build (`rel`, '' for its top), with sizes; the tool's own
 * bookkeeping (lock, manifest, timestamp, fencing counter, and the file a Python devserver lock is a
 * link to) left out. Links are shown as what they lead to, never followed to list what is inside
 * them: the build and the folder are opened by the core, which never follows a link out of the
 * static directory, even one swapped in for a folder after it was listed.
 */
async function readArtifacts(staticDir: string, tag: string, rel: string, lock: ListEntry | undefined): Promise<Artifact[]> {
  const entries = await readBuildDir(staticDir, tag, rel).catch(() => []);
  const legacyFile = rel === '' ? lock?.legacy?.uniqueFile : undefined;
  const dir = path.join(staticDir, tag, rel);
  // The core names bookkeeping; the file this lock is a link to is known exactly, too. In slices:
  // a build may hold 100,000 files.
  const shown: Artifact[] = [];
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i];
    if (!(rel === '' && (isBookkeeping(e.name) || e.name === legacyFile))) {
      shown.push({ name: e.name, path: `${dir}/${e.name}`, rel: rel === '' ? e.name : `${rel}/${e.name}`, size: e.size, directory: e.directory });
    }
    if (i % PER_CHECK === PER_CHECK - 1) {
      const p = pause();
      if (p !== undefined) await p;
    }
  }
  // Folders first, as a file explorer shows them.
  const sorted = await sortNatural(shown, (a) => a.name);
  return [...sorted.filter((a) => a.directory), ...sorted.filter((a) => !a.directory)];
}

const artifactsKey = (files: readonly Artifact[]): string => files.map((f) => `${f.name}\0${f.size}\0${f.directory}`).join('\0');
