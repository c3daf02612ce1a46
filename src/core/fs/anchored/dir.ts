/**
 * Directories opened once and acted on through their descriptors: opened by path, below an opened
 * one without following a link, made where missing, and found again where the kernel places them.
 */
import * as fs from 'fs';
import * as path from 'path';
import { StagingError, errnoCode } from '../../base/errors';
import { decodeName, fsPath } from '../../base/rawNames';
import { callsFor } from '../calls';

const C = fs.constants;
export const O_DIR = C.O_RDONLY | C.O_DIRECTORY;
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

/** Opens a directory; a name whose bytes are not UTF-8 is opened by those bytes (rawNames.ts). */
export function openDirFd(p: string, flags: number, sync = false): Promise<number> {
  return callsFor(sync).open(fsPath(p), flags);
}

export function makeDir(fd: number, shown: string, st: fs.Stats): Dir {
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
export function checkName(name: string): void {
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
    return makeDir(fd, p, await callsFor(sync).fstat(fd));
  } catch (err) {
    fs.closeSync(fd);
    throw err;
  }
}

/** Opens the directory `name` inside `parent`, refusing a symlink and a non-directory (ENOTDIR, or ELOOP on some kernels). */
export async function openBelow(parent: Dir, name: string, sync = false): Promise<Dir> {
  checkName(name);
  let fd: number;
  try {
    fd = await openDirFd(parent.at(name), O_DIR_NOFOLLOW, sync);
  } catch (err) {
    // Linux answers ENOTDIR, not ELOOP, for a symlink opened with O_DIRECTORY | O_NOFOLLOW.
    if (errnoCode(err) === 'ENOTDIR' && (await isLink(parent.at(name), sync))) throw linkError(parent, name);
    throw err;
  }
  try {
    return makeDir(fd, path.join(parent.shown, name), await callsFor(sync).fstat(fd));
  } catch (err) {
    fs.closeSync(fd);
    throw err;
  }
}

function linkError(parent: Dir, name: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`ELOOP: ${path.join(parent.shown, name)} is a symbolic link`), { code: 'ELOOP', path: path.join(parent.shown, name) });
}

export function isLink(p: string, sync = false): Promise<boolean> {
  return callsFor(sync).lstat(fsPath(p)).then(
    (st) => st.isSymbolicLink(),
    () => false,
  );
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
  const made = await callsFor(sync).mkdir(parent.at(name)).then(
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
      await callsFor(sync).fchmod(dir.fd, options.mode);
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
