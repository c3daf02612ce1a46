/**
 * How the lock path calls the filesystem. On a local filesystem a metadata call (mkdir, lstat,
 * rmdir) takes a few microseconds, while a round trip through libuv's thread pool costs tens,
 * and taking a lock is a dozen such calls in sequence. So on filesystems known to be local the
 * lock path uses the synchronous API. Everywhere else (NFS, FUSE such as sshfs, SMB, and anything
 * unrecognised) it stays asynchronous, so a server that stops answering cannot stall the event
 * loop of the process holding locks, which may be an editor's extension host.
 */
import * as fs from 'fs';
import { promisify } from 'util';
import { createRecord, mountPoints, readRecord } from './anchored';
import { type Calls, callsFor } from './calls';
import { decodeName, fsPath } from '../base/rawNames';

export interface Io {
  /** True when calls run synchronously (a local filesystem). */
  readonly sync: boolean;
  lstat(p: string): Promise<fs.Stats>;
  /** lstat, or null where nothing is (ENOENT, ENOTDIR): the common answer, so not an exception. */
  lstatOrNull(p: string): Promise<fs.Stats | null>;
  stat(p: string): Promise<fs.Stats>;
  realpath(p: string): Promise<string>;
  mkdir(p: string): Promise<void>;
  rmdir(p: string): Promise<void>;
  unlink(p: string): Promise<void>;
  /** One of the tool's own small files, never through a link or from a FIFO (see anchored/readRecord.ts). */
  readRecord(p: string, shown: string, maxBytes: number): Promise<string>;
  /** Creates `p` with `data` and exactly `mode`; EEXIST if anything is there, link or not. */
  writeNewFile(p: string, data: string, mode?: number): Promise<void>;
  utimes(p: string, atime: Date, mtime: Date): Promise<void>;
  /** `utimes` of `p` itself, never of what a link there leads to. */
  lutimes(p: string, atime: Date, mtime: Date): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  chmod(p: string, mode: number): Promise<void>;
  /** The text of the symbolic link `p` (never followed); EINVAL when `p` is not a link. */
  readlink(p: string): Promise<string>;
  /** Makes `p` a symbolic link whose text is `text`; EEXIST if anything is there. */
  symlink(text: string, p: string): Promise<void>;
  /** The names in the directory `p`. */
  readdir(p: string): Promise<string[]>;
}

const isMissing = (err: unknown): boolean => {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
};

const statfsOf = promisify(fs.statfs) as (p: fs.PathLike) => Promise<fs.StatsFs>;
const asyncCalls = callsFor(false);
export const lstatOf = (p: string): Promise<fs.Stats> => asyncCalls.lstat(fsPath(p));
/** stat(2) of `p`, links followed. */
export const statOf = (p: string): Promise<fs.Stats> => asyncCalls.stat(fsPath(p));
/** The real path of `p`, by the system's realpath(3), as fs.promises.realpath; bytes that are not UTF-8 kept (rawNames.ts). */
export const realpathOf = async (p: string): Promise<string> => decodeName(await asyncCalls.realpath(fsPath(p)));

/** The Io over `calls`: every path goes to the kernel through `fsPath`, so a name whose bytes are not UTF-8 is acted on by those bytes (rawNames.ts). */
function ioOver(calls: Calls): Io {
  return {
    sync: calls.sync,
    lstat: (p) => calls.lstat(fsPath(p)),
    lstatOrNull: (p) =>
      calls.lstatIfThere(fsPath(p)).then(
        (st) => st ?? null,
        (err: unknown) => {
          if (isMissing(err)) return null;
          throw err;
        },
      ),
    stat: (p) => calls.stat(fsPath(p)),
    realpath: async (p) => decodeName(await calls.realpath(fsPath(p))),
    mkdir: (p) => calls.mkdir(fsPath(p)),
    rmdir: (p) => calls.rmdir(fsPath(p)),
    unlink: (p) => calls.unlink(fsPath(p)),
    readRecord: (p, shown, max) => readRecord(p, shown, max, calls.sync),
    writeNewFile: (p, data, mode) => createRecord(p, data, mode, calls.sync),
    utimes: (p, a, m) => calls.utimes(fsPath(p), a, m),
    lutimes: (p, a, m) => calls.lutimes(fsPath(p), a, m),
    rename: (a, b) => calls.rename(fsPath(a), fsPath(b)),
    chmod: (p, mode) => calls.chmod(fsPath(p), mode),
    readlink: (p) => calls.readlink(fsPath(p)),
    symlink: (text, p) => calls.symlink(text, fsPath(p)),
    readdir: async (p) => (await calls.readdirRaw(fsPath(p))).map(decodeName),
  };
}

export const asyncIo: Io = ioOver(asyncCalls);
export const syncIo: Io = ioOver(callsFor(true));

/**
 * statfs magic numbers of local filesystems: ext2/3/4, XFS, Btrfs, tmpfs, overlayfs, ZFS, F2FS,
 * ramfs, JFS, ReiserFS, bcachefs. A list of what is known to be local, not of what is remote:
 * an unknown filesystem gets the safe, asynchronous path.
 */
const LOCAL_TYPES = new Set([0xef53, 0x58465342, 0x9123683e, 0x01021994, 0x794c7630, 0x2fc12fc1, 0xf2f52010, 0x858458f6, 0x3153464a, 0x52654973, 0xca451a4e]);

/** statfs types of filesystems whose clients cache attributes and listings: FUSE (sshfs), NFS, SMB/CIFS. */
const CACHING_TYPES = new Set([0x65735546, 0x6969, 0x517b, 0xfe534d42, 0xff534d42]);

const byDevice = new Map<number, { io: Io; local: boolean }>();

/**
 * The Io for the filesystem of `p`, whose device is `dev` (from a stat the caller already made):
 * statfs runs once per device. `DEVSERVER_STAGING_ASYNC_IO=1` forces the asynchronous path.
 */
export async function ioFor(p: string, dev: number): Promise<Io> {
  const known = byDevice.get(dev);
  if (known !== undefined) return known.io;
  const type = await fsTypeOf(p);
  const local = type !== undefined && LOCAL_TYPES.has(type);
  const io = local && process.env.DEVSERVER_STAGING_ASYNC_IO !== '1' ? syncIo : asyncIo;
  byDevice.set(dev, { io, local });
  return io;
}

/** Real static directories `ioForStaticDir` has seen, and whether each is on a local filesystem. */
const localStaticDirs = new Map<string, boolean>();

/**
 * `ioFor` of a static directory, by its real path: also remembered for `isLocalFilesystem`, which
 * the clock asks of the same directory, so that a command asks statfs once.
 */
export async function ioForStaticDir(realStaticDir: string, dev: number): Promise<Io> {
  const io = await ioFor(realStaticDir, dev);
  localStaticDirs.set(realStaticDir, isLocalDevice(dev));
  return io;
}

/**
 * `io`, the Io of the filesystem of the real path `realRoot`, for walking the tree below it: the
 * asynchronous one where another filesystem is mounted anywhere below (an NFS share as a folder
 * of builds), since a synchronous lstat there could wait on a server that does not answer and
 * hold the event loop while it does.
 */
export function ioForTreeBelow(io: Io, realRoot: string): Io {
  return io.sync && mountedBelow(realRoot) ? asyncIo : io;
}

function mountedBelow(realRoot: string): boolean {
  const inside = realRoot.endsWith('/') ? realRoot : `${realRoot}/`;
  let points: Set<string>;
  try {
    points = mountPoints();
  } catch {
    // Not known: the calls that cannot hold the event loop on a server that does not answer.
    return true;
  }
  for (const m of points) if (m.startsWith(inside)) return true;
  return false;
}

/**
 * Whether the filesystem of device `dev` is known to be local (once `ioFor` has seen it): there
 * the kernel reports every change to a watcher (inotify), whoever made it. On a network
 * filesystem it reports only this client's own, so a waiter must poll for the others'.
 */
export function isLocalDevice(dev: number): boolean {
  return byDevice.get(dev)?.local === true;
}

/**
 * Whether `p` is on a filesystem whose clients cache attributes and listings (NFS, FUSE such as
 * sshfs, SMB): what another client changed may not be seen at once there.
 */
export async function cachesAttributes(p: string): Promise<boolean> {
  const type = await fsTypeOf(p);
  return type !== undefined && CACHING_TYPES.has(type);
}

/**
 * Whether a directory is on a filesystem known to be local (its changes reach inotify). Others
 * (NFS, sshfs and FUSE, SMB, anything unrecognised) see no events for what other machines do, so
 * whoever follows a static directory there must poll.
 */
export async function isLocalFilesystem(p: string): Promise<boolean> {
  const known = localStaticDirs.get(p);
  if (known !== undefined) return known;
  const type = await fsTypeOf(p);
  return type !== undefined && LOCAL_TYPES.has(type);
}

/** The filesystem's type number (statfs), or undefined where it cannot be asked. */
function fsTypeOf(p: string): Promise<number | undefined> {
  return statfsOf(fsPath(p)).then(
    (s) => s.type,
    () => undefined,
  );
}
