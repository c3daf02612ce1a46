/**
 * The one place where the core's filesystem calls are made synchronously or through the thread
 * pool. Code above calls through `Calls` (every call returns a promise) and never branches on
 * which: `callsFor(io.sync)` hands it the synchronous adapter on a local filesystem, where each
 * call is made at once and its promise is already settled when it returns, and the thread pool's
 * on every other (see io.ts for why). Paths are passed to the kernel as given: a caller that names
 * a file by a decoded name gives `fsPath(name)` (rawNames.ts) or a path below an opened directory.
 */
import * as fs from 'fs';

/** A synchronous call as a settled promise: its throw becomes the promise's rejection. */
export function settle<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (err) {
    return Promise.reject(err);
  }
}

export interface Calls {
  /** True for the synchronous adapter (a local filesystem). */
  readonly sync: boolean;
  open(p: fs.PathLike, flags: number, mode?: number): Promise<number>;
  /** Settles once the descriptor is closed: on a FUSE or NFS client, that is when written data reaches the server (or fails to). */
  close(fd: number): Promise<void>;
  fstat(fd: number): Promise<fs.Stats>;
  lstat(p: fs.PathLike): Promise<fs.Stats>;
  /** lstat, undefined where nothing is (ENOENT): the common answer, so not an exception where it can be helped. */
  lstatIfThere(p: fs.PathLike): Promise<fs.Stats | undefined>;
  stat(p: fs.PathLike): Promise<fs.Stats>;
  /** The system's realpath(3), its answer as bytes. */
  realpath(p: fs.PathLike): Promise<Buffer>;
  read(fd: number, buf: Buffer, offset: number, length: number, position: number | null): Promise<number>;
  write(fd: number, data: Buffer, offset?: number, length?: number): Promise<number>;
  fchmod(fd: number, mode: number): Promise<void>;
  chmod(p: fs.PathLike, mode: number): Promise<void>;
  futimes(fd: number, atime: Date, mtime: Date): Promise<void>;
  utimes(p: fs.PathLike, atime: Date, mtime: Date): Promise<void>;
  lutimes(p: fs.PathLike, atime: Date, mtime: Date): Promise<void>;
  mkdir(p: fs.PathLike, mode?: number): Promise<void>;
  rename(from: fs.PathLike, to: fs.PathLike): Promise<void>;
  link(existing: fs.PathLike, p: fs.PathLike): Promise<void>;
  unlink(p: fs.PathLike): Promise<void>;
  rmdir(p: fs.PathLike): Promise<void>;
  readlink(p: fs.PathLike): Promise<string>;
  symlink(text: string, p: fs.PathLike): Promise<void>;
  /** The names in a directory, as UTF-8 strings. */
  readdir(p: fs.PathLike): Promise<string[]>;
  /** The names in a directory, as their bytes. */
  readdirRaw(p: fs.PathLike): Promise<Buffer[]>;
  /** The entries of a directory with their types (`withFileTypes`), names as UTF-8 strings. */
  readdirTyped(p: fs.PathLike): Promise<fs.Dirent[]>;
  /** `readdirTyped` with each name as its bytes (`encoding: 'buffer'`). */
  readdirTypedRaw(p: fs.PathLike): Promise<fs.Dirent<Buffer>[]>;
  /** A directory to read a batch at a time (`opendir`); read it with `readEntry`, close it with `closeDir`. */
  opendir(p: fs.PathLike, options: fs.OpenDirOptions): Promise<fs.Dir>;
  /** The next entry of an `opendir` directory, null at its end. */
  readEntry(dir: fs.Dir): Promise<fs.Dirent | null>;
  closeDir(dir: fs.Dir): Promise<void>;
}

const syncCalls: Calls = {
  sync: true,
  open: (p, flags, mode) => settle(() => fs.openSync(p, flags, mode)),
  close: (fd) => settle(() => fs.closeSync(fd)),
  fstat: (fd) => settle(() => fs.fstatSync(fd)),
  lstat: (p) => settle(() => fs.lstatSync(p)),
  lstatIfThere: (p) => settle(() => fs.lstatSync(p, { throwIfNoEntry: false })),
  stat: (p) => settle(() => fs.statSync(p)),
  realpath: (p) => settle(() => fs.realpathSync.native(p, { encoding: 'buffer' })),
  read: (fd, buf, offset, length, position) => settle(() => fs.readSync(fd, buf, offset, length, position)),
  write: (fd, data, offset = 0, length = data.length - offset) => settle(() => fs.writeSync(fd, data, offset, length)),
  fchmod: (fd, mode) => settle(() => fs.fchmodSync(fd, mode)),
  chmod: (p, mode) => settle(() => fs.chmodSync(p, mode)),
  futimes: (fd, atime, mtime) => settle(() => fs.futimesSync(fd, atime, mtime)),
  utimes: (p, atime, mtime) => settle(() => fs.utimesSync(p, atime, mtime)),
  lutimes: (p, atime, mtime) => settle(() => fs.lutimesSync(p, atime, mtime)),
  mkdir: (p, mode) => settle(() => void fs.mkdirSync(p, mode)),
  rename: (from, to) => settle(() => fs.renameSync(from, to)),
  link: (existing, p) => settle(() => fs.linkSync(existing, p)),
  unlink: (p) => settle(() => fs.unlinkSync(p)),
  rmdir: (p) => settle(() => fs.rmdirSync(p)),
  readlink: (p) => settle(() => fs.readlinkSync(p)),
  symlink: (text, p) => settle(() => fs.symlinkSync(text, p)),
  readdir: (p) => settle(() => fs.readdirSync(p)),
  readdirRaw: (p) => settle(() => fs.readdirSync(p, { encoding: 'buffer' })),
  readdirTyped: (p) => settle(() => fs.readdirSync(p, { withFileTypes: true })),
  readdirTypedRaw: (p) => settle(() => fs.readdirSync(p, { withFileTypes: true, encoding: 'buffer' })),
  opendir: (p, options) => settle(() => fs.opendirSync(p, options)),
  readEntry: (dir) => settle(() => dir.readSync()),
  closeDir: (dir) => settle(() => dir.closeSync()),
};

/** A callback call as a promise: `call(done)` starts it, and `done` settles the promise. */
function pooled<T>(call: (done: (err: NodeJS.ErrnoException | null, value: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => call((err, value) => (err === null ? resolve(value) : reject(err))));
}

/** `pooled` of a call whose callback gives nothing but its error. */
function pooledVoid(call: (done: (err: NodeJS.ErrnoException | null) => void) => void): Promise<void> {
  return new Promise((resolve, reject) => call((err) => (err === null ? resolve() : reject(err))));
}

/*
 * The callback API rather than fs.promises: the first use of fs.promises loads its module, a
 * tenth of a command's start, and a rejected fs.promises call costs more than the call itself.
 */
const asyncCalls: Calls = {
  sync: false,
  open: (p, flags, mode) => pooled((done) => fs.open(p, flags, mode, done)),
  close: (fd) => pooledVoid((done) => fs.close(fd, done)),
  fstat: (fd) => pooled((done) => fs.fstat(fd, done)),
  lstat: (p) => pooled((done) => fs.lstat(p, done)),
  lstatIfThere: (p) =>
    new Promise((resolve, reject) => fs.lstat(p, (err, st) => (err === null ? resolve(st) : err.code === 'ENOENT' ? resolve(undefined) : reject(err)))),
  stat: (p) => pooled((done) => fs.stat(p, done)),
  realpath: (p) => pooled((done) => fs.realpath.native(p, { encoding: 'buffer' }, done)),
  read: (fd, buf, offset, length, position) => pooled((done) => fs.read(fd, buf, offset, length, position, done)),
  write: (fd, data, offset = 0, length = data.length - offset) => pooled((done) => fs.write(fd, data, offset, length, null, done)),
  fchmod: (fd, mode) => pooledVoid((done) => fs.fchmod(fd, mode, done)),
  chmod: (p, mode) => pooledVoid((done) => fs.chmod(p, mode, done)),
  futimes: (fd, atime, mtime) => pooledVoid((done) => fs.futimes(fd, atime, mtime, done)),
  utimes: (p, atime, mtime) => pooledVoid((done) => fs.utimes(p, atime, mtime, done)),
  lutimes: (p, atime, mtime) => pooledVoid((done) => fs.lutimes(p, atime, mtime, done)),
  mkdir: (p, mode) => pooledVoid((done) => fs.mkdir(p, mode, (err) => done(err))),
  rename: (from, to) => pooledVoid((done) => fs.rename(from, to, done)),
  link: (existing, p) => pooledVoid((done) => fs.link(existing, p, done)),
  unlink: (p) => pooledVoid((done) => fs.unlink(p, done)),
  rmdir: (p) => pooledVoid((done) => fs.rmdir(p, done)),
  readlink: (p) => pooled((done) => fs.readlink(p, done)),
  symlink: (text, p) => pooledVoid((done) => fs.symlink(text, p, done)),
  readdir: (p) => pooled((done) => fs.readdir(p, done)),
  readdirRaw: (p) => pooled((done) => fs.readdir(p, { encoding: 'buffer' }, done)),
  readdirTyped: (p) => pooled((done) => fs.readdir(p, { withFileTypes: true }, done)),
  readdirTypedRaw: (p) => pooled((done) => fs.readdir(p, { withFileTypes: true, encoding: 'buffer' }, done)),
  opendir: (p, options) => pooled((done) => fs.opendir(p, options, done)),
  readEntry: (dir) => dir.read(),
  closeDir: (dir) => dir.close(),
};

/** The calls for a filesystem whose Io is synchronous (`io.sync`, a local one) or not. */
export function callsFor(sync: boolean): Calls {
  return sync ? syncCalls : asyncCalls;
}
