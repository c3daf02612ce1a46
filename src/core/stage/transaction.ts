/**
 * Everything one staging call does to its area, so that it can be undone: each entry of the sources
 * checked, written into the holder's work directory while it is hashed, and placed by the commit
 * (journal.ts), or all of it dropped by the rollback.
 */
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { StagingError, asStagingError, errnoCode, isStagingError } from '../base/errors';
import type { Lease } from '../lock/lock';
import { isInside } from '../fs/tags';
import { pause } from '../base/slices';
import { asyncIo } from '../fs/io';
import { Budget, Copier, hashFile, type Written } from './copy';
import { Journal, type Target } from './journal';
import { emptyManifest, manifestBytes, readManifest } from '../build/manifest';
import { MANIFEST_FILE } from '../base/protocol';
import { checkLinks } from './linkCheck';
import { ManifestRoom } from './manifestRoom';
import { checkName, checkPathLength, conflict, unsafe } from './names';
import { Progress } from './progress';
import { openSource, sourcesArtifacts, sourcesSize } from './sources';
import { DEFAULT_MAX_BYTES, type IncomingEntry, type Manifest, type ManifestEntry, type SourceContext, type StageOptions, type StageResult } from './types';

/**
 * Local files staged at the same time. Workers copy them (pool.ts), a batch of small files per
 * message; with this many in flight the walk runs ahead of the copies, so that the large files of
 * a build are reached (and hashed beside the small ones) before all its small files are copied.
 */
const PARALLEL = 4096;
/**
 * How long the walk may hold the event loop: the copying workers have a few small files queued
 * each, and their answers (and the next files) wait for the loop's turn.
 */
const FEED_SLICE_MS = 2;

const ignore = (): void => undefined;

/** Everything one call does to the area, so that it can be undone. */
export class Transaction {
  private readonly dir: string;
  private manifest: Manifest = emptyManifest();
  private readonly budget: Budget;
  private readonly journal: Journal;
  private readonly progress: Progress;
  private readonly copier: Copier;
  private readonly added: ManifestEntry[] = [];
  private readonly skipped: ManifestEntry[] = [];
  private readonly replaced: ManifestEntry[] = [];
  private readonly knownDirs = new Set<string>();
  /** Directories of the area being looked at (or made in the work directory), by name: each once. */
  private readonly checkingDirs = new Map<string, Promise<void>>();
  /** The bytes of the local sources, measured by a worker while the lock's first checks run. */
  private readonly total: Promise<number | undefined>;
  /** How many artifacts the sources bring, and the bytes of their names, as far as known up front (the same measurement). */
  private readonly incoming: Promise<{ artifacts: number; nameBytes: number }>;
  /** What the manifest would take, against its limit (manifestRoom.ts). */
  private readonly room: ManifestRoom;
  /** Artifacts being written, by name: a later entry of the same name waits for the earlier. */
  private readonly writing = new Map<string, Promise<void>>();
  /** Symlinks this call made: checked once more, resolved, before commit. */
  private readonly links: string[] = [];

  /** ECOMPROMISED if the lock's work directory is no longer in the lock (the lock was taken away), else undefined. */
  async lostLock(): Promise<StagingError | undefined> {
    try {
      await this.journal.checkFence();
      return undefined;
    } catch (err) {
      return isStagingError(err, 'ECOMPROMISED') ? err : undefined;
    }
  }

  constructor(
    private readonly lease: Lease,
    private readonly options: StageOptions,
    private readonly signal: AbortSignal,
    sources: readonly string[],
  ) {
    this.dir = lease.dir;
    this.room = new ManifestRoom(this.dir, lease.tag, lease.fence);
    this.budget = new Budget(options.maxBytes ?? DEFAULT_MAX_BYTES, this.dir);
    this.journal = new Journal(lease.area, lease.workDir, this.dir, lease.io);
    this.progress = new Progress(options.onProgress);
    this.copier = new Copier(this.dir, signal, this.budget, this.progress, lease.io.sync);
    this.knownDirs.add(this.dir);
    this.total = sourcesSize(sources, (dir) => this.copier.measure(dir));
    this.total.catch(() => undefined); // awaited in begin; a staging refused before it must not leave it unobserved
    this.incoming = sourcesArtifacts(sources, (dir) => this.copier.measure(dir));
    this.incoming.catch(() => undefined);
  }

  async begin(): Promise<void> {
    await this.journal.begin();
    await this.room.check(this.incoming);
    this.manifest = await readManifest(this.dir);
    await this.budget.fitToDisk();
    this.progress.totalBytes = await this.total;
  }

  result(): StageResult {
    return {
      staticDir: this.lease.staticDir,
      tag: this.lease.tag,
      dir: this.dir,
      created: this.lease.created,
      added: this.added,
      skipped: this.skipped,
      replaced: this.replaced,
      bytes: this.budget.used,
    };
  }

  private check(): void {
    if (this.signal.aborted) throw this.signal.reason;
  }

  async stageSource(spec: string): Promise<void> {
    const budget = this.budget;
    const ctx: SourceContext = {
      dir: this.dir,
      partPath: () => this.journal.newPart('download.'),
      signal: this.signal,
      get maxBytes() {
        return budget.remaining;
      },
      tooBig: (source) => budget.tooBig(source),
      onPartBytes: (n, total) => this.progress.add(spec, n, total),
      onDownloadBytes: (n, total) => this.progress.download(spec, n, total),
    };
    const inflight = new Set<Promise<void>>();
    let failure: { err: unknown } | undefined;
    // Woken when a file in flight is done (one waiter: a race over every file in flight would cost
    // as many reactions as files, each time).
    let room: (() => void) | undefined;
    const settle = async (): Promise<void> => {
      await Promise.all(inflight);
      if (failure !== undefined) throw failure.err;
    };
    try {
      for await (const entry of openSource(spec, ctx)) {
        // An error the content meets before it is read (the source cut off while this entry's
        // place is made, through the thread pool on a network filesystem) stays in the stream,
        // which throws it to its reader (Copier.stream); until then it must not be uncaught.
        entry.content?.on('error', ignore);
        if (failure !== undefined) {
          entry.content?.destroy();
          throw failure.err;
        }
        this.check();
        // A walk on a local disk and the books of each entry run without ever waiting for the
        // event loop: without a turn now and then, the copying workers' answers would wait for
        // the end of the walk, and the workers with them.
        const turn = pause(FEED_SLICE_MS);
        if (turn !== undefined) await turn;
        if (entry.type === 'file' && entry.localPath !== undefined) {
          // Plain local files need nothing from the source once named: copy many at once.
          while (inflight.size >= PARALLEL) await new Promise<void>((resolve) => (room = resolve));
          const task: Promise<void> = this.entry(entry)
            .catch((err: unknown) => {
              failure ??= { err };
            })
            .finally(() => {
              inflight.delete(task);
              const wake = room;
              room = undefined;
              wake?.();
            });
          inflight.add(task);
        } else {
          await this.entry(entry);
        }
      }
    } catch (err) {
      failure ??= { err };
    }
    await settle();
  }

  /** Validates one entry and stages it. */
  private async entry(e: IncomingEntry): Promise<void> {
    let name: string;
    try {
      name = checkName(e);
      checkPathLength(this.dir, name, e);
      this.room.count(name, e, this.manifest.artifacts);
    } catch (err) {
      e.content?.destroy();
      throw err;
    }
    const earlier = this.writing.get(name);
    if (earlier !== undefined) await earlier.catch(() => undefined);
    const work = this.entryNamed(name, e);
    this.writing.set(name, work);
    try {
      await work;
    } finally {
      if (this.writing.get(name) === work) this.writing.delete(name);
    }
  }

  private async entryNamed(name: string, e: IncomingEntry): Promise<void> {
    switch (e.type) {
      case 'directory':
        await this.ensureDir(name, e);
        return;
      case 'file':
        await this.ensureDir(path.posix.dirname(name), e);
        return this.file(name, e);
      case 'symlink':
        await this.ensureDir(path.posix.dirname(name), e);
        return this.symlink(name, e);
      case 'hardlink':
        await this.ensureDir(path.posix.dirname(name), e);
        return this.hardlink(name, e);
      default:
        throw unsafe(e, `it is a ${e.what ?? 'special file'}; only files, directories and links inside the area are staged`);
    }
  }

  /**
   * Makes sure of the directories of `rel`, refusing to pass through a symlink or a file: a link
   * placed earlier (by this archive or another) must never carry a write outside the area. One
   * the area lacks is made in the work directory, and moves in whole at the commit (journal.ts).
   */
  private async ensureDir(rel: string, e: IncomingEntry): Promise<void> {
    if (rel === '.' || rel === '') return;
    let current = this.dir;
    let sub = '';
    for (const seg of rel.split('/')) {
      const parent = sub;
      current = path.join(current, seg);
      sub = sub === '' ? seg : `${sub}/${seg}`;
      if (this.knownDirs.has(current)) continue;
      if (this.journal.has(sub)) {
        if (this.manifest.artifacts[sub]?.type === 'symlink') throw unsafe(e, `${sub} in the area is a symbolic link, and nothing is written through links`);
        throw new StagingError('ECONFLICT', `Cannot stage ${e.name} from ${e.source}: ${sub} is a file of this staging, not a directory.`, { path: current });
      }
      // Entries copied at once may need the same directory: it is looked at, and made, once.
      let checking = this.checkingDirs.get(sub);
      if (checking === undefined) {
        checking = this.checkDir(sub, parent, current, e);
        this.checkingDirs.set(sub, checking);
      }
      await checking;
    }
    this.journal.needDir(rel);
  }

  private async checkDir(sub: string, parent: string, current: string, e: IncomingEntry): Promise<void> {
    // Inside a directory this call makes, nothing can be in the area yet.
    if (!this.journal.inTree(parent)) {
      const st = await fs.promises.lstat(current).catch((err: unknown) => {
        if (errnoCode(err) === 'ENOENT') return null;
        throw asStagingError(err, 'inspect', current);
      });
      if (st?.isSymbolicLink() === true) {
        throw unsafe(e, `${path.relative(this.dir, current)} in the area is a symbolic link, and nothing is written through links`);
      } else if (st !== null && !st.isDirectory()) {
        throw new StagingError('ECONFLICT', `Cannot stage ${e.name} from ${e.source}: ${current} is a file, not a directory.`, { path: current });
      }
      if (st !== null) {
        this.knownDirs.add(current);
        return;
      }
    }
    await this.journal.makeDir(sub);
    this.knownDirs.add(current);
  }

  private async file(name: string, e: IncomingEntry): Promise<void> {
    const final = path.join(this.dir, name);
    // In an area this call created, only this call's own artifacts and directories can be there;
    // in a directory this call makes, nothing can be yet.
    const mightExist = !this.journal.inTree(path.posix.dirname(name)) && (!this.lease.created || name in this.manifest.artifacts || this.knownDirs.has(final));
    const existing = mightExist ? await asyncIo.lstatOrNull(final) : null;
    if (existing?.isDirectory() === true || this.journal.isDir(name)) {
      e.content?.destroy();
      throw new StagingError('ECONFLICT', `Cannot stage ${name} from ${e.source}: a directory of that name is already in ${this.dir}.`, { path: final });
    }
    // A different size is a conflict known before a byte is copied.
    if (existing?.isFile() === true && e.size !== undefined && e.size !== existing.size && this.options.overwrite !== true) {
      e.content?.destroy();
      throw conflict(name, e, final);
    }
    if (e.localPath === undefined && e.content === undefined) throw new StagingError('ESOURCE', `${e.source} gave no content for ${e.name}.`);
    const part = await this.journal.target(name);
    try {
      let written: Written;
      if (e.localPath !== undefined) {
        e.content?.destroy();
        written = await this.copier.local(name, e.localPath, part.path, e, this.journal.fence);
      } else {
        await this.journal.checkFence();
        written = await this.copier.stream(name, e.content!, part.path, e);
      }
      const entry: ManifestEntry = {
        name,
        type: 'file',
        size: written.size,
        sha256: written.sha256,
        source: e.source,
        stagedAt: new Date().toISOString(),
        fence: this.lease.fence,
      };
      await this.place(name, final, part, entry, existing, written.ino);
    } finally {
      part.done();
    }
  }

  /**
   * A finished part: dropped if the same artifact is already there (or waiting, from an earlier entry
   * of this call), a conflict if a different one is (unless overwriting), else placed at the commit.
   */
  private async place(name: string, final: string, part: Target, entry: ManifestEntry, existing: fs.Stats | null, ino?: number): Promise<void> {
    const waiting = this.journal.has(name) ? this.manifest.artifacts[name] : undefined;
    if (existing !== null || waiting !== undefined) {
      const same = waiting !== undefined ? sameEntry(waiting, entry) : await this.sameAsExisting(name, final, existing!, entry);
      if (same) {
        await this.journal.drop(part);
        this.manifest.artifacts[name] ??= entry;
        this.skipped.push(this.manifest.artifacts[name]);
        this.progress.finished(name, bytesOf(entry), 'skipped');
        return;
      }
      if (this.options.overwrite !== true) throw conflict(name, { name, source: entry.source }, final);
      await this.journal.place(name, part, existing !== null, ino);
      this.replaced.push(entry);
    } else {
      await this.journal.place(name, part, false, ino);
      this.added.push(entry);
    }
    this.manifest.artifacts[name] = entry;
    this.progress.finished(name, bytesOf(entry), existing !== null || waiting !== undefined ? 'replaced' : 'added');
  }

  /** Same size and hash as what is there; the manifest's hash is trusted when the size agrees. */
  private async sameAsExisting(name: string, final: string, existing: fs.Stats, entry: ManifestEntry): Promise<boolean> {
    if (entry.type === 'symlink') {
      if (!existing.isSymbolicLink()) return false;
      return (await fs.promises.readlink(final)) === entry.linkTarget;
    }
    if (!existing.isFile() || existing.size !== entry.size) return false;
    const recorded = this.manifest.artifacts[name];
    const sha = recorded?.type === 'file' && recorded.size === existing.size ? recorded.sha256 : (await hashFile(final)).sha256;
    return sha === entry.sha256;
  }

  /** After the commit or the rollback: the workers, then the descriptors they wrote through. */
  async close(): Promise<void> {
    await this.copier.close();
    this.journal.close();
  }

  private async symlink(name: string, e: IncomingEntry): Promise<void> {
    const target = e.linkTarget ?? '';
    const final = path.join(this.dir, name);
    if (target === '' || target.includes('\0') || path.isAbsolute(target)) {
      throw unsafe(e, `it is a symbolic link to ${JSON.stringify(target)}; only relative links that stay inside the area are staged`);
    }
    if (!isInside(this.dir, path.resolve(path.dirname(final), target))) {
      throw unsafe(e, `it is a symbolic link to ${JSON.stringify(target)}, which leads outside the area`);
    }
    const existing = await asyncIo.lstatOrNull(final);
    if (existing?.isDirectory() === true) {
      throw new StagingError('ECONFLICT', `Cannot stage ${name} from ${e.source}: a directory of that name is already in ${this.dir}.`, { path: final });
    }
    await this.journal.checkFence();
    const part = await this.journal.target(name);
    try {
      await fs.promises.symlink(target, part.path);
      const { ino } = await fs.promises.lstat(part.path);
      const entry: ManifestEntry = {
        name,
        type: 'symlink',
        size: Buffer.byteLength(target),
        sha256: crypto.createHash('sha256').update(target).digest('hex'),
        source: e.source,
        stagedAt: new Date().toISOString(),
        linkTarget: target,
        fence: this.lease.fence,
      };
      await this.place(name, final, part, entry, existing, ino);
    } finally {
      part.done();
    }
    this.links.push(final);
  }

  /**
   * A hard link entry is staged as a copy of the artifact it names, which must already be a file in
   * the area, reached without passing through any link (a link could lead the copy outside).
   */
  private async hardlink(name: string, e: IncomingEntry): Promise<void> {
    let targetName: string;
    try {
      targetName = checkName({ ...e, name: e.linkTarget ?? '' });
    } catch {
      throw unsafe(e, `it is a hard link to ${JSON.stringify(e.linkTarget)}, which is not an entry inside the area`);
    }
    // An earlier entry of this call is still waiting in the work directory: copy that.
    const waiting = await this.journal.partOf(targetName);
    if (waiting !== undefined) {
      try {
        const entry = this.manifest.artifacts[targetName];
        if (entry?.type !== 'file') throw unsafe(e, `it is a hard link to ${JSON.stringify(e.linkTarget)}, which is not a file`);
        return await this.file(name, { ...e, type: 'file', localPath: waiting.path, size: entry.size });
      } finally {
        waiting.done();
      }
    }
    const target = path.join(this.dir, targetName);
    let st: fs.Stats | null = null;
    let probe = this.dir;
    for (const seg of targetName.split('/')) {
      probe = path.join(probe, seg);
      st = await asyncIo.lstatOrNull(probe);
      if (st === null || st.isSymbolicLink()) break;
    }
    if (st === null || !st.isFile()) {
      throw unsafe(e, `it is a hard link to ${JSON.stringify(e.linkTarget)}, which is not a file staged in the area (reached without links)`);
    }
    await this.file(name, { ...e, type: 'file', localPath: target, size: st.size, localStat: st });
  }

  /** Moves everything into the area with the manifest and a fresh timestamp (see journal.ts). */
  async commit(): Promise<void> {
    this.check();
    const bytes = await manifestBytes(this.manifest, { tag: this.lease.tag, file: path.join(this.dir, MANIFEST_FILE) });
    await this.journal.commit(bytes, () => checkLinks(this.dir, this.links, this.manifest.artifacts), this.lease.fence);
  }

  /**
   * After a failure: stops the workers and waits for the entries still being written, so that
   * nothing more is written once the lock is let go. Nothing of this call is in the area (a failed
   * commit undid itself), and what it wrote goes with the lock's work directory.
   */
  async rollback(): Promise<void> {
    await this.copier.close();
    await Promise.all([...this.writing.values()].map((w) => w.catch(() => undefined)));
  }
}

/** Whether two entries of one call for the same name stage the same thing. */
function sameEntry(a: ManifestEntry, b: ManifestEntry): boolean {
  return a.type === b.type && a.size === b.size && a.sha256 === b.sha256 && a.linkTarget === b.linkTarget;
}

/** What an artifact counts for in progress: its content; a link has none to copy. */
function bytesOf(entry: ManifestEntry): number {
  return entry.type === 'file' ? entry.size : 0;
}
