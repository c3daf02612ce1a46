/**
 * Acting on the directory that was checked, not on a path that can be re-pointed in between.
 *
 * A shared static directory has co-users who can rename a directory and put a symlink in its place
 * at any instant. A check by path followed by an action by path (realpath, then rename) can then act
 * outside the static directory. So every operation opens the directory it means once
 * (`O_DIRECTORY`, and `O_NOFOLLOW` where a link is not allowed), checks what it opened, and does
 * everything below it through `/proc/self/fd/<fd>/<name>`, which the kernel resolves from the opened
 * directory itself, wherever it has been moved since. Node has no `openat`; this is its effect
 * without a native module (Linux only, as the rest of the core).
 *
 * The tool's own files (owner records, manifests, the audit log, clock probes, timestamps, parts)
 * are never reached through a link: they are created with `O_CREAT | O_EXCL | O_NOFOLLOW`, opened
 * with `O_NOFOLLOW | O_NONBLOCK` (a FIFO planted in their place cannot block the open), and read
 * only when the open descriptor is a regular file of a bounded size. One is written, appended to
 * or touched only when the open descriptor is a regular file with one link: a hard link is the
 * same file under another name, and that name may be outside the static directory.
 */
import * as fs from 'fs';
import * as path from 'path';
import { StagingError, errnoCode } from '../base/errors';
import { META_DIR } from '../base/protocol';
import { decodeName, fsPath } from '../base/rawNames';

const C = fs.constants;
const O_DIR = C.O_RDONLY | C.O_DIRECTORY;
const O_DIR_NOFOLLOW = O_DIR | C.O_NOFOLLOW;

/** An open directory: act below it through `at(name)`. Close it when done. */
export interface Dir {
  readonly fd: number;
  /** The path it was opened by, for messages only: never act on it. */
  readonly shown: string;
  readonly dev: number;
  readonly ino: number;
  /** Its mode when it was opened. */
  readonly mode: number;
  /** The kernel's name for `name` inside this very directory. */
  at(name: string): string;
  close(): void;
}

/** A synchronous call as a settled promise: local filesystems take the synchronous path (io.ts). */
export function settle<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (err) {
    return Promise.reject(err);
  }
}

/** Opens a directory; a name whose bytes are not UTF-8 is opened by those bytes (rawNames.ts). */
function openDirFd(p: string, flags: number, sync = false): Promise<number> {
  const at = fsPath(p);
  if (sync) return settle(() => fs.openSync(at, flags));
  return new Promise((resolve, reject) => fs.open(at, flags, (err, fd) => (err === null ? resolve(fd) : reject(err))));
}

function fstat(fd: number, sync = false): Promise<fs.Stats> {
  if (sync) return settle(() => fs.fstatSync(fd));
  return new Promise((resolve, reject) => fs.fstat(fd, (err, st) => (err === null ? resolve(st) : reject(err))));
}

function makeDir(fd: number, shown: string, st: fs.Stats): Dir {
  let open = true;
  return {
    fd,
    shown,
    dev: st.dev,
    ino: st.ino,
    mode: st.mode,
    at: (name) => `/proc/self/fd/${fd}/${name}`,
    close() {
      if (!open) return;
      open = false;
      try {
        fs.closeSync(fd);
      } catch {
        /* already closed */
      }
    },
  };
}

/** One path segment, never a way up or across. */
function checkName(name: string): void {
  if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) {
    throw new StagingError('EIO', `Internal error: ${JSON.stringify(name)} is not a single path segment.`);
  }
}

/**
 * Opens a directory by path. `follow`: whether a symlink at the last segment may be followed (the
 * static directory as configured may be a link; anything below it is opened with `openBelow`).
 */
export async function openDir(p: string, follow = true, sync = false): Promise<Dir> {
  const fd = await openDirFd(p, follow ? O_DIR : O_DIR_NOFOLLOW, sync);
  try {
    return makeDir(fd, p, await fstat(fd, sync));
  } catch (err) {
    fs.closeSync(fd);
    throw err;
  }
}

/** Opens the directory `name` inside `parent`, refusing a symlink and a non-directory (ENOTDIR, or ELOOP on some kernels). */
export async function openBelow(parent: Dir, name: string, sync = false): Promise<Dir> {
  if (sync) return settle(() => openBelowSync(parent, name));
  checkName(name);
  let fd: number;
  try {
    fd = await openDirFd(parent.at(name), O_DIR_NOFOLLOW);
  } catch (err) {
    // Linux answers ENOTDIR, not ELOOP, for a symlink opened with O_DIRECTORY | O_NOFOLLOW.
    if (errnoCode(err) === 'ENOTDIR' && (await isLink(parent.at(name)))) throw linkError(parent, name);
    throw err;
  }
  try {
    return makeDir(fd, path.join(parent.shown, name), await fstat(fd));
  } catch (err) {
    fs.closeSync(fd);
    throw err;
  }
}

function linkError(parent: Dir, name: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`ELOOP: ${path.join(parent.shown, name)} is a symbolic link`), { code: 'ELOOP', path: path.join(parent.shown, name) });
}

function isLink(p: string, sync = false): Promise<boolean> {
  if (sync) return settle(() => fs.lstatSync(fsPath(p), { throwIfNoEntry: false })?.isSymbolicLink() === true);
  return fs.promises.lstat(fsPath(p)).then(
    (st) => st.isSymbolicLink(),
    () => false,
  );
}

/**
 * The synchronous twin of `openBelow`, for local filesystems (see io.ts): a few microseconds,
 * where a round trip through the thread pool costs tens.
 */
export function openBelowSync(parent: Dir, name: string): Dir {
  checkName(name);
  let fd: number;
  try {
    fd = fs.openSync(fsPath(parent.at(name)), O_DIR_NOFOLLOW);
  } catch (err) {
    if (errnoCode(err) === 'ENOTDIR' && fs.lstatSync(fsPath(parent.at(name)), { throwIfNoEntry: false })?.isSymbolicLink() === true) throw linkError(parent, name);
    throw err;
  }
  try {
    return makeDir(fd, path.join(parent.shown, name), fs.fstatSync(fd));
  } catch (err) {
    fs.closeSync(fd);
    throw err;
  }
}

export interface MakeOptions {
  /** Synchronous calls (a local filesystem, see io.ts). */
  sync?: boolean;
  /** Give a directory this call creates exactly this mode, whatever the umask (default: the umask decides). */
  mode?: number;
}

/**
 * Opens the directory `name` inside `parent`, creating it through `parent`'s descriptor when it is
 * missing (a concurrent creator is fine). A symlink (ELOOP) or a non-directory (ENOTDIR) in its
 * place is refused as by `openBelow`, and nothing is created then.
 */
export async function openOrMakeBelow(parent: Dir, name: string, options: MakeOptions = {}): Promise<Dir> {
  const sync = options.sync === true;
  try {
    return await openBelow(parent, name, sync);
  } catch (err) {
    if (errnoCode(err) !== 'ENOENT') throw err;
  }
  const made = await (sync ? settle(() => fs.mkdirSync(parent.at(name))) : fs.promises.mkdir(parent.at(name))).then(
    () => true,
    (err: unknown) => {
      if (errnoCode(err) !== 'EEXIST') throw err;
      return false;
    },
  );
  const dir = await openBelow(parent, name, sync);
  if (made && options.mode !== undefined) {
    try {
      // Through the descriptor: the directory this call made, wherever it is by now.
      await (sync ? syncFd : asyncFd).fchmod(dir.fd, options.mode);
    } catch (err) {
      dir.close();
      throw err;
    }
    return { ...dir, mode: (dir.mode & ~0o7777) | options.mode };
  }
  return dir;
}

const HAS_PROC_FD = fs.existsSync('/proc/self/fd');

/**
 * A path to what is open as `fd`, which the kernel resolves to the open file or directory itself,
 * whatever has been renamed or linked in its place since (Linux); undefined where there is none.
 */
export function fdPath(fd: number): string | undefined {
  return HAS_PROC_FD ? `/proc/self/fd/${fd}` : undefined;
}

/** Where the kernel says an open directory is now (its path at this instant). */
export function whereIs(dir: Dir): string {
  return decodeName(fs.readlinkSync(`/proc/self/fd/${dir.fd}`, { encoding: 'buffer' }));
}

/**
 * Opens the directory at `realPath` (absolute, without links, as `fs.realpath` gives it) in one
 * call, and keeps it only if the kernel places what it opened exactly there: one lookup instead
 * of one open per level, for a directory deep inside the static directory that is opened often.
 * Undefined when it is missing, not a directory, or elsewhere (a link on the way led there);
 * the caller then descends level by level with `openBelow`, which says what is wrong.
 */
export async function openDirWhere(realPath: string, sync = false): Promise<Dir | undefined> {
  const dir = await openDirIfThere(realPath, sync);
  if (dir === undefined || whereIs(dir) === realPath) return dir;
  dir.close();
  return undefined;
}

/** `openDir` without following a link at the last step; undefined where no directory is to open there (missing, a file, a link). */
export async function openDirIfThere(p: string, sync = false): Promise<Dir | undefined> {
  try {
    return await openDir(p, false, sync);
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP') return undefined;
    throw err;
  }
}

/** True when `child` is `parent` or lies inside it; compares path segments, never string prefixes. */
export function isWithin(parent: string, child: string): boolean {
  return path.relative(parent, child) === '' || isInside(parent, child);
}

/** True when `child` lies strictly inside `parent`; compares path segments, never string prefixes. */
export function isInside(parent: string, child: string): boolean {
  const rel = path.relative(parent, child);
  return rel !== '' && rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel);
}

/**
 * Opens `<root>/<segments…>` one level at a time. A segment that is a symlink is followed only if
 * the directory it leads to is inside `realRoot` (as the kernel places the opened directory, not as
 * the link's text says); anything else fails with EBADTAG naming the path. The caller closes the
 * result. `root` is opened following links (the static directory may be configured through one).
 */
export async function openPath(root: Dir, realRoot: string, segments: readonly string[], shownTag: string, sync = false): Promise<Dir> {
  let current = root;
  let owned = false;
  try {
    for (const seg of segments) {
      let next: Dir;
      try {
        next = await openBelow(current, seg, sync);
      } catch (err) {
        // O_NOFOLLOW | O_DIRECTORY on a link fails with ENOTDIR (or ELOOP): tell a link from a file.
        const code = errnoCode(err);
        if (code !== 'ELOOP' && code !== 'ENOTDIR') throw err;
        if (code === 'ENOTDIR' && !(await isLink(current.at(seg), sync))) throw err;
        // A link: follow it once, then judge where the kernel put us.
        const fd = await openDirFd(current.at(seg), O_DIR, sync).catch((e: unknown) => {
          if (errnoCode(e) !== 'ENOENT' && errnoCode(e) !== 'ENOTDIR' && errnoCode(e) !== 'ELOOP') throw e;
          throw new StagingError('EBADTAG', `Invalid tag ${JSON.stringify(shownTag)}: ${path.join(current.shown, seg)} is a symbolic link that leads nowhere (or not to a directory).`, {
            path: path.join(current.shown, seg),
          });
        });
        next = makeDir(fd, path.join(current.shown, seg), await fstat(fd, sync).catch((e: unknown) => {
          fs.closeSync(fd);
          throw e;
        }));
        const real = whereIs(next);
        if (!isWithin(realRoot, real)) {
          next.close();
          throw new StagingError('EBADTAG', `Invalid tag ${JSON.stringify(shownTag)}: ${path.join(current.shown, seg)} is a symbolic link that leads outside the static directory (to ${real}).`, {
            path: path.join(current.shown, seg),
          });
        }
      }
      if (owned) current.close();
      current = next;
      owned = true;
    }
    if (!owned) {
      // No segments: a second descriptor of the root, so that the caller may close what it got.
      const fd = await openDirFd(root.at('.'), O_DIR, sync);
      return makeDir(fd, root.shown, await fstat(fd, sync));
    }
    return current;
  } catch (err) {
    if (owned) current.close();
    throw err;
  }
}

export interface RecordLimits {
  /** Refuse a record larger than this many bytes. */
  maxBytes: number;
}

function describeType(st: fs.Stats): string {
  if (st.isFIFO()) return 'a FIFO';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  if (st.isDirectory()) return 'a directory';
  if (st.isSymbolicLink()) return 'a symbolic link';
  return 'not a regular file';
}

/** What a file with `nlink` names is, for messages. */
export function hardLinked(nlink: number): string {
  return `a file with ${nlink} hard links (the same file under other names, which may be outside the static directory)`;
}

/**
 * Refuses to write, append to or touch what `st` (the open descriptor's fstat) describes unless it
 * is a regular file with one link (EIO naming `shown`). No link count is 0 as well: a file removed
 * since it was opened takes what it is given to nobody.
 */
export function refuseUnlessOneLink(st: fs.Stats, shown: string): void {
  if (!st.isFile()) throw notARecord(shown, describeType(st));
  if (st.nlink > 1) throw notARecord(shown, hardLinked(st.nlink));
}

/** An error for a record that is not what the tool writes there: a link, a FIFO, a device, too big. */
export function notARecord(shown: string, why: string): StagingError {
  return new StagingError('EIO', `Refusing ${shown}: it is ${why}, not a file this tool wrote. Move it aside (a co-user or another program put it there).`, {
    path: shown,
  });
}

/**
 * Reads one of the tool's own small files (an owner record, a manifest) without following a link
 * and without blocking on a FIFO: ENOENT as usual when it is absent; EIO naming it when it is a
 * link, not a regular file, or larger than `maxBytes`. Synchronous: each step is one short syscall
 * on a regular file, and nothing here can wait on another process.
 */
export function readRecordSync(p: string, shown: string, maxBytes: number): string {
  return readRecordBytesSync(p, shown, maxBytes).toString('utf8');
}

/** `readRecordSync`, as bytes. */
export function readRecordBytesSync(p: string, shown: string, maxBytes: number): Buffer {
  let fd: number;
  try {
    fd = fs.openSync(fsPath(p), C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK);
  } catch (err) {
    if (errnoCode(err) === 'ELOOP') throw notARecord(shown, 'a symbolic link');
    throw err;
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw notARecord(shown, describeType(st));
    if (st.size > maxBytes) throw notARecord(shown, `larger than ${maxBytes} bytes`);
    const buf = Buffer.alloc(Math.min(maxBytes + 1, st.size + 1));
    let n = 0;
    for (;;) {
      const got = fs.readSync(fd, buf, n, buf.length - n, null);
      if (got === 0) break;
      n += got;
      if (n >= buf.length) {
        if (n > maxBytes) throw notARecord(shown, `larger than ${maxBytes} bytes`);
        break;
      }
    }
    return buf.subarray(0, n);
  } finally {
    fs.closeSync(fd);
  }
}

/** `readRecordSync` off the event loop's thread, for filesystems that may stall (NFS, FUSE). */
export async function readRecord(p: string, shown: string, maxBytes: number): Promise<string> {
  return (await readRecordBytes(p, shown, maxBytes)).toString('utf8');
}

/**
 * `readRecord`'s bytes, not decoded: a manifest of 100,000 artifacts (30 MB) decoded in one piece
 * holds the event loop for about 20 ms, so its reader decodes it a slice at a time (manifest.ts).
 */
export async function readRecordBytes(p: string, shown: string, maxBytes: number): Promise<Buffer> {
  return (await readRecordUnlessSeen(p, shown, maxBytes, undefined)).bytes as Buffer;
}

/**
 * What a record is, as far as its reader can tell without reading it: device, inode, size and the
 * modification and change times. A write(2) or truncate changes the times, a replacement the
 * inode; the change time cannot be set by a user. Not seen: the times are set as a write begins
 * (a read during it has part of each version under the final identity: see `readRecordUnlessSeen`),
 * coarse clocks give two writes in one tick the same times, and a write through a shared mapping
 * may not change them until later.
 */
export function recordIdentity(st: fs.Stats): string {
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
}

/**
 * `readRecordBytes`, skipping the read when the file's identity (`recordIdentity`, taken from the
 * descriptor that would be read) is `seen`: a reader that keeps what it made of a large record
 * (a manifest's counts, for a tooltip) pays one open and one fstat while it is unchanged. With
 * the identity, the change time (ms, the filesystem's clock): a reader should not keep what it
 * read of a file changed moments ago, which may have been read in the middle of a write.
 */
export async function readRecordUnlessSeen(p: string, shown: string, maxBytes: number, seen: string | undefined): Promise<{ identity: string; changedMs: number; bytes?: Buffer }> {
  let fh: fs.promises.FileHandle;
  try {
    fh = await fs.promises.open(fsPath(p), C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK);
  } catch (err) {
    if (errnoCode(err) === 'ELOOP') throw notARecord(shown, 'a symbolic link');
    throw err;
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw notARecord(shown, describeType(st));
    if (st.size > maxBytes) throw notARecord(shown, `larger than ${maxBytes} bytes`);
    const identity = recordIdentity(st);
    const changedMs = st.ctimeMs;
    if (identity === seen) return { identity, changedMs };
    // Not zeroed (30 MB of memset is another few milliseconds in one piece): only the bytes read
    // are ever handed out.
    const buf = Buffer.allocUnsafe(Math.min(maxBytes + 1, st.size + 1));
    let n = 0;
    for (;;) {
      const { bytesRead } = await fh.read(buf, n, buf.length - n, null);
      if (bytesRead === 0) break;
      n += bytesRead;
      if (n >= buf.length) {
        if (n > maxBytes) throw notARecord(shown, `larger than ${maxBytes} bytes`);
        break;
      }
    }
    return { identity, changedMs, bytes: buf.subarray(0, n) };
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/**
 * Creates one of the tool's own files with `data`, never through a link and never over anything
 * (EEXIST if the name is taken by anything at all), with exactly `mode` whatever the umask, so that
 * every user who can see the area can read it.
 */
export function createRecordSync(p: string, data: string | Buffer, mode = 0o644): void {
  const fd = fs.openSync(p, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, mode);
  try {
    // Linked elsewhere between the create and the write: that name is not ours to fill.
    refuseUnlessOneLink(fs.fstatSync(fd), p);
    if (typeof data === 'string') fs.writeSync(fd, data);
    else fs.writeSync(fd, data);
    fs.fchmodSync(fd, mode);
  } catch (err) {
    fs.closeSync(fd);
    try {
      fs.unlinkSync(p);
    } catch {
      /* best effort: the name was ours a moment ago */
    }
    throw err;
  }
  fs.closeSync(fd);
}

export async function createRecord(p: string, data: string | Buffer, mode = 0o644): Promise<void> {
  const fh = await fs.promises.open(p, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, mode);
  try {
    refuseUnlessOneLink(await fh.stat(), p);
    await fh.writeFile(data);
    await fh.chmod(mode);
  } catch (err) {
    await fh.close().catch(() => undefined);
    await fs.promises.unlink(p).catch(() => undefined);
    throw err;
  }
  await fh.close();
}

export interface AppendOptions {
  /** The mode of a file this call creates (default 0o644, less the umask unless `exact`). */
  mode?: number;
  /**
   * Create the file only with `O_EXCL` and give it exactly `mode`, whatever the umask; open an
   * existing one without `O_CREAT`. `false`: never create it (ENOENT when it is missing).
   */
  create?: 'umask' | 'exact' | false;
  /** Write nothing when the file already holds this many bytes or more: the answer is then `full`. */
  fullAt?: number;
  /** Synchronous calls (a local filesystem, see io.ts). */
  sync?: boolean;
  /** After a write, hand the descriptor to `keep` instead of closing it: the caller appends to it again, and closes it. */
  keep?: (fd: number) => void;
}

/** What an append did: `full` when `fullAt` was reached and nothing was written. */
export type AppendOutcome = 'written' | 'created' | 'full';

/** The descriptor calls of an append, synchronous or through the thread pool. */
interface FdCalls {
  open(p: string, flags: number, mode: number): Promise<number>;
  fstat(fd: number): Promise<fs.Stats>;
  write(fd: number, data: Buffer): Promise<number>;
  fchmod(fd: number, mode: number): Promise<void>;
  read(fd: number, buf: Buffer, offset: number, length: number, position: number): Promise<number>;
  futimes(fd: number, atime: Date, mtime: Date): Promise<void>;
  /** Settles once the descriptor is closed: on a FUSE or NFS client, that is when written data reaches the server. */
  close(fd: number): Promise<void>;
}

const syncFd: FdCalls = {
  open: (p, flags, mode) => settle(() => fs.openSync(p, flags, mode)),
  fstat: (fd) => settle(() => fs.fstatSync(fd)),
  write: (fd, data) => settle(() => fs.writeSync(fd, data)),
  fchmod: (fd, mode) => settle(() => fs.fchmodSync(fd, mode)),
  read: (fd, buf, offset, length, position) => settle(() => fs.readSync(fd, buf, offset, length, position)),
  futimes: (fd, atime, mtime) => settle(() => fs.futimesSync(fd, atime, mtime)),
  close: (fd) => settle(() => fs.closeSync(fd)),
};

const asyncFd: FdCalls = {
  open: (p, flags, mode) => new Promise((resolve, reject) => fs.open(p, flags, mode, (err, fd) => (err === null ? resolve(fd) : reject(err)))),
  fstat: (fd) => fstat(fd),
  write: (fd, data) => new Promise((resolve, reject) => fs.write(fd, data, (err, n) => (err === null ? resolve(n) : reject(err)))),
  fchmod: (fd, mode) => new Promise((resolve, reject) => fs.fchmod(fd, mode, (err) => (err === null ? resolve() : reject(err)))),
  read: (fd, buf, offset, length, position) =>
    new Promise((resolve, reject) => fs.read(fd, buf, offset, length, position, (err, n) => (err === null ? resolve(n) : reject(err)))),
  futimes: (fd, atime, mtime) => new Promise((resolve, reject) => fs.futimes(fd, atime, mtime, (err) => (err === null ? resolve() : reject(err)))),
  close: (fd) => new Promise((resolve) => fs.close(fd, () => resolve())),
};

const O_APPEND_RECORD = C.O_WRONLY | C.O_APPEND | C.O_NOFOLLOW | C.O_NONBLOCK;

/** Opens a log for appending, creating it as `create` says: the descriptor and whether this call made it. */
async function openForAppend(calls: FdCalls, p: string, shown: string, mode: number, create: AppendOptions['create']): Promise<{ fd: number; created: boolean }> {
  for (let tries = 0; ; tries++) {
    try {
      if (create === 'umask') return { fd: await calls.open(p, O_APPEND_RECORD | C.O_CREAT, mode), created: false };
      if (create !== 'exact' || tries % 2 === 0) return { fd: await calls.open(p, O_APPEND_RECORD, 0), created: false };
      return { fd: await calls.open(p, O_APPEND_RECORD | C.O_CREAT | C.O_EXCL, mode), created: true };
    } catch (err) {
      const code = errnoCode(err);
      if (code === 'ELOOP') throw notARecord(shown, 'a symbolic link');
      // O_NONBLOCK on a FIFO without a reader.
      if (code === 'ENXIO') throw notARecord(shown, 'a FIFO');
      if (code === 'EISDIR') throw notARecord(shown, 'a directory');
      // Missing, then made by another writer in between (or the other way round): look again, a few times.
      const retry = create === 'exact' && ((tries % 2 === 0 && code === 'ENOENT') || (tries % 2 === 1 && code === 'EEXIST'));
      if (!retry || tries >= 5) throw err;
    }
  }
}

/**
 * Appends one line to one of the tool's logs, never through a link and never into a FIFO, a
 * device or a file with other names: the open does not block and the descriptor must be a
 * regular file with one link (else EIO naming it, and nothing is written). The line goes out
 * in one `write` on an `O_APPEND` descriptor, so concurrent writers' lines stay whole.
 */
export async function appendRecord(p: string, shown: string, line: string, options: AppendOptions = {}): Promise<AppendOutcome> {
  const calls = options.sync === true ? syncFd : asyncFd;
  const mode = options.mode ?? 0o644;
  const { fd, created } = await openForAppend(calls, p, shown, mode, options.create ?? 'umask');
  let kept = false;
  try {
    const st = await calls.fstat(fd);
    refuseUnlessOneLink(st, shown);
    // Exactly `mode`: the umask of whoever happened to create it must not decide who may append.
    if (created) await calls.fchmod(fd, mode);
    if (options.fullAt !== undefined && st.size >= options.fullAt) return 'full';
    await calls.write(fd, Buffer.from(line));
    if (options.keep !== undefined) {
      options.keep(fd);
      kept = true;
    }
    return created ? 'created' : 'written';
  } finally {
    if (!kept) await calls.close(fd);
  }
}

/** What `touchRecord` found: the file touched, or no longer the file meant under that name (gone, or another in its place). */
export type TouchOutcome = 'touched' | 'replaced';

/**
 * Sets both times of one of the tool's own files, which must still be the file `ino`, through a
 * descriptor (`futimes`), never by path: the open follows no link and does not block, and what it
 * opened is touched only when it is that very file, regular and with one link. EIO naming it when
 * it has other names (a hard link) or is not a regular file; `replaced` when the name holds
 * another file, a link, or nothing.
 */
export async function touchRecord(p: string, shown: string, ino: number, time: Date, sync = false): Promise<TouchOutcome> {
  const calls = sync ? syncFd : asyncFd;
  let fd: number;
  try {
    fd = await calls.open(p, C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK, 0);
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT' || code === 'ELOOP') return 'replaced';
    throw err;
  }
  try {
    const st = await calls.fstat(fd);
    if (st.ino !== ino) return 'replaced';
    refuseUnlessOneLink(st, shown);
    await calls.futimes(fd, time, time);
    return 'touched';
  } finally {
    await calls.close(fd);
  }
}

/** The end of a log: at most its last `maxBytes` bytes, from `from` (0: the whole file), of its `size`. */
export interface RecordTail {
  data: Buffer;
  from: number;
  size: number;
}

/**
 * Reads the last `maxBytes` bytes of one of the tool's logs, as `readRecord` reads a record: never
 * through a link, never from a FIFO or device (EIO naming it), ENOENT when it is absent.
 */
export async function readRecordTail(p: string, shown: string, maxBytes: number, sync = false): Promise<RecordTail> {
  const calls = sync ? syncFd : asyncFd;
  let fd: number;
  try {
    fd = await calls.open(p, C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK, 0);
  } catch (err) {
    if (errnoCode(err) === 'ELOOP') throw notARecord(shown, 'a symbolic link');
    throw err;
  }
  try {
    const st = await calls.fstat(fd);
    if (!st.isFile()) throw notARecord(shown, describeType(st));
    const from = Math.max(0, st.size - maxBytes);
    const data = Buffer.allocUnsafe(st.size - from);
    let n = 0;
    while (n < data.length) {
      const got = await calls.read(fd, data, n, data.length - n, from + n);
      if (got === 0) break;
      n += got;
    }
    return { data: data.subarray(0, n), from, size: st.size };
  } finally {
    await calls.close(fd);
  }
}

/**
 * Where filesystems are mounted, as the kernel lists them for this process. A bind mount of a
 * directory of the same filesystem has the same device number as its parent, so the device alone
 * does not tell a mount point; this list does (paths as `whereIs` gives them).
 */
export function mountPoints(): Set<string> {
  let text: string;
  try {
    text = fs.readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return new Set();
  }
  // Field 5 is the mount point, with spaces, tabs, newlines and backslashes escaped in octal.
  const unescape = (p: string): string => p.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(parseInt(o, 8)));
  return new Set(
    text
      .split('\n')
      .map((line) => line.split(' ')[4])
      .filter((p): p is string => p !== undefined && p !== '')
      .map(unescape),
  );
}

/** One call of a removal, made synchronously (`now`) or through the thread pool (`later`), as its driver says. */
interface Step<T> {
  now(): T;
  later(): Promise<T>;
}

const step = <T>(now: () => T, later: () => Promise<T>): Step<T> => ({ now, later });
const ifThere = (err: unknown): undefined => {
  if (errnoCode(err) === 'ENOENT') return undefined;
  throw err;
};
/** A step whose ENOENT means done already (the entry went meanwhile). */
const gone = <T>(now: () => T, later: () => Promise<T>): Step<T | undefined> =>
  step(
    () => {
      try {
        return now();
      } catch (err) {
        return ifThere(err);
      }
    },
    () => later().catch(ifThere),
  );
const lstatStep = (p: string): Step<fs.Stats | undefined> => gone(() => fs.lstatSync(p), () => fs.promises.lstat(p));
const unlinkStep = (p: string): Step<void> => gone(() => fs.unlinkSync(p), () => fs.promises.unlink(p));
const rmdirStep = (p: string): Step<void> => gone(() => fs.rmdirSync(p), () => fs.promises.rmdir(p));
const openStep = (dir: Dir, entry: string): Step<Dir> => step(() => openBelowSync(dir, entry), () => openBelow(dir, entry));
const listStep = (dir: Dir): Step<string[]> => step(() => fs.readdirSync(dir.at('.')), () => fs.promises.readdir(dir.at('.')));

/** The mount points a removal must not cross into, or how to read them when it needs them. */
type Mounts = ReadonlySet<string> | (() => ReadonlySet<string>);

/** How deep a removal keeps directories open; what lies deeper is moved up to the top of the tree first. */
const REMOVE_DEPTH = 64;

/**
 * The calls of `removeTree`, in order, each as a `Step` its driver makes and answers: one code
 * path for the synchronous and the asynchronous removal. It walks with a stack of its own, never
 * by recursion (a co-user decides how deep a tree is), and keeps at most `REMOVE_DEPTH` directories
 * open: a directory found deeper is renamed, through the descriptors, to the top of the tree being
 * removed (the same filesystem, inside the same tree), and removed from there.
 */
function* removal(parent: Dir, name: string, mountsOf: Mounts): Generator<Step<unknown>, void, unknown> {
  checkName(name);
  const at = parent.at(name);
  const st = (yield lstatStep(at)) as fs.Stats | undefined;
  if (st === undefined) return;
  if (!st.isDirectory()) {
    yield unlinkStep(at);
    return;
  }
  let root: Dir;
  try {
    root = (yield openStep(parent, name)) as Dir;
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT') return;
    // Swapped for a link or a file since the lstat: remove that entry itself, never what it leads to.
    if (code === 'ELOOP' || code === 'ENOTDIR') yield* removal(parent, name, mountsOf);
    else throw err;
    return;
  }
  // The system's mount table, read once and only when there is something inside to remove: an
  // empty directory is removed by one rmdir, which never crosses into a mount (EBUSY).
  let mounts: ReadonlySet<string> | undefined = typeof mountsOf === 'function' ? undefined : mountsOf;
  const elsewhere = (dir: Dir): StagingError | undefined =>
    dir.dev !== parent.dev || (mounts ??= (mountsOf as () => ReadonlySet<string>)()).has(whereIs(dir))
      ? new StagingError('EIO', `Did not remove ${dir.shown}: another filesystem is mounted there. Unmount it, then try again.`, { path: dir.shown })
      : undefined;
  // Boxed, so that whatever was thrown (even `undefined`) is told apart from nothing thrown.
  let first: { err: unknown } | undefined;
  const levels: { dir: Dir; name: string; entries: string[]; next: number }[] = [];
  let moved = 0;
  try {
    if (root.dev !== parent.dev) throw elsewhere(root)!;
    const entries = (yield listStep(root)) as string[];
    if (entries.length > 0) {
      const mounted = elsewhere(root);
      if (mounted !== undefined) throw mounted;
    }
    levels.push({ dir: root, name, entries, next: 0 });
    while (levels.length > 0) {
      const level = levels[levels.length - 1];
      if (level.next >= level.entries.length) {
        levels.pop();
        level.dir.close();
        if (levels.length > 0) {
          try {
            yield rmdirStep(levels[levels.length - 1].dir.at(level.name));
          } catch (err) {
            first ??= { err };
          }
        }
        continue;
      }
      const entry = level.entries[level.next++];
      try {
        const est = (yield lstatStep(level.dir.at(entry))) as fs.Stats | undefined;
        if (est === undefined) continue;
        if (!est.isDirectory()) {
          yield unlinkStep(level.dir.at(entry));
          continue;
        }
        if (levels.length >= REMOVE_DEPTH) {
          // Too deep to keep open: up to the top, where the walk meets it again (under a name
          // nothing there has: a rename onto a directory that is not empty fails).
          for (let tries = 0; ; tries++) {
            const up = `${META_DIR}.deep.${moved++}`;
            try {
              yield step(
                () => fs.renameSync(level.dir.at(entry), root.at(up)),
                () => fs.promises.rename(level.dir.at(entry), root.at(up)),
              );
            } catch (err) {
              const code = errnoCode(err);
              if (tries < 100 && (code === 'ENOTEMPTY' || code === 'EEXIST')) continue;
              throw err;
            }
            levels[0].entries.push(up);
            break;
          }
          continue;
        }
        let child: Dir;
        try {
          child = (yield openStep(level.dir, entry)) as Dir;
        } catch (err) {
          const code = errnoCode(err);
          if (code === 'ENOENT') continue;
          if (code !== 'ELOOP' && code !== 'ENOTDIR') throw err;
          // A link or file put there since the lstat: the entry goes, never what it leads to.
          yield unlinkStep(level.dir.at(entry));
          continue;
        }
        const inside = elsewhere(child);
        if (inside !== undefined) {
          child.close();
          throw inside;
        }
        try {
          levels.push({ dir: child, name: entry, entries: (yield listStep(child)) as string[], next: 0 });
        } catch (err) {
          child.close();
          throw err;
        }
      } catch (err) {
        first ??= { err };
      }
    }
  } finally {
    for (const level of levels) level.dir.close();
  }
  if (first !== undefined) throw first.err;
  yield rmdirStep(at);
}

function removeNow(steps: Generator<Step<unknown>, void, unknown>): void {
  let r = steps.next();
  while (r.done !== true) {
    let value: unknown;
    let failed: { err: unknown } | undefined;
    try {
      value = r.value.now();
    } catch (err) {
      failed = { err };
    }
    r = failed === undefined ? steps.next(value) : steps.throw(failed.err);
  }
}

async function removeLater(steps: Generator<Step<unknown>, void, unknown>): Promise<void> {
  let r = steps.next();
  while (r.done !== true) {
    let value: unknown;
    let failed: { err: unknown } | undefined;
    try {
      value = await r.value.later();
    } catch (err) {
      failed = { err };
    }
    r = failed === undefined ? steps.next(value) : steps.throw(failed.err);
  }
}

/**
 * Deletes `name` inside `parent` and everything below it, through descriptors: never follows a
 * link (links are unlinked, not entered) and never crosses into another filesystem (a bind mount
 * inside is left alone, and the call fails with EXDEV naming it). Entries that vanish meanwhile
 * are fine. Throws the first other error after trying the rest. However deep the tree, at most
 * `REMOVE_DEPTH` directories are open at once, and the stack does not grow with it.
 */
export function removeTree(parent: Dir, name: string, mounts: Mounts = mountPoints): Promise<void> {
  return removeLater(removal(parent, name, mounts));
}

/** `removeTree`, synchronously: for a local filesystem and a small tree (a lock being removed). */
export function removeTreeSync(parent: Dir, name: string, mounts: Mounts = mountPoints): void {
  removeNow(removal(parent, name, mounts));
}
