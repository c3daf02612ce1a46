/**
 * One verification's walk of a build and hashing of its artifacts, and the problems it finds.
 *
 * Everything is read through descriptors, as in anchored/: the build directory is opened once,
 * each directory below it with `O_NOFOLLOW`, and each artifact with `O_NOFOLLOW | O_NONBLOCK`, then
 * hashed only when the open descriptor is a regular file. A link planted in place of an artifact is
 * never followed, and a FIFO never waited on: both are reported as what they are.
 */
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import { performance } from 'perf_hooks';
import { openBelow, type Dir } from './fs/anchored';
import { callsFor } from './fs/calls';
import { readEntries } from './build/browse';
import { StagingError, asStagingError, errnoCode } from './base/errors';
import { isBookkeeping } from './base/protocol';
import { FileHasher, HashThreadFailed, type FileDigest } from './stage/hasher';
import type { ManifestEntry } from './build/manifest';
import { pause } from './base/slices';
import type { ArtifactFacts, EntryType, VerifyOptions, VerifyProblem, VerifyProgress } from './verifyTypes';

/** Up to this size, on a local filesystem, a file is read and hashed on the main thread with synchronous calls. */
const SMALL_SYNC_MAX = 1024 * 1024;
/** The main thread yields to the event loop at least this often while it hashes small files. */
const SLICE_MS = 8;
const PROGRESS_MS = 100;

const O_READ_ARTIFACT = fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK;

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function typeOf(e: fs.Dirent | fs.Stats): EntryType {
  if (e.isFile()) return 'file';
  if (e.isDirectory()) return 'directory';
  if (e.isSymbolicLink()) return 'symlink';
  if (e.isFIFO()) return 'fifo';
  if (e.isSocket()) return 'socket';
  if (e.isCharacterDevice() || e.isBlockDevice()) return 'device';
  return 'unknown';
}

const DESCRIBED: Record<EntryType, string> = {
  file: 'a file',
  symlink: 'a symbolic link',
  directory: 'a directory',
  fifo: 'a FIFO',
  socket: 'a socket',
  device: 'a device',
  unknown: 'not a regular file',
};

/** "a FIFO", "a symbolic link": an entry's type as a sentence names it. */
export function describeEntryType(type: EntryType): string {
  return DESCRIBED[type];
}

/** The size of the file open as `fd` now, or `fallback` if it cannot be told. */
function sizeNow(fd: number, fallback: number): number {
  try {
    return Math.max(fs.fstatSync(fd).size, fallback);
  } catch {
    return fallback;
  }
}

/** The recorded facts of a listed artifact. */
function recorded(e: ManifestEntry): ArtifactFacts {
  return e.type === 'symlink' ? { type: 'symlink', linkTarget: e.linkTarget! } : { type: 'file', size: e.size, sha256: e.sha256 };
}

function reasonOf(err: unknown): string {
  const code = errnoCode(err);
  if (code === 'EACCES' || code === 'EPERM') return 'permission denied';
  return err instanceof Error ? err.message : String(err);
}

/** One verification: the walk of the build, the hashing, the problems found, the progress. */
export class Verifier {
  files = 0;
  hashedBytes = 0;
  private readonly expected = new Map<string, ManifestEntry>();
  /** Directories that listed artifacts lie in: what is found in their place is remembered. */
  private readonly expectedDirs = new Set<string>();
  /** Such directories that are not there as directories, or cannot be read: why. */
  private readonly blocked = new Map<string, { kind: 'missing' | 'unreadable'; detail: string }>();
  private readonly seen = new Set<string>();
  private readonly problems: VerifyProblem[] = [];
  private readonly hasher: FileHasher;
  private readonly inflight = new Set<Promise<void>>();
  private readonly maxInflight: number;
  /** Bytes hashed so far of the files in worker threads, by name. */
  private readonly partial = new Map<string, number>();
  private readonly buf = Buffer.allocUnsafe(SMALL_SYNC_MAX);
  private sync = false;
  private doneBytes = 0;
  private totalFiles = 0;
  private totalBytes = 0;
  private current: string | undefined;
  private lastReport = 0;
  private lastYield = performance.now();
  private stopped = false;

  constructor(
    private readonly build: Dir,
    private readonly options: VerifyOptions,
  ) {
    const workers = Math.max(1, Math.floor(options.concurrency ?? Math.min(2, os.cpus().length)));
    this.hasher = new FileHasher(workers);
    // One file waiting in each worker beside the one it hashes, so none idles between files.
    this.maxInflight = 2 * workers;
  }

  /** Stops at once: the workers are ended mid-file, and pending hashes fail. */
  stop(): Promise<void> {
    this.stopped = true;
    return this.hasher.close();
  }

  async run(artifacts: readonly ManifestEntry[], sync: boolean): Promise<VerifyProblem[]> {
    this.sync = sync;
    for (let i = 0; i < artifacts.length; i++) {
      // A build of 100,000 artifacts: the extension host keeps its turns.
      if (i % 1024 === 1023) {
        const p = pause();
        if (p !== undefined) await p;
      }
      const entry = artifacts[i];
      const name = entry.name;
      this.expected.set(name, entry);
      this.totalFiles++;
      if (entry.type === 'file') this.totalBytes += entry.size;
      for (let i = name.indexOf('/'); i !== -1; i = name.indexOf('/', i + 1)) this.expectedDirs.add(name.slice(0, i));
    }
    await this.visit(this.build, '');
    while (this.inflight.size > 0) await Promise.race(this.inflight);
    this.check();
    for (const [name, entry] of this.expected) if (!this.seen.has(name)) this.missing(name, entry);
    this.report(true);
    return this.problems.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }

  private check(): void {
    if (this.stopped || this.options.signal?.aborted === true) throw new StagingError('ECANCELED', 'Verification was cancelled.');
  }

  /** Every entry of the directory `dir` (the build's `prefix`), then the directories below it. */
  private async visit(dir: Dir, prefix: string): Promise<void> {
    this.check();
    let entries: fs.Dirent[];
    try {
      let undecodable: fs.Dirent[];
      ({ entries, undecodable } = await readEntries(dir.at('.'), this.sync));
      // No manifest can list a name that is not UTF-8, and read back as a string it would be another
      // file's (or a listed artifact's, hiding itself behind it): there, never listed.
      for (const e of undecodable) this.problem({ path: prefix + e.name, kind: 'unlisted', actual: { type: typeOf(e) }, detail: 'its name is not valid UTF-8' });
    } catch (err) {
      if (prefix === '') throw asStagingError(err, 'read', dir.shown);
      this.block(prefix.slice(0, -1), 'unreadable', `the directory ${prefix.slice(0, -1)} cannot be read (${reasonOf(err)})`);
      return;
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const subdirs: string[] = [];
    for (const e of entries) {
      if (prefix === '' && isBookkeeping(e.name)) continue;
      const name = prefix + e.name;
      const type = typeOf(e);
      if (type === 'directory') subdirs.push(e.name);
      else if (this.expectedDirs.has(name)) this.block(name, 'missing', `${name} is ${DESCRIBED[type]}, not a directory`);
      const entry = this.expected.get(name);
      if (entry === undefined) {
        if (type !== 'directory') this.problem({ path: name, kind: 'unlisted', actual: { type } });
        continue;
      }
      this.seen.add(name);
      this.current = name;
      await this.artifact(dir, e.name, name, entry, type);
    }
    for (const sub of subdirs) {
      const name = prefix + sub;
      let opened: Dir;
      try {
        opened = await openBelow(dir, sub, this.sync);
      } catch (err) {
        // Swapped for a link or a file since it was listed: never entered.
        const code = errnoCode(err);
        if (code === 'ELOOP' || code === 'ENOTDIR') this.block(name, 'missing', `${name} is no longer a directory`);
        else if (code !== 'ENOENT') this.block(name, 'unreadable', `the directory ${name} cannot be read (${reasonOf(err)})`);
        continue;
      }
      try {
        await this.visit(opened, `${name}/`);
      } finally {
        opened.close();
      }
    }
  }

  private block(dir: string, kind: 'missing' | 'unreadable', detail: string): void {
    if (this.expectedDirs.has(dir)) this.blocked.set(dir, { kind, detail });
  }

  /** A listed artifact the walk did not find: missing, or behind a directory that is not one or cannot be read. */
  private missing(name: string, entry: ManifestEntry): void {
    this.files++;
    let why: { kind: 'missing' | 'unreadable'; detail: string } | undefined;
    for (let i = name.indexOf('/'); i !== -1 && why === undefined; i = name.indexOf('/', i + 1)) why = this.blocked.get(name.slice(0, i));
    this.problem({ path: name, kind: why?.kind ?? 'missing', expected: recorded(entry), ...(why !== undefined ? { detail: why.detail } : {}) });
  }

  private problem(p: VerifyProblem): void {
    this.problems.push(p);
  }

  /** One listed artifact, found in the walk as `type`. */
  private async artifact(dir: Dir, base: string, name: string, entry: ManifestEntry, type: EntryType): Promise<void> {
    const expected = recorded(entry);
    if (entry.type === 'symlink') {
      this.files++;
      if (type !== 'symlink') return this.problem({ path: name, kind: 'not-a-link', expected, actual: { type } });
      let target: string;
      try {
        target = await callsFor(this.sync).readlink(dir.at(base));
      } catch (err) {
        return this.problem({ path: name, kind: errnoCode(err) === 'ENOENT' ? 'missing' : 'unreadable', expected, detail: reasonOf(err) });
      }
      if (target !== entry.linkTarget) this.problem({ path: name, kind: 'changed', expected, actual: { type: 'symlink', linkTarget: target } });
      return this.progress();
    }
    if (type !== 'file') {
      this.files++;
      this.doneBytes += entry.size;
      this.problem({ path: name, kind: 'not-a-file', expected, actual: { type } });
      return this.progress();
    }
    const opened = await this.open(dir, base, name, entry);
    if (opened === undefined) return this.progress();
    const { fd, st } = opened;
    if (this.sync && st.size <= SMALL_SYNC_MAX) {
      try {
        this.compare(name, entry, this.hashSync(fd, entry.size + 1), fd);
      } catch (err) {
        this.unreadable(name, entry, err);
      } finally {
        fs.closeSync(fd);
      }
      this.progress();
      // Small files one after another hold the event loop: let it run now and then.
      if (performance.now() - this.lastYield >= SLICE_MS) {
        await nextTurn();
        this.lastYield = performance.now();
        this.check();
      }
      return;
    }
    while (this.inflight.size >= this.maxInflight) await Promise.race(this.inflight);
    this.check();
    const task: Promise<void> = this.hashInWorker(fd, name, entry).finally(() => this.inflight.delete(task));
    this.inflight.add(task);
  }

  /**
   * Opens a listed file without following a link and without waiting on a FIFO, and checks it is a
   * regular file of the recorded size; undefined (with the problem noted) when it is not.
   */
  private async open(dir: Dir, base: string, name: string, entry: ManifestEntry): Promise<{ fd: number; st: fs.Stats } | undefined> {
    const expected = recorded(entry);
    const calls = callsFor(this.sync);
    let fd: number;
    try {
      // A bare descriptor, which this class closes (a FileHandle dropped would be closed by the collector).
      fd = await calls.open(dir.at(base), O_READ_ARTIFACT);
    } catch (err) {
      this.files++;
      this.doneBytes += entry.size;
      const code = errnoCode(err);
      // Exchanged since the walk: a link (ELOOP) or a socket (ENXIO) is not opened, and said so.
      if (code === 'ELOOP') this.problem({ path: name, kind: 'not-a-file', expected, actual: { type: 'symlink' } });
      else if (code === 'ENXIO') this.problem({ path: name, kind: 'not-a-file', expected, actual: { type: 'socket' } });
      else if (code === 'ENOENT') this.problem({ path: name, kind: 'missing', expected });
      else this.problem({ path: name, kind: 'unreadable', expected, detail: reasonOf(err) });
      return undefined;
    }
    let st: fs.Stats;
    try {
      st = await calls.fstat(fd);
    } catch (err) {
      fs.closeSync(fd);
      this.unreadable(name, entry, err);
      return undefined;
    }
    if (!st.isFile() || st.size !== entry.size) {
      fs.closeSync(fd);
      this.files++;
      this.doneBytes += entry.size;
      if (!st.isFile()) this.problem({ path: name, kind: 'not-a-file', expected, actual: { type: typeOf(st) } });
      else this.problem({ path: name, kind: st.size < entry.size ? 'truncated' : 'grown', expected, actual: { type: 'file', size: st.size } });
      return undefined;
    }
    return { fd, st };
  }

  /**
   * Reads a small file through its descriptor, at explicit offsets, into one reused buffer: at most
   * `limit` bytes. A file of the recorded size is read to its end; one that someone makes longer
   * meanwhile (a sparse terabyte, or endless appends) would otherwise hold the event loop for as
   * long as they like, and one byte past the recorded size already says it grew.
   */
  private hashSync(fd: number, limit: number): { size: number; sha256: string } {
    const hash = crypto.createHash('sha256');
    let size = 0;
    for (;;) {
      const got = fs.readSync(fd, this.buf, 0, Math.min(this.buf.length, limit - size), size);
      if (got === 0) break;
      hash.update(this.buf.subarray(0, got));
      size += got;
    }
    return { size, sha256: hash.digest('hex') };
  }

  /** A large file (or any, off a local filesystem) hashed in a worker thread; the descriptor is closed once the worker lets go of it. */
  private async hashInWorker(fd: number, name: string, entry: ManifestEntry): Promise<void> {
    let digest: FileDigest;
    try {
      // As in hashSync: never more than one byte past the recorded size.
      digest = await this.hasher.hash(
        fd,
        (bytes) => {
          this.partial.set(name, bytes);
          this.progress(name);
        },
        entry.size + 1,
      );
      this.compare(name, entry, digest, fd);
    } catch (err) {
      // Stopped: the caller reports the cancel.
      if (this.stopped) return;
      // The tool's own thread failed: that says nothing of the file, so the build is not called damaged.
      if (err instanceof HashThreadFailed) throw err;
      this.unreadable(name, entry, err);
      return;
    } finally {
      this.partial.delete(name);
      fs.close(fd, () => undefined);
    }
    this.progress(name);
  }

  private unreadable(name: string, entry: ManifestEntry, err: unknown): void {
    this.files++;
    this.doneBytes += entry.size;
    this.problem({ path: name, kind: 'unreadable', expected: recorded(entry), detail: reasonOf(err) });
  }

  /** What was read of a file of the recorded size (open as `fd`) against the record. */
  private compare(name: string, entry: ManifestEntry, got: { size: number; sha256: string }, fd: number): void {
    this.files++;
    this.hashedBytes += got.size;
    this.doneBytes += entry.size;
    const expected = recorded(entry);
    // It changed size while it was read: someone is writing it. Reading stopped one byte past the
    // recorded size, so how large it is now is the descriptor's to say.
    if (got.size > entry.size) this.problem({ path: name, kind: 'grown', expected, actual: { type: 'file', size: sizeNow(fd, got.size) } });
    else if (got.size < entry.size) this.problem({ path: name, kind: 'truncated', expected, actual: { type: 'file', size: got.size } });
    else if (got.sha256 !== entry.sha256) this.problem({ path: name, kind: 'changed', expected, actual: { type: 'file', size: got.size, sha256: got.sha256 } });
  }

  private progress(current = this.current): void {
    if (current !== undefined) this.current = current;
    this.report(false);
  }

  private report(force: boolean): void {
    const cb = this.options.onProgress;
    if (cb === undefined) return;
    const now = performance.now();
    if (!force && now - this.lastReport < PROGRESS_MS) return;
    this.lastReport = now;
    let bytes = this.doneBytes;
    for (const n of this.partial.values()) bytes += n;
    const p: VerifyProgress = { files: this.files, totalFiles: this.totalFiles, bytes: Math.min(bytes, this.totalBytes), totalBytes: this.totalBytes };
    if (this.current !== undefined && !force) p.current = this.current;
    try {
      cb(p);
    } catch {
      /* a progress listener must not break verification */
    }
  }
}
