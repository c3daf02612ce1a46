/**
 * Staging a build: every artifact from the sources into `<staticDir>/<tag>`, under its lock.
 *
 * Each artifact is written under a temporary name inside the area while it is hashed, and renamed
 * into place when complete, so it appears whole or not at all. A call is all or nothing: if it
 * fails or is cancelled, what it added is removed, what it replaced is put back (the original was
 * only renamed aside), directories it made are removed, and a new area is released with destroy
 * so a later run can retry. The area never loses an artifact it had before the call.
 */
import * as crypto from 'crypto';
import { setMaxListeners } from 'events';
import * as fs from 'fs';
import * as path from 'path';
import { Transform, type Readable } from 'stream';
import { pipeline } from 'stream/promises';
import { StagingError, asStagingError, errnoCode, isStagingError } from '../errors';
import { acquire, type Lease } from '../lock';
import { LOCK_NAME, LOCK_TARGET, META_DIR } from '../protocol';
import { isInside } from '../tags';
import { asyncIo, ioFor } from '../io';
import { FileHasher } from './hasher';
import { emptyManifest, readManifest, writeManifest } from './manifest';
import { limitOf, sizeLimit, type SizeLimit } from './space';
import { openSource } from './sources';
import {
  DEFAULT_MAX_BYTES,
  MANIFEST_FILE,
  PART_PREFIX,
  TIMESTAMP_FILE,
  type IncomingEntry,
  type Manifest,
  type ManifestEntry,
  type SourceContext,
  type StageOptions,
  type StageProgress,
  type StageResult,
} from './types';

/** Large local files are copied in chunks of this size: big enough to be fast, small enough to stop at once. */
const CHUNK = 4 * 1024 * 1024;
/** Up to this size a local file is copied by the kernel in one call (tens of ms at most). */
const COPY_FILE_MAX = 16 * 1024 * 1024;
/**
 * Up to this size, between local filesystems, a file is read once, hashed and written with
 * synchronous calls: for the many small files of a build, a few syscalls of microseconds beat
 * thread-pool round trips and a message to a hash worker, and the event loop is held well
 * under a millisecond each time.
 */
const SMALL_SYNC_MAX = 1024 * 1024;
/**
 * Local files staged at the same time. Most of a small file's time is waiting (on the thread
 * pool, on a hash worker), so many in flight keep both busy; large files are few in any build.
 */
const PARALLEL = 8;
const PROGRESS_MS = 100;
/** Linux's limit on a path: a longer one cannot be created, so it is refused up front. */
const PATH_MAX = 4096;
/** Links followed in one resolution before it counts as a loop (the kernel's limit). */
const MAX_LINK_DEPTH = 40;

/** Stages `sources` into the area `tag`: a new build (create-once) unless `add`. */
export async function stage(staticDir: string, tag: string, sources: readonly string[], options: StageOptions = {}): Promise<StageResult> {
  if (!Array.isArray(sources) || sources.length === 0 || sources.some((s) => typeof s !== 'string' || s === '')) {
    throw new StagingError('ESOURCE', 'Nothing to stage: give at least one source (a directory, files, an archive or an http(s) URL).');
  }
  if (options.signal?.aborted === true) throw new StagingError('ECANCELED', `Staging of ${tag} was cancelled before it began.`);
  const lease = await acquire(staticDir, tag, {
    createOnce: options.add !== true,
    waitMs: options.waitMs ?? 0,
    purpose: options.purpose ?? `staging ${sources.join(' ')}`.slice(0, 200),
    ...(options.clientId !== undefined ? { clientId: options.clientId } : {}),
    ...(options.staleMs !== undefined ? { staleMs: options.staleMs } : {}),
    ...(options.refreshMs !== undefined ? { refreshMs: options.refreshMs } : {}),
    ...(options.signal !== undefined ? { signal: options.signal } : {}),
  });
  // One signal for the work: the caller's cancel, or the lock being lost.
  const work = new AbortController();
  // Every file in flight waits on it, and each source and stream listens too.
  setMaxListeners(PARALLEL * 4, work.signal);
  const onCancel = (): void => work.abort(new StagingError('ECANCELED', `Staging into ${lease.dir} was cancelled; nothing it wrote was kept.`, { path: lease.dir }));
  const onLost = (): void => work.abort(lease.signal.reason);
  options.signal?.addEventListener('abort', onCancel, { once: true });
  lease.signal.addEventListener('abort', onLost, { once: true });
  const tx = new Transaction(lease, options, work.signal);
  try {
    await tx.begin(sources);
    for (const spec of sources) await tx.stageSource(spec);
    await tx.commit();
  } catch (err) {
    const reason: unknown = work.signal.aborted ? work.signal.reason : err;
    await tx.rollback();
    if (lease.state === 'held') await lease.release({ destroy: lease.created }).catch(() => undefined);
    throw isStagingError(reason) ? reason : asStagingError(reason, 'stage into', lease.dir);
  } finally {
    options.signal?.removeEventListener('abort', onCancel);
    lease.signal.removeEventListener('abort', onLost);
    await tx.close();
  }
  await lease.release();
  return tx.result();
}

/** Everything one call does to the area, so that it can be undone. */
class Transaction {
  private readonly dir: string;
  private manifest: Manifest = emptyManifest();
  private maxBytes: number;
  private limit?: SizeLimit;
  private bytes = 0;
  private totalBytes: number | undefined;
  private artifacts = 0;
  private readonly added: ManifestEntry[] = [];
  private readonly skipped: ManifestEntry[] = [];
  private readonly replaced: ManifestEntry[] = [];
  /** Temporary files of this call, removed at the end whatever happens. */
  private readonly parts = new Set<string>();
  /** Artifacts this call put where nothing was: removed on rollback. */
  private readonly placed: string[] = [];
  /** Originals this call replaced, renamed aside: put back on rollback, deleted on commit. */
  private readonly asides: { final: string; aside: string }[] = [];
  /** Directories this call made: removed on rollback (when empty). */
  private readonly madeDirs: string[] = [];
  private readonly knownDirs = new Set<string>();
  /** Artifacts being written, by name: a later entry of the same name waits for the earlier. */
  private readonly writing = new Map<string, Promise<void>>();
  /** Symlinks this call made: checked once more, resolved, before commit. */
  private readonly links: string[] = [];
  private lastProgress = 0;
  /**
   * Artifacts in progress (several local files are copied at once): bytes done and total. For a
   * local file, done is the lesser of bytes copied and bytes hashed: it is not done until both are.
   */
  private readonly active = new Map<string, { bytes: number; total?: number }>();
  /** The artifact reported last: the one progress events name. */
  private current = '';
  /** Sizes of the artifacts finished so far. */
  private doneBytes = 0;

  constructor(
    private readonly lease: Lease,
    private readonly options: StageOptions,
    private readonly signal: AbortSignal,
  ) {
    this.dir = lease.dir;
    this.maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
    this.knownDirs.add(this.dir);
  }

  async begin(sources: readonly string[]): Promise<void> {
    this.manifest = await readManifest(this.dir);
    this.maxBytes = (this.limit = await sizeLimit(this.dir, this.maxBytes)).bytes;
    this.totalBytes = await localTotal(sources);
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
      bytes: this.bytes,
    };
  }

  private check(): void {
    if (this.signal.aborted) throw this.signal.reason;
  }

  private newPart(kind = ''): string {
    const p = path.join(this.dir, `${PART_PREFIX}${kind}${crypto.randomBytes(8).toString('hex')}`);
    this.parts.add(p);
    return p;
  }

  private progress(force: boolean, done?: StageProgress['done']): void {
    const cb = this.options.onProgress;
    if (cb === undefined) return;
    const now = Date.now();
    if (!force && now - this.lastProgress < PROGRESS_MS) return;
    this.lastProgress = now;
    let inFlight = 0;
    for (const a of this.active.values()) inFlight += a.bytes;
    const shown = this.active.get(this.current);
    const p: StageProgress = { artifact: shown === undefined ? '' : this.current, artifactBytes: shown?.bytes ?? 0, bytes: this.doneBytes + inFlight, artifacts: this.artifacts };
    if (shown?.total !== undefined) p.artifactTotal = shown.total;
    if (this.totalBytes !== undefined) p.totalBytes = Math.max(this.totalBytes, p.bytes);
    if (done !== undefined) p.done = done;
    try {
      cb(p);
    } catch {
      /* a progress listener must not break staging */
    }
  }

  /** Counts bytes against the limit; throws ETOOBIG past it. */
  private count(n: number, source: string): void {
    this.bytes += n;
    if (this.bytes > this.maxBytes) throw (this.limit ?? limitOf(this.maxBytes, undefined)).tooBig(source, this.dir);
  }

  async stageSource(spec: string): Promise<void> {
    const remaining = (): number => this.maxBytes - this.bytes;
    const ctx: SourceContext = {
      dir: this.dir,
      partPath: () => this.newPart('download.'),
      signal: this.signal,
      get maxBytes() {
        return remaining();
      },
      tooBig: (source) => (this.limit ?? limitOf(this.maxBytes, undefined)).tooBig(source, this.dir),
      onPartBytes: (n, total) => {
        const a = this.active.get(spec) ?? { bytes: 0 };
        a.bytes += n;
        if (total !== undefined) a.total = total;
        this.active.set(spec, a);
        this.current = spec;
        this.progress(false);
      },
    };
    const inflight = new Set<Promise<void>>();
    let failure: { err: unknown } | undefined;
    const settle = async (): Promise<void> => {
      await Promise.all(inflight);
      if (failure !== undefined) throw failure.err;
    };
    try {
      for await (const entry of openSource(spec, ctx)) {
        if (failure !== undefined) {
          entry.content?.destroy();
          throw failure.err;
        }
        this.check();
        if (entry.type === 'file' && entry.localPath !== undefined) {
          // Plain local files need nothing from the source once named: copy several at once.
          while (inflight.size >= PARALLEL) await Promise.race(inflight);
          const task: Promise<void> = this.entry(entry)
            .catch((err: unknown) => {
              failure ??= { err };
            })
            .finally(() => inflight.delete(task));
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
    } catch (err) {
      e.content?.destroy();
      throw err;
    }
    if (Buffer.byteLength(path.join(this.dir, name)) >= PATH_MAX) {
      e.content?.destroy();
      throw unsafe(e, `its path in the area would be longer than the ${PATH_MAX} bytes the system allows`);
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
   * Makes the directories of `rel` inside the area, refusing to pass through a symlink or a file:
   * a link placed earlier (by this archive or another) must never carry a write outside the area.
   */
  private async ensureDir(rel: string, e: IncomingEntry): Promise<void> {
    if (rel === '.' || rel === '') return;
    let current = this.dir;
    for (const seg of rel.split('/')) {
      current = path.join(current, seg);
      if (this.knownDirs.has(current)) continue;
      const st = await fs.promises.lstat(current).catch((err: unknown) => {
        if (errnoCode(err) === 'ENOENT') return null;
        throw asStagingError(err, 'inspect', current);
      });
      if (st === null) {
        try {
          await fs.promises.mkdir(current);
          this.madeDirs.push(current);
        } catch (err) {
          if (errnoCode(err) !== 'EEXIST') throw asStagingError(err, 'create', current);
          continue; // made by a parallel entry just now; check it on the next pass
        }
      } else if (st.isSymbolicLink()) {
        throw unsafe(e, `${path.relative(this.dir, current)} in the area is a symbolic link, and nothing is written through links`);
      } else if (!st.isDirectory()) {
        throw new StagingError('ECONFLICT', `Cannot stage ${e.name} from ${e.source}: ${current} is a file, not a directory.`, { path: current });
      }
      this.knownDirs.add(current);
    }
  }

  private async file(name: string, e: IncomingEntry): Promise<void> {
    const final = path.join(this.dir, name);
    // In an area this call created, only this call's own artifacts and directories can be there.
    const mightExist = !this.lease.created || name in this.manifest.artifacts || this.knownDirs.has(final);
    const existing = mightExist ? await asyncIo.lstatOrNull(final) : null;
    if (existing?.isDirectory() === true) {
      e.content?.destroy();
      throw new StagingError('ECONFLICT', `Cannot stage ${name} from ${e.source}: a directory of that name is already in ${this.dir}.`, { path: final });
    }
    // A different size is a conflict known before a byte is copied.
    if (existing?.isFile() === true && e.size !== undefined && e.size !== existing.size && this.options.overwrite !== true) {
      e.content?.destroy();
      throw conflict(name, e, final);
    }
    const part = this.newPart();
    let written: { size: number; sha256: string };
    if (e.localPath !== undefined) {
      e.content?.destroy();
      written = await this.copyLocal(name, e.localPath, part, e);
    } else if (e.content !== undefined) {
      written = await this.copyStream(name, e.content, part, e);
    } else {
      throw new StagingError('ESOURCE', `${e.source} gave no content for ${e.name}.`);
    }
    const entry: ManifestEntry = { name, type: 'file', size: written.size, sha256: written.sha256, source: e.source, stagedAt: new Date().toISOString() };
    await this.place(name, final, part, entry, existing);
  }

  /** Puts a finished part in place: skip if identical, conflict or replace if not, else add. */
  private async place(name: string, final: string, part: string, entry: ManifestEntry, existing: fs.Stats | null): Promise<void> {
    if (existing !== null) {
      const same = await this.sameAsExisting(name, final, existing, entry);
      if (same) {
        await fs.promises.unlink(part).catch(() => undefined);
        this.parts.delete(part);
        this.manifest.artifacts[name] ??= entry;
        this.skipped.push(this.manifest.artifacts[name]!);
        this.finished(name, bytesOf(entry), 'skipped');
        return;
      }
      if (this.options.overwrite !== true) throw conflict(name, { name, source: entry.source }, final);
      const aside = this.newPart('replaced.');
      await fs.promises.rename(final, aside);
      this.asides.push({ final, aside });
      this.parts.delete(aside); // kept until commit or rollback, not removed as a part
      await fs.promises.rename(part, final);
      this.parts.delete(part);
      this.replaced.push(entry);
    } else {
      await fs.promises.rename(part, final);
      this.parts.delete(part);
      this.placed.push(final);
      this.added.push(entry);
    }
    this.manifest.artifacts[name] = entry;
    this.finished(name, bytesOf(entry), existing !== null ? 'replaced' : 'added');
  }

  /** One event per finished artifact, naming it, whatever the throttle says. */
  private finished(name: string, size: number, done: NonNullable<StageProgress['done']>): void {
    this.artifacts++;
    this.active.set(name, { bytes: size, total: size });
    this.current = name;
    this.progress(true, done);
    this.active.delete(name);
    this.doneBytes += size;
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

  /** Workers that hash local files beside the copy; started on the first local file. */
  private fileHasher?: FileHasher;

  async close(): Promise<void> {
    await this.fileHasher?.close();
  }

  /**
   * A local file: the kernel copies it (copy_file_range) while a worker hashes the source, and a
   * stat before and after makes sure the source did not change in between, so the hash is the
   * copy's. Large files are copied in chunks instead, so that a cancel stops within 100 ms.
   */
  private async copyLocal(name: string, src: string, part: string, e: IncomingEntry): Promise<{ size: number; sha256: string }> {
    const sourceError = (err: unknown): StagingError =>
      new StagingError('ESOURCE', `Cannot read ${src}: ${(err as Error).message}.`, { path: src, cause: err });
    // The size as the source saw it (its directory walk); the worker's look at the open file decides.
    const size = e.size ?? (await fs.promises.stat(src).catch((err: unknown) => {
      throw sourceError(err);
    })).size;
    // The limit is known to be broken before a byte is copied.
    if (this.bytes + size > this.maxBytes) this.count(size, e.source);
    if (size <= SMALL_SYNC_MAX && e.localStat !== undefined && (await this.bothLocal(src, e.localStat.dev))) {
      return this.copySmall(name, src, part, e);
    }
    let copied = 0;
    let hashed = 0;
    const report = (): void => {
      this.active.set(name, { bytes: Math.min(copied, hashed), total: size });
      this.current = name;
      this.progress(false);
    };
    this.fileHasher ??= new FileHasher();
    const hashing = this.fileHasher.hash(src, (n) => {
      hashed = n;
      report();
    });
    hashing.catch(() => undefined); // awaited below; a copy failure must not leave it unobserved
    try {
      let copiedBytes: number;
      if (size <= COPY_FILE_MAX) {
        // Counted before the copy: several run at once, and each must see the others' bytes.
        this.count(size, e.source);
        await fs.promises.copyFile(src, part, fs.constants.COPYFILE_EXCL);
        this.check();
        copiedBytes = size;
        copied = size;
        report();
      } else {
        copiedBytes = 0;
        await this.copyChunks(src, part, e, (n) => {
          copied += n;
          copiedBytes += n;
          report();
        });
      }
      // The file as the source saw it before the copy began (else as the worker found it on
      // opening), as it is now, and what was hashed must agree: otherwise it changed while it was
      // staged and the hash might not be the copy's.
      const digest = await untilAborted(hashing, this.signal);
      const after = await fs.promises.stat(src);
      const seen = e.localStat ?? digest.opened;
      const copiedSize = size <= COPY_FILE_MAX ? size : copiedBytes;
      const same = (a: { ino: number; size: number; mtimeMs: number }): boolean => a.ino === after.ino && a.size === after.size && a.mtimeMs === after.mtimeMs;
      if (!same(seen) || !same(digest.opened) || digest.size !== after.size || copiedSize !== after.size) {
        throw new StagingError('ESOURCE', `${src} changed while it was being staged; stage it again once it is complete.`, { path: src });
      }
      return { size: digest.size, sha256: digest.sha256 };
    } catch (err) {
      if (this.signal.aborted) throw this.signal.reason;
      if (isStagingError(err)) throw err;
      const errno = errnoCode(err);
      if ((errno === 'ENOENT' || errno === 'EACCES' || errno === 'EPERM' || errno === 'EISDIR') && (err as { path?: string }).path === src) throw sourceError(err);
      throw asStagingError(err, 'copy into', part);
    }
  }

  /** Whether the filesystem of the source `src` (device `dev`) and the area's are both local (see io.ts). */
  private async bothLocal(src: string, dev: number): Promise<boolean> {
    this.areaSync ??= ioFor(this.dir, (await fs.promises.stat(this.dir)).dev).then((io) => io.sync);
    if (!(await this.areaSync)) return false;
    let known = this.sourceSync.get(dev);
    if (known === undefined) {
      known = (await ioFor(src, dev).catch(() => ({ sync: false }))).sync;
      this.sourceSync.set(dev, known);
    }
    return known;
  }

  private areaSync?: Promise<boolean>;
  private readonly sourceSync = new Map<number, boolean>();

  /** A small local file: read once, hashed, written, all synchronously: the hash is of what was written. */
  private copySmall(name: string, src: string, part: string, e: IncomingEntry): { size: number; sha256: string } {
    this.check();
    let data: Buffer;
    try {
      data = fs.readFileSync(src);
    } catch (err) {
      throw new StagingError('ESOURCE', `Cannot read ${src}: ${(err as Error).message}.`, { path: src, cause: err });
    }
    // What was read is what is hashed and written: a change since the walk cannot split them.
    this.count(data.length, e.source);
    try {
      fs.writeFileSync(part, data, { flag: 'wx' });
    } catch (err) {
      throw asStagingError(err, `write ${name} into`, this.dir);
    }
    this.active.set(name, { bytes: data.length, total: data.length });
    this.current = name;
    this.progress(false);
    return { size: data.length, sha256: crypto.createHash('sha256').update(data).digest('hex') };
  }

  private async copyChunks(src: string, part: string, e: IncomingEntry, onCopied: (n: number) => void): Promise<void> {
    const input = await fs.promises.open(src, 'r');
    let output: fs.promises.FileHandle | undefined;
    try {
      output = await fs.promises.open(part, 'wx');
      const buf = Buffer.allocUnsafe(CHUNK);
      for (;;) {
        this.check();
        const { bytesRead } = await input.read(buf, 0, CHUNK, null);
        if (bytesRead === 0) break;
        this.count(bytesRead, e.source);
        await output.write(buf, 0, bytesRead);
        onCopied(bytesRead);
      }
    } finally {
      await input.close().catch(() => undefined);
      await output?.close().catch(() => undefined);
    }
  }

  private async copyStream(name: string, content: Readable, part: string, e: IncomingEntry): Promise<{ size: number; sha256: string }> {
    const hash = crypto.createHash('sha256');
    let size = 0;
    const total = e.size;
    const meter = new Transform({
      transform: (chunk: Buffer, _enc, done) => {
        try {
          this.count(chunk.length, e.source);
        } catch (err) {
          return done(err as Error);
        }
        hash.update(chunk);
        size += chunk.length;
        this.active.set(name, total === undefined ? { bytes: size } : { bytes: size, total });
        this.current = name;
        this.progress(false);
        done(null, chunk);
      },
    });
    const out = fs.createWriteStream(part, { flags: 'wx' });
    let writeError: unknown;
    out.once('error', (err) => (writeError = err));
    try {
      await pipeline(content, meter, out, { signal: this.signal });
    } catch (err) {
      if (this.signal.aborted) throw this.signal.reason;
      if (isStagingError(err)) throw err;
      // Writing failed (a full disk, permissions): the area's problem, not the source's.
      if (writeError !== undefined) throw asStagingError(writeError, `write ${name} into`, this.dir);
      throw new StagingError('ESOURCE', `Could not stage ${e.name} from ${e.source}: ${(err as Error).message}.`, { cause: err });
    }
    return { size, sha256: hash.digest('hex') };
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
    const part = this.newPart();
    await fs.promises.symlink(target, part);
    const entry: ManifestEntry = {
      name,
      type: 'symlink',
      size: Buffer.byteLength(target),
      sha256: crypto.createHash('sha256').update(target).digest('hex'),
      source: e.source,
      stagedAt: new Date().toISOString(),
      linkTarget: target,
    };
    await this.place(name, final, part, entry, existing);
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
    await this.file(name, { ...e, type: 'file', localPath: target, size: st.size });
  }

  /** Writes the manifest and the timestamp, then lets go of what was replaced. */
  async commit(): Promise<void> {
    this.check();
    // A link may lead out through other links, made now or earlier, even where its target does not
    // exist yet. So every link of the area is followed once more, as the kernel would, with what is
    // on disk now; one that would leave the area fails the staging, whichever call made it.
    const realDir = await fs.promises.realpath(this.dir);
    const links = new Set(this.links.map((l) => path.relative(this.dir, l).split(path.sep).join('/')));
    for (const entry of Object.values(this.manifest.artifacts)) if (entry.type === 'symlink') links.add(entry.name);
    for (const name of links) {
      const link = path.join(realDir, name);
      const target = await fs.promises.readlink(link).catch(() => undefined);
      if (target === undefined) continue; // replaced by a file since: nothing to follow
      if ((await resolveInside(realDir, path.dirname(link), target, 0)) === undefined) {
        const made = this.links.some((l) => path.relative(this.dir, l).split(path.sep).join('/') === name);
        throw new StagingError(
          'EUNSAFE',
          made
            ? `Refusing ${name} from this staging: followed through the links of the area, it leads outside it (or loops).`
            : `Refusing this staging: with it, the link ${name} already in the area would lead outside it (or loop).`,
          { path: link },
        );
      }
    }
    await writeManifest(this.dir, this.manifest);
    const stamp = path.join(this.dir, TIMESTAMP_FILE);
    const now = new Date();
    await fs.promises.utimes(stamp, now, now).catch(() => fs.promises.writeFile(stamp, ''));
    for (const { aside } of this.asides) await fs.promises.rm(aside, { force: true, recursive: true }).catch(() => undefined);
    this.asides.length = 0;
    await this.removeParts();
  }

  /** Undoes everything this call did to the area. Never throws: it is on the failure path already. */
  async rollback(): Promise<void> {
    await Promise.all([...this.writing.values()].map((w) => w.catch(() => undefined)));
    await this.removeParts();
    for (const final of this.placed.reverse()) await fs.promises.rm(final, { force: true }).catch(() => undefined);
    for (const { final, aside } of this.asides.reverse()) {
      await fs.promises.rm(final, { force: true }).catch(() => undefined);
      await fs.promises.rename(aside, final).catch(() => undefined);
    }
    for (const dir of this.madeDirs.reverse()) await fs.promises.rmdir(dir).catch(() => undefined);
  }

  private async removeParts(): Promise<void> {
    await Promise.all([...this.parts].map((p) => fs.promises.rm(p, { force: true, recursive: true }).catch(() => undefined)));
    this.parts.clear();
  }
}

/**
 * Where `target`, a link's content, leads from `fromDir`, following links on the way as the
 * kernel does, and taking parts that do not exist as written. Undefined if it ever climbs above
 * `area` (a real path), is absolute, or loops.
 */
async function resolveInside(area: string, fromDir: string, target: string, depth: number): Promise<string | undefined> {
  if (depth > MAX_LINK_DEPTH || path.isAbsolute(target)) return undefined;
  let current = fromDir;
  for (const part of target.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (current === area) return undefined;
      current = path.dirname(current);
      continue;
    }
    const next = path.join(current, part);
    const st = await asyncIo.lstatOrNull(next).catch(() => null);
    if (st?.isSymbolicLink() === true) {
      const inner = await fs.promises.readlink(next).catch(() => undefined);
      if (inner === undefined) return undefined;
      const resolved = await resolveInside(area, current, inner, depth + 1);
      if (resolved === undefined) return undefined;
      current = resolved;
    } else {
      current = next;
    }
  }
  return current === area || isInside(area, current) ? current : undefined;
}

/** What an artifact counts for in progress: its content; a link has none to copy. */
function bytesOf(entry: ManifestEntry): number {
  return entry.type === 'file' ? entry.size : 0;
}

/** `p`, or the signal's reason as soon as it aborts (a worker mid-file is stopped separately). */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}


async function hashFile(p: string): Promise<{ size: number; sha256: string }> {
  const hash = crypto.createHash('sha256');
  let size = 0;
  for await (const chunk of fs.createReadStream(p, { highWaterMark: CHUNK })) {
    hash.update(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return { size, sha256: hash.digest('hex') };
}

function unsafe(e: Pick<IncomingEntry, 'name' | 'source'>, why: string): StagingError {
  return new StagingError('EUNSAFE', `Refusing entry ${JSON.stringify(e.name)} from ${e.source}: ${why}. Nothing from this staging was kept.`);
}

function conflict(name: string, e: Pick<IncomingEntry, 'name' | 'source'>, final: string): StagingError {
  return new StagingError(
    'ECONFLICT',
    `${name} is already staged in ${path.dirname(final)} with different content than ${e.source}. Stage it under another tag, or overwrite it explicitly.`,
    { path: final },
  );
}

/** Names an artifact may not have: the lock protocol's, and the stager's own files. */
function reservedSegment(seg: string, top: boolean): boolean {
  if (seg === LOCK_TARGET || seg === LOCK_NAME || seg.startsWith(`${LOCK_NAME}.`) || seg.startsWith(META_DIR)) return true;
  return top && (seg === TIMESTAMP_FILE || seg === MANIFEST_FILE);
}

/** The entry's name as a safe relative path inside the area, or EUNSAFE naming the entry. */
function checkName(e: Pick<IncomingEntry, 'name' | 'source' | 'type'>): string {
  let name = e.name;
  if (typeof name !== 'string' || name === '') throw unsafe(e, 'it has no name');
  if (/[\u0000-\u001f\u007f]/.test(name)) throw unsafe(e, 'its name contains a NUL or control character');
  if (name.includes('\\')) throw unsafe(e, 'its name contains a backslash');
  if (name.startsWith('/') || /^[A-Za-z]:/.test(name)) throw unsafe(e, 'its name is an absolute path');
  while (name.startsWith('./')) name = name.slice(2);
  if (name.endsWith('/')) name = name.slice(0, -1);
  if (name === '' || name === '.') {
    if (e.type === 'directory') return '.';
    throw unsafe(e, 'it names the area itself');
  }
  const segments = name.split('/');
  segments.forEach((seg, i) => {
    if (seg === '' || seg === '.') throw unsafe(e, 'its name has an empty or "." segment');
    if (seg === '..') throw unsafe(e, 'its name climbs out with ".."');
    if (Buffer.byteLength(seg) > 255) throw unsafe(e, 'a segment of its name is longer than 255 bytes');
    if (reservedSegment(seg, i === 0)) throw unsafe(e, `"${seg}" is reserved for the lock and the manifest`);
  });
  return segments.join('/');
}

/** Total bytes of the sources when all are local (files or directories, links not followed). */
async function localTotal(sources: readonly string[]): Promise<number | undefined> {
  let total = 0;
  for (const spec of sources) {
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(spec)) return undefined;
    // The source itself may be a link (a `latest` link to a build): sources follow it, so count it.
    const st = await fs.promises.stat(spec).catch(() => undefined);
    if (st === undefined) return undefined;
    if (!st.isDirectory()) {
      if (/\.(tar|tgz|txz|zip|tar\.gz|tar\.xz)$/i.test(spec)) return undefined; // unpacked size unknown
      total += st.size;
      continue;
    }
    const stack = [spec];
    while (stack.length > 0) {
      const d = stack.pop()!;
      const entries = await fs.promises.readdir(d, { withFileTypes: true }).catch(() => []);
      await Promise.all(
        entries.map(async (ent) => {
          const p = path.join(d, ent.name);
          if (ent.isDirectory()) stack.push(p);
          else if (ent.isFile()) {
            // Not `total += await …`: that reads `total` before the await and loses parallel updates.
            const { size } = await fs.promises.lstat(p).catch(() => ({ size: 0 }));
            total += size;
          }
        }),
      );
    }
  }
  return total;
}
