/**
 * What is known of the static directories as they change: one record per area (root, folder or
 * build), found by scanning every folder, kept current by a directory watcher (and by polling where
 * the filesystem sends no events) and two timers, with a change event that names only the areas
 * whose state or contents really changed. The extension's tree and `devserver-stage watch` follow a
 * static directory through it; the decisions are the judge's. Here: listings and judgements; records
 * (store.ts), events (pending.ts), a listing with its children watched (listWatched.ts), polling, timers,
 * measures and the folder scan are files of their own.
 */
import * as path from 'path';
import { errnoCode } from '../base/errors';
import { naturalOrder } from '../base/format';
import { inspect } from '../lock/inspect';
import { pause } from '../base/slices';
import type { ListEntry, LockInfo, Timing } from '../base/types';
import { PER_CHECK, artifactsKey, readArtifacts } from './artifacts';
import { Emitter, type Disposable } from './emitter';
import { FolderScan } from './folderScan';
import { listWatched } from './listWatched';
import { Measures } from './measures';
import { PendingWork, type Pending } from './pending';
import { sameLock } from './probe';
import { Polling } from './polling';
import { keyOf, parentTag, stateKey, type AreaKind, type AreaRecord, type AreaRef, type Artifact, type Counts, type Owner, type StateChange } from './records';
import { StaleTimers } from './staleTimers';
import { AreaStore } from './store';
import { inThreadWatcher, WATCH_THREAD_STOPPED, type Watcher, type WatcherFactory } from './watcher';

export { POLL_FAST_MS, POLL_IDLE_MS } from './polling'; // how often it polls a network filesystem

/** Where the model reports what it could not do; the extension passes its log. */
export interface Warnings {
  warn(message: string): void;
}

export class LockStates implements Disposable {
  private readonly _onDidChange = new Emitter<StateChange[]>();
  readonly onDidChange = this._onDidChange.event;
  /** Fires when a directory was listed for the first time (more areas are known), or found to be one listed already. */
  private readonly _onDidList = new Emitter<AreaRef>();
  readonly onDidList = this._onDidList.event;

  private readonly store = new AreaStore();
  private readonly records = this.store.records;
  /** Areas whose listing has begun: events from then on may change it. */
  private readonly listed = new Set<string>();
  private readonly pending = new PendingWork(
    (key) => this.records.get(key)?.kind,
    (key) => this.listed.has(key),
    (p) => this.run(p),
  );
  private readonly queues = new Map<string, Promise<unknown>>();
  private readonly measures = new Measures({
    record: (staticDir, tag) => this.record(staticDir, tag),
    buildsUnder: (staticDir, tag) => this.buildsUnder(staticDir, tag),
    settled: () => this.settled(),
    timing: () => this.timing,
    disposed: () => this.disposed,
    changed: (changes) => this.changed(changes),
  });
  private readonly watcher: Watcher<AreaRef>;
  /** Grows with every reset: a listing begun before one is dropped when it ends. */
  private generation = 0;
  private readonly folders = new FolderScan({
    known: (staticDir, tag) => this.records.get(keyOf(staticDir, tag)) !== undefined,
    list: (staticDir, tag) => this.children(staticDir, tag),
    listedAs: (ref) => this._onDidList.fire(ref),
    current: (generation) => !this.disposed && this.generation === generation,
    warn: (message) => this.warnings.warn(message),
  });
  private roots: readonly string[] = [];
  private readonly poll = new Polling(
    () => this.roots,
    (roots) => this.pollOnce(roots),
  );
  private readonly timers = new StaleTimers(
    this.store.locked,
    () => this.timing,
    (r) => this.pending.mark(r, { lock: true }),
  );
  private disposed = false;
  /** Disk work done so far: directory listings and single-lock judgements. */
  readonly work = { listings: 0, inspections: 0, probes: 0 };

  /** `watcher`: where the watches are kept; in this thread unless told otherwise (threadWatcher.ts). */
  constructor(
    private timing: Timing,
    private readonly warnings: Warnings,
    { watcher = inThreadWatcher }: { watcher?: WatcherFactory } = {},
  ) {
    this.watcher = watcher<AreaRef>(
      (e) => this.pending.onWatchEvent(e),
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
    this.poll.classify(staticDirs);
    // Each root is watched before it is listed: where the watches are kept in another thread,
    // that thread starts now, while the root is looked at.
    if (staticDirs.length > 0) this.watcher.prepare();
    for (const d of staticDirs) {
      if (!this.records.has(keyOf(d, ''))) this.store.put({ staticDir: d, tag: '', kind: 'root', lock: undefined, judgedAt: Date.now() });
      void this.children(d, '').catch(() => undefined);
    }
  }

  /** Resolves once every listing begun so far (the scan of every folder included) has ended. */
  async settled(): Promise<void> {
    while (this.queues.size > 0 || this.folders.scanning.size > 0) await Promise.all([...this.queues.values(), ...this.folders.scanning]);
  }

  /** The areas directly inside a root or folder, listed once and then kept current. */
  async children(staticDir: string, tag: string): Promise<AreaRecord[]> {
    const key = keyOf(staticDir, tag);
    let r = this.records.get(key);
    if (r?.children === undefined) {
      // Asked again while the first listing runs (the scan's, then the view's): listed once.
      await this.serial(key, () => (this.records.get(key)?.children === undefined ? this.relist(staticDir, tag, false) : Promise.resolve()));
      r = this.records.get(key);
    }
    return (r?.children ?? []).map((t) => this.records.get(keyOf(staticDir, t))).filter((c): c is AreaRecord => c !== undefined);
  }

  /** The files and artifact folders at the top of a build, listed once and then kept current. */
  async artifacts(staticDir: string, tag: string): Promise<Artifact[]> {
    const key = keyOf(staticDir, tag);
    // A build not known yet (its folder's listing has not landed): its folder is listed first.
    if (!this.records.has(key) && tag !== '') await this.children(staticDir, parentTag(tag));
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
    return this.store.builds(where);
  }

  /** Every build known, in the static directories' order and natural tag order: for pickers. */
  sortedBuilds(): AreaRecord[] {
    const order = new Map(this.roots.map((d, i) => [d, i]));
    return this.builds().sort((a, b) => (order.get(a.staticDir) ?? 0) - (order.get(b.staticDir) ?? 0) || naturalOrder.compare(a.tag, b.tag));
  }

  /** Every known build at or below an area (a folder, or a root for tag ''). */
  buildsUnder(staticDir: string, tag: string): AreaRecord[] {
    return this.store.buildsUnder(staticDir, tag);
  }

  /** Every known build whose lock is not free (held, stale or legacy). */
  lockedBuilds(): AreaRecord[] {
    return [...this.store.locked];
  }

  /** Every known build a verification found damaged. */
  damagedBuilds(): AreaRecord[] {
    return [...this.store.damaged];
  }

  /** The builds at or below an area counted by state, `owner`'s as mine (see `AreaStore.counts`). */
  counts(staticDir: string, tag: string, owner: Owner | ((r: AreaRecord) => boolean), also: Iterable<AreaRef> = []): Counts {
    return this.store.counts(staticDir, tag, owner, also);
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
    return this.folders.sameAs(keyOf(staticDir, tag));
  }

  /** Marks a build found damaged by a verification (`summary`), or whole again (undefined). */
  markDamaged(staticDir: string, tag: string, summary: string | undefined): void {
    const r = this.records.get(keyOf(staticDir, tag));
    if (r === undefined || r.damaged === summary) return;
    if (summary === undefined) {
      delete r.damaged;
      this.store.damaged.delete(r);
    } else {
      r.damaged = summary;
      this.store.damaged.add(r);
    }
    this.changed([{ staticDir, tag, what: 'state' }]);
  }

  /** Measures size and last use of the builds at or below an area that have none yet (see measures.ts). */
  measure(staticDir: string, tag: string): Promise<void> {
    return this.measures.measure(staticDir, tag);
  }

  /** Lists every listed directory again every `ms`, whatever the filesystem (0: only where it sends no events). */
  setPolling(ms: number): void {
    this.poll.setPolling(ms);
  }

  /** Whether anyone looks at what is known: polling stops while nobody does. */
  setVisible(visible: boolean): void {
    this.poll.setVisible(visible);
  }

  /** How polling goes now: which roots, how often (0: not at all). */
  get polling(): { roots: string[]; intervalMs: number } {
    return this.poll.polling;
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
      if (r !== undefined && roots.includes(r.staticDir)) this.pending.mark(r, { children: true });
    }
  }

  /** Forgets everything and scans again, as after a change of settings or an explicit refresh. */
  reset(timing?: Timing, staticDirs: readonly string[] = this.roots): void {
    if (timing !== undefined) this.timing = timing;
    this.generation++;
    this.store.clear();
    this.listed.clear();
    this.pending.clear();
    this.measures.clear();
    this.folders.clear();
    this.store.version++;
    this.watcher.unwatchAll();
    this.timers.schedule();
    this.scan(staticDirs);
  }

  private changed(changes: StateChange[]): void {
    if (changes.length === 0) return;
    this.store.version++;
    // Something moves: poll fast for a while.
    this.poll.changed();
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
    if (tag === '') await this.folders.claimRoot(staticDir);
    // Watch before listing: a change between the two is then seen rather than lost.
    this.listed.add(key);
    this.watcher.watch(dir, { staticDir, tag });
    // (A watch kept in another thread is in place once this resolves.)
    await this.watcher.ready();
    this.work.listings++;
    const listedAt = Date.now();
    // Forgotten meanwhile (a reset, or the folder went): what it held is not to be recorded.
    const gone = (): boolean => this.disposed || this.generation !== generation || (known !== undefined && this.records.get(key) !== known);
    // Children are watched before they are judged (listWatched.ts); events on them wait for this listing (`run`).
    const fresh = await listWatched(staticDir, tag, this.timing, this.watcher, {
      gone,
      // A folder that went takes the watches made for its children along (a reset drops them all).
      unwatchable: (t) => !this.disposed && this.generation === generation && !this.records.has(keyOf(staticDir, t)),
    });
    // Checked again: a reset between the listing's end and this turn would otherwise have the
    // old listing recorded as the new generation's, which is then never listed.
    if (fresh === undefined || gone()) return;
    let self = this.records.get(key);
    if (self === undefined) {
      self = { staticDir, tag, kind: tag === '' ? 'root' : 'folder', lock: undefined, judgedAt: listedAt };
      this.store.put(self);
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
        this.store.put(r);
        added.push(r);
        childrenChanged = true;
        // A new directory's watch starts after the listing read it: a lock taken in between
        // would be missed, so look at its lock once more.
        if (old !== undefined) this.pending.mark({ staticDir, tag: e.tag }, { lock: true });
      } else if (before.kind !== kind) {
        // A folder that was staged into is a build now (or the reverse): what was listed
        // inside it means something else.
        this.store.forgetBelow(staticDir, e.tag, (key, d, t) => this.forgotten(key, d, t));
        this.store.update(before, () => {
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
          this.measures.remeasure(before);
        }
        this.store.update(before, () => {
          before.lock = e;
          before.judgedAt = listedAt;
        });
      }
      // The record itself goes with the watch: an object more for each of 100,000 would cost.
      this.watcher.watch(e.dir, this.records.get(ckey) ?? { staticDir, tag: e.tag });
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
    else if (old === undefined) this.store.version++;
    this.timers.schedule();
    if (notify) this.changed(changes);
    else if (changes.length > 0) this.store.version++;
    if (old === undefined) this._onDidList.fire({ staticDir, tag });
    // Folders are listed too, so that every build is known before anyone expands anything.
    for (const e of fresh) {
      if (e.kind === 'folder' && this.records.get(keyOf(staticDir, e.tag))?.children === undefined) {
        this.folders.start(staticDir, e.tag, e.dir, generation);
      }
    }
  }

  /** Lists the top of a build: its artifacts. */
  private async relistBuild(staticDir: string, tag: string, notify: boolean): Promise<void> {
    const key = keyOf(staticDir, tag);
    const r = this.records.get(key);
    if (r === undefined) return;
    this.listed.add(key);
    this.watcher.watch(path.join(staticDir, tag), { staticDir, tag });
    this.work.listings++;
    const files = await readArtifacts(staticDir, tag, '', r.lock);
    if (this.disposed) return;
    const old = r.artifacts;
    r.artifacts = files;
    if (old !== undefined && artifactsKey(old) !== artifactsKey(files)) {
      this.measures.remeasure(r);
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
    this.store.update(r, () => {
      r.lock = { name: before.name, kind: r.kind === 'build' ? 'build' : 'folder', ...info };
      r.judgedAt = judgedAt;
    });
    this.timers.schedule();
    if (stateKey(before) !== stateKey(r.lock)) {
      this.measures.remeasure(r);
      this.changed([{ staticDir, tag, what: 'state' }]);
    }
  }

  /** Forgets an area and everything below it. */
  private forget(staticDir: string, tag: string): void {
    this.store.forget(staticDir, tag, (key, d, t) => this.forgotten(key, d, t));
  }

  /** What goes with each area forgotten: its listing, its watch, what the scan said of it. */
  private forgotten(key: string, staticDir: string, tag: string): void {
    this.listed.delete(key);
    this.folders.forget(key);
    this.watcher.unwatch(path.join(staticDir, tag));
  }

  /** Does what events left pending for one area, after what runs for it already. */
  private run(p: Pending): void {
    const key = keyOf(p.staticDir, p.tag);
    // An area whose parent is being listed has no record until that listing ends, and the
    // judgement the listing makes of it may be older than this event: its work comes after.
    const listing = p.tag === '' || this.records.has(key) ? undefined : this.queues.get(keyOf(p.staticDir, parentTag(p.tag)));
    void (listing ?? Promise.resolve()).then(() => this.serial(key, async () => {
      if (p.children && this.listed.has(key)) {
        if (this.records.get(key)?.kind === 'build') await this.relistBuild(p.staticDir, p.tag, true);
        else await this.relist(p.staticDir, p.tag, true);
      }
      if (p.lock || (p.probe && !(await sameLock(this.records.get(key), this.work)))) await this.recheck(p.staticDir, p.tag);
    })).catch((err: unknown) => {
      // Removed while we looked: its parent's listing, which the same removal triggers, tells.
      const code = errnoCode(err);
      if (code === 'ENOENT' || code === 'ENOTDIR') return;
      this.warnings.warn(`Could not update ${p.tag || p.staticDir}: ${String(err)}`);
    });
  }

  dispose(): void {
    this.disposed = true;
    this.pending.dispose();
    this.poll.dispose();
    this.timers.dispose();
    this.measures.dispose();
    this.watcher.dispose();
    this._onDidChange.dispose();
    this._onDidList.dispose();
  }
}
