/**
 * The filesystem proper-lockfile sees for one lock. proper-lockfile does the atomic mkdir, the
 * heartbeat (utimes every refresh interval) and the compromise detection; this adapter adds what
 * the protocol needs on top, at the only seams proper-lockfile offers:
 *
 * - mkdir builds the whole lock under a temporary name (owner record and the holder's work
 *   directory inside) and renames it into place, so the lock never exists without its record: a
 *   holder killed at any instant leaves either no lock or a complete one, which the judge can tell
 *   dead from its pid.
 * - When the lock already exists, stat fails with EEXIST instead of letting proper-lockfile judge
 *   staleness: its takeover (rmdir, then mkdir) lets two contenders both win. The core judges and
 *   takes over itself (see takeover.ts).
 * - stat and utimes shift times by the filesystem clock offset, so heartbeats are written in the
 *   filesystem's time while proper-lockfile keeps reasoning in local time.
 * - stat reports a lock directory that is no longer the one we made (same path, other inode or
 *   another owner record) as gone, so a lock replaced under us counts as lost.
 * - rmdir moves our lock directory aside in one rename, checks that what it moved was ours (and
 *   puts it back if not), then deletes it; on release with destroy, it runs the hook that moves the
 *   whole area away with the lock still inside it.
 * Every path here is named through the area's open directory (see anchored.ts).
 */
import * as fs from 'fs';
import { openBelowSync, readRecordSync, removeTree, removeTreeSync, type Dir } from './anchored';
import { errnoCode } from './errors';
import { sideName } from './holder';
import type { Io } from './io';
import { COMMAND_FILE, LOCK_NAME, LOCK_NEW_PREFIX, LOCK_TRASH_PREFIX, MAX_OWNER_BYTES, OWNER_FILE } from './protocol';

/** The process's umask, read once (it is set at start and left alone). */
const UMASK = (() => {
  const mask = process.umask(0o022);
  process.umask(mask);
  return mask;
})();

type Callback<T = void> = (err: NodeJS.ErrnoException | null, value?: T) => void;

export interface LockFsState {
  /** How to call the filesystem the lock is on. */
  readonly io: Io;
  /** The area, opened: the lock is `area.at(LOCK_NAME)`. */
  readonly area: Dir;
  /** The lock's path, for messages only. */
  readonly lockPath: string;
  readonly ownerJson: string;
  /** The holder's work directory's name inside the lock (`work.<token>`). */
  readonly workName: string;
  /** Mode of the lock and work directories, whatever the umask: others must be able to read the record. */
  readonly mode: number;
  readonly skewMs: number;
  /** Set once our mkdir succeeded. */
  created: boolean;
  /** The inode of our lock directory, learned from proper-lockfile's first stat. */
  ino?: number;
  /** The device the lock is about to be made on (the area directory's), if known. */
  readonly dev?: number;
  /** The device of our lock directory, learned with `ino`. */
  fsDev?: number;
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
 * Deletes something of ours beside the lock, letting a failure pass for a moment: a FUSE client
 * (sshfs) does not remove a file that another process on it has open, it renames it to
 * `.fuse_hidden…` until that one closes it. So an owner record unlinked while someone was reading it
 * still fills the directory, briefly.
 */
async function rmTreeSoon(io: Io, area: Dir, name: string): Promise<void> {
  for (let tries = 20; ; tries--) {
    try {
      return io.sync ? removeTreeSync(area, name) : await removeTree(area, name);
    } catch (err) {
      if (errnoCode(err) !== 'ENOTEMPTY' || tries === 0) throw err;
    }
    await sleep(25);
  }
}

/** Whether the lock is still the one we made: same inode and, byte for byte, our owner record. */
/**
 * The usual release on a local filesystem: our lock holds just its record and an empty work
 * directory, so it goes in a handful of calls, through the moved lock's own descriptor (opened
 * without following a link, so a name swapped meanwhile leads nowhere). False when there is more
 * to it (parts of an unfinished staging, a command record): then the caller walks it.
 */
function removeKnownSync(area: Dir, name: string, workName: string): boolean {
  let dir: Dir;
  try {
    dir = openBelowSync(area, name);
  } catch {
    return false;
  }
  try {
    fs.unlinkSync(dir.at(OWNER_FILE));
    fs.rmdirSync(dir.at(workName));
  } catch {
    return false;
  } finally {
    dir.close();
  }
  try {
    fs.rmdirSync(area.at(name));
    return true;
  } catch {
    return false;
  }
}

export async function isOurLock(state: LockFsState, lockPath = state.area.at(LOCK_NAME)): Promise<boolean> {
  const st = await state.io.lstatOrNull(lockPath);
  // A replacement often gets the inode just freed: the record tells instances apart.
  if (st === null || (state.ino !== undefined && st.ino !== state.ino)) return false;
  try {
    return (await state.io.readRecord(`${lockPath}/${OWNER_FILE}`, `${state.lockPath}/${OWNER_FILE}`, MAX_OWNER_BYTES)) === state.ownerJson;
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw err;
  }
}

export function makeLockFs(state: LockFsState): LockFs {
  const { io, area } = state;
  const lockPath = area.at(LOCK_NAME);
  const ownerPath = `${lockPath}/${OWNER_FILE}`;
  const shift = (d: Date, by: number): Date => (by === 0 ? d : new Date(d.getTime() + by));
  const known = state.dev === undefined ? undefined : precisionByDev.get(state.dev);
  const replaced = (): NodeJS.ErrnoException => coded('ENOENT', `${state.lockPath} was removed and replaced by another lock`);
  const lost = (): NodeJS.ErrnoException => coded('ECOMPROMISED', `${state.lockPath} is no longer our lock: it was removed or replaced by another`);

  /** Moves our lock out of its place in one rename, then deletes it; puts back anything not ours. */
  const removeOurs = async (): Promise<void> => {
    const aside = sideName(LOCK_TRASH_PREFIX);
    try {
      await io.rename(lockPath, area.at(aside));
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') throw lost();
      throw err;
    }
    // Between our check and the rename another instance may have taken the place (a force-release
    // and a new holder): then put it back at once. Its holder's writes go through its own lock's
    // name, so nothing of it could change while it was out of place.
    if (!(await isOurLock(state, area.at(aside)))) {
      await io.rename(area.at(aside), lockPath).catch(() => undefined);
      throw lost();
    }
    if (!(io.sync && removeKnownSync(area, aside, state.workName))) await rmTreeSoon(io, area, aside);
  };

  const create = async (): Promise<void> => {
    const tempName = sideName(LOCK_NEW_PREFIX);
    const temp = area.at(tempName);
    try {
      await io.mkdir(temp);
    } catch (err) {
      // The area itself is gone (destroyed since it was opened).
      if (errnoCode(err) === 'ENOENT') throw coded('ENOENT', `${state.lockPath}: its staging area was removed`);
      throw err;
    }
    try {
      // mkdir's mode goes through the umask; set it exactly only where the umask took something.
      const chmod = (state.mode & ~UMASK) !== state.mode;
      if (chmod) await io.chmod(temp, state.mode);
      await io.writeNewFile(`${temp}/${OWNER_FILE}`, state.ownerJson, 0o644);
      await io.mkdir(`${temp}/${state.workName}`);
      if (chmod) await io.chmod(`${temp}/${state.workName}`, state.mode);
      // Atomic: the lock appears whole, or (EEXIST, ENOTEMPTY, ENOTDIR for a legacy lock file) not at all.
      await io.rename(temp, lockPath);
    } catch (err) {
      await rmTreeSoon(io, area, tempName).catch(() => undefined);
      const code = errnoCode(err);
      if (code === 'EEXIST' || code === 'ENOTEMPTY' || code === 'ENOTDIR' || code === 'EISDIR') throw coded('EEXIST', `${state.lockPath} already exists`);
      // SFTP (sshfs) refuses a rename onto an existing name with EPERM (the lock may be gone again
      // by now): unless this user may not write the area at all, that means someone holds it.
      if (code === 'EPERM' && (await fs.promises.access(area.at('.'), fs.constants.W_OK).then(() => true, () => false))) {
        throw coded('EEXIST', `${state.lockPath} already exists`);
      }
      // Our temporary lock was cleared away as litter by the holder of the lock: it is held.
      if (code === 'ENOENT') throw coded('EEXIST', `${state.lockPath} already exists`);
      throw err;
    }
    state.created = true;
  };

  const statOurs = async (): Promise<{ mtime: Date }> => {
    // proper-lockfile only stats before creating when the lock already exists.
    if (!state.created) throw coded('EEXIST', `${state.lockPath} already exists`);
    const st = await io.stat(lockPath);
    const mtime = shift(st.mtime, -state.skewMs);
    if (state.ino === undefined) {
      state.ino = st.ino;
      state.fsDev = st.dev;
      // The area was swapped for one on another filesystem since it was checked: the carried
      // precision may be wrong for it. Fail; proper-lockfile then removes the lock again.
      if (known !== undefined && st.dev !== state.dev) throw coded('EXDEV', `${state.lockPath} is not on the filesystem its staging area was on a moment ago`);
      return { mtime };
    }
    if (st.ino !== state.ino) throw replaced();
    // Inode and mtime alone do not tell: a replacement often gets the inode just freed, and its
    // mtime can equal ours (proper-lockfile's precision probe stamps whole seconds + 5 ms, and
    // some filesystems keep whole seconds). Our owner record does.
    const text = await io.readRecord(ownerPath, `${state.lockPath}/${OWNER_FILE}`, MAX_OWNER_BYTES).catch((err: unknown) => {
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
    // The inode tells most replacements; the record is checked once the lock is moved (below).
    const st = await io.lstatOrNull(lockPath);
    if (st === null || st.ino !== state.ino) throw lost();
    if (hook === undefined) return removeOurs();
    try {
      await hook();
    } catch (err) {
      // The area could not be destroyed: still remove our lock, then report why.
      if (await isOurLock(state).catch(() => false)) await removeOurs().catch(() => undefined);
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
        if (readRecordSync(ownerPath, ownerPath, MAX_OWNER_BYTES) !== state.ownerJson) return;
        // A command still running under the lock keeps it: judges on this machine follow the command.
        if (fs.existsSync(`${lockPath}/${state.workName}/${COMMAND_FILE}`)) return;
        const aside = area.at(sideName(LOCK_TRASH_PREFIX));
        fs.renameSync(lockPath, aside);
        // Synchronous and short at exit: what cannot go now (parts of an unfinished staging) is
        // litter of a dead pid, which the next holder of the area clears.
        fs.rmSync(aside, { recursive: true, force: true });
      } catch {
        /* best effort at exit */
      }
    },
  };
  if (known !== undefined) Object.defineProperty(lockFs, known.key, { value: known.value });
  return lockFs;
}
