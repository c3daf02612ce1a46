/**
 * The filesystem proper-lockfile sees for one lock. proper-lockfile does the atomic mkdir, the
 * heartbeat (utimes every refresh interval) and the compromise detection; this adapter adds what
 * the protocol needs on top, at the only seams proper-lockfile offers:
 *
 * - mkdir writes the owner record inside the new lock directory before proper-lockfile reads the
 *   directory's mtime, so the record is there for as long as the lock is, and writing it does not
 *   look like someone else touching the lock.
 * - When the lock already exists, stat fails with EEXIST instead of letting proper-lockfile judge
 *   staleness: its takeover (rmdir, then mkdir) lets two contenders both win. The core judges and
 *   takes over itself (see takeover.ts).
 * - stat and utimes shift times by the filesystem clock offset, so heartbeats are written in the
 *   filesystem's time while proper-lockfile keeps reasoning in local time.
 * - stat reports a lock directory that is no longer the one we made (same path, other inode or
 *   another owner record) as gone, so a lock replaced under us counts as lost.
 * - rmdir removes only our own lock directory (with its owner record), or, on release with
 *   destroy, runs the hook that moves the whole area away with the lock still inside it.
 */
import * as fs from 'fs';
import * as path from 'path';
import { errnoCode } from './errors';
import type { Io } from './io';
import { COMMAND_DIR, COMMAND_FILE, OWNER_FILE } from './protocol';

type Callback<T = void> = (err: NodeJS.ErrnoException | null, value?: T) => void;

export interface LockFsState {
  /** How to call the filesystem the lock is on. */
  readonly io: Io;
  readonly lockPath: string;
  readonly ownerJson: string;
  readonly skewMs: number;
  /** Set once our mkdir succeeded. */
  created: boolean;
  /** The inode of our lock directory, learned from proper-lockfile's first stat. */
  ino?: number;
  /** The device the lock is about to be made on (the area directory's), if known. */
  readonly dev?: number;
  /** The device of our lock directory, learned with `ino`. */
  fsDev?: number;
  /** Make the directory for the record of a command run under the lock (see lifetime.ts). */
  readonly commandDir?: boolean;
  /** Replaces the plain removal on release, for release with destroy. */
  removeHook?: () => Promise<void>;
}

/** The subset of `fs` proper-lockfile calls when `realpath` is false. */
export interface LockFs {
  mkdir(p: string, cb: Callback): void;
  stat(p: string, cb: Callback<{ mtime: Date }>): void;
  utimes(p: string, atime: Date, mtime: Date, cb: Callback): void;
  rmdir(p: string, cb: Callback): void;
  rmdirSync(p: string): void;
}

function coded(code: string, message: string): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code });
}

/**
 * proper-lockfile probes the filesystem's mtime precision (a utimes and a stat) on every lock
 * unless the fs object it is given carries the answer of an earlier probe, under a private symbol.
 * Each lock has its own adapter, so the answer is carried over here, per device: precision is a
 * property of the filesystem. Only 's' and 'ms' are recognised; anything else is not carried.
 */
const precisionByDev = new Map<number, { key: symbol; value: 's' | 'ms' }>();

/** After a lock was taken: keeps the precision proper-lockfile found for the next lock on that device. */
export function rememberPrecision(lockFs: LockFs, state: LockFsState): void {
  if (state.fsDev === undefined) return;
  for (const key of Object.getOwnPropertySymbols(lockFs)) {
    const value = (lockFs as unknown as Record<symbol, unknown>)[key];
    if (value === 's' || value === 'ms') precisionByDev.set(state.fsDev, { key, value });
  }
}

/** Runs a promise-returning step and hands its outcome to a Node-style callback, for proper-lockfile. */
function toCallback<T>(p: Promise<T>, cb: Callback<T>): void {
  p.then(
    (v) => cb(null, v),
    (err: NodeJS.ErrnoException) => cb(err),
  );
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * rmdir that lets ENOTEMPTY pass for a moment: a FUSE client (sshfs) does not remove a file that
 * another process on it has open, it renames it to `.fuse_hidden…` until that one closes it. So
 * an owner record unlinked while someone was reading it still fills the directory, briefly.
 */
async function rmdirSoon(io: Io, p: string): Promise<void> {
  for (let tries = 20; ; tries--) {
    try {
      return await io.rmdir(p);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return;
      if (errnoCode(err) !== 'ENOTEMPTY' || tries === 0) throw err;
    }
    await sleep(25);
  }
}

/** Whether the lock is still the one we made: same inode and, byte for byte, our owner record. */
async function isOurLock(state: LockFsState): Promise<boolean> {
  const st = await state.io.lstatOrNull(state.lockPath);
  // A replacement often gets the inode just freed: the record tells instances apart.
  if (st === null || (state.ino !== undefined && st.ino !== state.ino)) return false;
  try {
    return (await state.io.readFile(path.join(state.lockPath, OWNER_FILE))) === state.ownerJson;
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw err;
  }
}

export function makeLockFs(state: LockFsState): LockFs {
  const { io, lockPath } = state;
  const ownerPath = path.join(lockPath, OWNER_FILE);
  const shift = (d: Date, by: number): Date => (by === 0 ? d : new Date(d.getTime() + by));
  const known = state.dev === undefined ? undefined : precisionByDev.get(state.dev);
  const replaced = (): NodeJS.ErrnoException => coded('ENOENT', `${lockPath} was removed and replaced by another lock`);

  const commandPath = path.join(lockPath, COMMAND_DIR);
  const removeOurs = async (): Promise<void> => {
    if (state.commandDir === true) {
      await io.unlink(path.join(commandPath, COMMAND_FILE)).catch(() => undefined);
      await io.rmdir(commandPath).catch(() => undefined);
    }
    await io.unlink(ownerPath).catch(() => undefined);
    await rmdirSoon(io, lockPath);
  };

  const create = async (): Promise<void> => {
    await io.mkdir(lockPath);
    state.created = true;
    try {
      // The directory is brand new, so the record cannot exist unless something is very wrong.
      await io.writeNewFile(ownerPath, state.ownerJson);
      if (state.commandDir === true) await io.mkdir(commandPath);
    } catch (err) {
      if (state.commandDir === true) await io.rmdir(commandPath).catch(() => undefined);
      // A failed write (a full disk) leaves the record created but empty, and rmdir would then
      // fail and leave a lock behind. EEXIST means the record is not ours: leave it alone.
      if (errnoCode(err) !== 'EEXIST') await io.unlink(ownerPath).catch(() => undefined);
      await io.rmdir(lockPath).catch(() => undefined);
      throw err;
    }
  };

  const statOurs = async (): Promise<{ mtime: Date }> => {
    // proper-lockfile only stats before creating when the lock already exists.
    if (!state.created) throw coded('EEXIST', `${lockPath} already exists`);
    const st = await io.stat(lockPath);
    const mtime = shift(st.mtime, -state.skewMs);
    if (state.ino === undefined) {
      state.ino = st.ino;
      state.fsDev = st.dev;
      // The area was swapped for one on another filesystem since it was checked: the carried
      // precision may be wrong for it. Fail; proper-lockfile then removes the lock again.
      if (known !== undefined && st.dev !== state.dev) throw coded('EXDEV', `${lockPath} is not on the filesystem its staging area was on a moment ago`);
      return { mtime };
    }
    if (st.ino !== state.ino) throw replaced();
    // Inode and mtime alone do not tell: a replacement often gets the inode just freed, and its
    // mtime can equal ours (proper-lockfile's precision probe stamps whole seconds + 5 ms, and
    // some filesystems keep whole seconds). Our owner record does.
    const text = await io.readFile(ownerPath).catch((err: unknown) => {
      if (errnoCode(err) === 'ENOENT') throw replaced();
      throw err;
    });
    if (text !== state.ownerJson) throw replaced();
    return { mtime };
  };

  const remove = async (): Promise<void> => {
    const hook = state.removeHook;
    state.removeHook = undefined;
    // Gone or replaced: nothing of ours to remove, and the holder must hear that it lost the lock.
    if (!(await isOurLock(state))) throw coded('ECOMPROMISED', `${lockPath} is no longer our lock: it was removed or replaced by another`);
    if (hook === undefined) return removeOurs();
    try {
      await hook();
    } catch (err) {
      // The area could not be destroyed: still remove our lock, then report why.
      await removeOurs().catch(() => undefined);
      throw err;
    }
  };

  const lockFs: LockFs = {
    mkdir: (_p, cb) => toCallback(create(), cb),
    stat: (_p, cb) => toCallback(statOurs(), cb),
    utimes: (_p, atime, mtime, cb) => toCallback(io.utimes(lockPath, shift(atime, state.skewMs), shift(mtime, state.skewMs)), cb),
    rmdir: (_p, cb) => toCallback(remove(), cb),
    // Called by proper-lockfile's exit handler (signal-exit) for locks still held at exit.
    rmdirSync() {
      try {
        const st = fs.lstatSync(lockPath);
        if (state.ino !== undefined && st.ino !== state.ino) return;
        if (fs.readFileSync(ownerPath, 'utf8') !== state.ownerJson) return;
        // A command still running under the lock keeps it: judges on this machine follow the command.
        if (fs.existsSync(path.join(commandPath, COMMAND_FILE))) return;
        if (state.commandDir === true) fs.rmdirSync(commandPath);
        fs.unlinkSync(ownerPath);
        fs.rmdirSync(lockPath);
      } catch {
        /* best effort at exit */
      }
    },
  };
  if (known !== undefined) Object.defineProperty(lockFs, known.key, { value: known.value });
  return lockFs;
}
