/**
 * The filesystem proper-lockfile sees for one lock. proper-lockfile does the atomic placing, the
 * heartbeat (utimes every refresh interval) and the compromise detection; this adapter adds what
 * the protocol needs on top, at the only seams proper-lockfile offers:
 *
 * - mkdir builds the whole lock under a temporary name (owner record, proposed fencing token and
 *   the holder's work directory inside) and renames it into place, so the lock never exists
 *   without its record: a holder killed at any instant leaves either no lock or a complete one,
 *   which the judge can tell dead from its pid.
 * - When the lock already exists, stat fails with EEXIST instead of letting proper-lockfile judge
 *   staleness: its takeover (rmdir, then mkdir) lets two contenders both win. The core judges and
 *   takes over itself (see takeover.ts).
 * - stat and utimes shift times by the filesystem clock offset, so heartbeats are written in the
 *   filesystem's time while proper-lockfile keeps reasoning in local time.
 * - stat reports a lock directory that is no longer the one we made as gone, so a lock replaced
 *   under us counts as lost.
 * - rmdir releases by names only this lock has (see `releaseOurs`); on release with destroy it runs
 *   the hook that takes the area's entries with it.
 *
 * Which lock is ours, while it is held: on a local filesystem the holder keeps its lock directory
 * open from the moment it made it. An inode cannot be freed, so its number cannot be given to
 * another file, while it is open; so the same device and inode is this very lock, whatever was
 * renamed meanwhile. Elsewhere (NFS, sshfs: a server can reuse an inode number another client still
 * has open, and a FUSE client numbers inodes its own way) it is, byte for byte, our owner record.
 * Those are this process's own looks, for the heartbeat. Anything that changes the area is done by
 * a name only this lock has: its work directory `work.<token>`.
 *
 * Every path here is named through the area's open directory or the lock's (see anchored/dir.ts).
 */
import * as fs from 'fs';
import { openDir, readRecordSync, removeTree, type Dir } from '../fs/anchored';
import { errnoCode } from '../base/errors';
import { CARRIER_PREFIX, restoreCarriers } from './fence';
import { sideName } from '../base/holder';
import type { Io } from '../fs/io';
import { COMMAND_FILE, COMMIT_FILE, FENCE_FILE, LOCK_FENCED_PREFIX, LOCK_NAME, LOCK_NEW_PREFIX, LOCK_TRASH_PREFIX, MAX_OWNER_BYTES, OWNER_FILE } from '../base/protocol';
import { step } from '../base/steps';
import { holdsUnfinishedCommit, putAside, removeEmptyLock } from './unlock';

/** The process's umask, read once (it is set at start and left alone). */
const UMASK = (() => {
  const mask = process.umask(0o022);
  process.umask(mask);
  return mask;
})();

const C = fs.constants;

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
  /** Set once our lock was placed. */
  created: boolean;
  /** The inode of our lock directory (as this client numbers it). */
  ino?: number;
  /** The device the lock is about to be made on (the area directory's), if known. */
  readonly dev?: number;
  /** The device of our lock directory, learned with `ino`. */
  fsDev?: number;
  /** Local filesystems: our lock directory, open from the moment it was made until it is deleted. */
  lockFd?: number;
  /** The lock's fstat once it was in place, for proper-lockfile's first stat. */
  placed?: fs.Stats;
  /** Whether the token was settled: until then the counter may be in our work directory (fence.ts). */
  settled?: boolean;
  /** The lock's mtime as proper-lockfile last read or set it (this process's clock). */
  knownMtime?: Date;
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

/** Where an open descriptor's directory is, for the kernel (see anchored/dir.ts). */
const fdDir = (fd: number): string => `/proc/self/fd/${fd}`;

const shift = (d: Date, by: number): Date => (by === 0 ? d : new Date(d.getTime() + by));

/** Whether the umask takes bits from `mode`, so that what is made must be given `mode` afterwards. */
const umaskTakes = (mode: number): boolean => (mode & ~UMASK) !== mode;

/** The work directory's name below the area, through the lock: the fence. */
export const workOf = (state: Pick<LockFsState, 'workName'>): string => `${LOCK_NAME}/${state.workName}`;

/**
 * proper-lockfile probes the filesystem's mtime precision (a utimes and a stat) on every lock
 * unless the fs object it is given carries the answer of an earlier probe, under a private symbol.
 * Each lock has its own adapter, so the answer is carried over here, per device: precision is a
 * property of the filesystem. Only 's' and 'ms' are recognised; anything else is not carried.
 */
const precisionByDev = new Map<number, { key: symbol; value: 's' | 'ms' }>();

/** After a lock was taken: keeps the precision proper-lockfile found for the next lock on that device. */
export function rememberPrecision(lockFs: LockFs, state: LockFsState): void {
  if (state.fsDev === undefined || precisionByDev.has(state.fsDev)) return;
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
export async function rmTreeSoon(io: Io, area: Dir, name: string): Promise<void> {
  for (let tries = 20; ; tries--) {
    try {
      return await removeTree(area, name, { sync: io.sync });
    } catch (err) {
      if (errnoCode(err) !== 'ENOTEMPTY' || tries === 0) throw err;
    }
    await sleep(25);
  }
}

/** Lets go of the lock's descriptor (the lock is deleted, or the lease is over). */
export function closeLockFd(state: LockFsState): void {
  if (state.lockFd === undefined) return;
  try {
    fs.closeSync(state.lockFd);
  } catch {
    /* already closed */
  }
  state.lockFd = undefined;
}

/** Our owner record, created in the lock being built: never over anything, never through a link, exactly 0644. */
function writeOwnerSync(p: string, text: string): void {
  const fd = fs.openSync(p, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o644);
  try {
    fs.writeSync(fd, text);
    if (umaskTakes(0o644)) fs.fchmodSync(fd, 0o644);
  } finally {
    fs.closeSync(fd);
  }
}

/** Whether the lock at `lockPath` (by default in its place) is still the one we made, as this client sees it. */
export async function isOurLock(state: LockFsState, lockPath = state.area.at(LOCK_NAME)): Promise<boolean> {
  const st = await state.io.lstatOrNull(lockPath);
  // A replacement often gets the inode just freed: the record tells instances apart.
  if (st === null || (state.ino !== undefined && st.ino !== state.ino)) return false;
  // Unless ours is held open, which keeps its inode from being anyone else's.
  if (state.lockFd !== undefined && state.ino !== undefined) return st.dev === state.fsDev && st.isDirectory();
  try {
    return (await state.io.readRecord(`${lockPath}/${OWNER_FILE}`, `${state.lockPath}/${OWNER_FILE}`, MAX_OWNER_BYTES)) === state.ownerJson;
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw err;
  }
}

/**
 * Releases our lock by names only it has, so that no step can move or remove another holder's
 * lock, whatever this process's pauses (see unlock.ts): the record goes into our work directory
 * (named through the lock: if the lock was taken away, there is no such directory and nothing
 * moves), the counter comes back out of it if the token was never settled, the work directory
 * leaves the lock (to be deleted, or kept as `devserver.lock.fenced.*` when it holds a commit that
 * could not be undone), and the lock, empty now, is removed with rmdir. `aside`: where the work
 * directory goes instead (release with destroy).
 *
 * On a local filesystem, where our lock is open, it is taken apart through its own descriptor
 * instead; on a full disk (ext4 needs a new block to add a name to a directory) the record is
 * removed and the work directory deleted in place rather than given new names, so a full disk can
 * never keep a holder from letting go. Only a work directory holding an unfinished commit
 * must move, to be kept.
 */
export async function releaseOurs(state: LockFsState, aside?: { dir: Dir; name: string }): Promise<void> {
  const lost = (): NodeJS.ErrnoException => coded('ECOMPROMISED', `${state.lockPath} is no longer our lock: it was removed or replaced by another`);
  const work = state.area.at(workOf(state));
  // Where a release that checked first and then acted by name would be cut off: nothing may depend on that check.
  step('release.begin');
  if (state.lockFd !== undefined && aside === undefined) {
    // The counter first, while the lock is whole: where it cannot go back, the lock stays, and whoever takes it over puts it back.
    if (state.settled !== true) await restoreCarriers(state.io, state.area, workOf(state));
    if (!(await holdsUnfinishedCommit(state.io, work))) return releaseLocal(state, lost);
  }
  const moved = await putAside(state.io, state.area, state.workName, { restoreCounter: state.settled !== true, ...(aside !== undefined ? { to: aside } : {}) });
  if (moved === 'lost') throw lost();
  await removeEmptyLock(state.io, state.area);
  step('release.removed');
  if (moved.kind === 'trash') await rmTreeSoon(state.io, state.area, moved.name).catch(() => undefined);
  closeLockFd(state);
}

/**
 * `releaseOurs` on a local filesystem, through our lock's descriptor: the record into the work
 * directory, the work directory out of the lock whole, then the emptied lock (which a contender's
 * rename may already have replaced, as it may any empty lock), and last what was in the work directory.
 */
async function releaseLocal(state: LockFsState, lost: () => NodeJS.ErrnoException): Promise<void> {
  const own = fdDir(state.lockFd!);
  try {
    // This lock's record, wherever the lock is now, into its work directory, where a judge still
    // finds it (and its holder, dead if this process is killed now). Gone: a takeover has begun
    // taking the lock apart.
    fs.renameSync(`${own}/${OWNER_FILE}`, `${own}/${state.workName}/${OWNER_FILE}`);
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT') throw lost();
    // A full disk (a new name in the work directory needs a block): removed instead.
    if (code !== 'ENOSPC' && code !== 'EDQUOT') throw err;
    try {
      fs.unlinkSync(`${own}/${OWNER_FILE}`);
    } catch (err2) {
      if (errnoCode(err2) === 'ENOENT') throw lost();
      throw err2;
    }
  }
  step('unlock.recordMoved');
  // The work directory leaves the lock whole, its record in it, before anything of it is deleted:
  // deleted in place, a process killed half-way would leave a lock without a record, judged held
  // until it aged out. Left in the area under a name of this process, it is litter the next holder
  // clears. Only where the area has no room for a new name is it deleted in place.
  const aside = sideName(LOCK_TRASH_PREFIX);
  let trashed = true;
  try {
    fs.renameSync(`${own}/${state.workName}`, state.area.at(aside));
  } catch (err) {
    const code = errnoCode(err);
    // Gone: a takeover has taken the lock apart meanwhile.
    if (code === 'ENOENT') throw lost();
    if (code !== 'ENOSPC' && code !== 'EDQUOT') throw err;
    trashed = false;
    const lock = await openDir(own, true, true);
    try {
      await removeTree(lock, state.workName, { sync: true });
    } finally {
      lock.close();
    }
  }
  step('unlock.workMoved');
  // Ours, if it is the one in place: then nothing else is in it, and it goes. (Not in place: once
  // emptied it was replaced by a contender's lock, a rename onto an empty directory replacing it.)
  const st = fs.lstatSync(state.area.at(LOCK_NAME), { throwIfNoEntry: false });
  const inPlace = st !== undefined && st.ino === state.ino && st.dev === state.fsDev;
  closeLockFd(state);
  if (inPlace) await removeEmptyLock(state.io, state.area);
  step('release.removed');
  if (trashed) await rmTreeSoon(state.io, state.area, aside).catch(() => undefined);
}

export function makeLockFs(state: LockFsState): LockFs {
  const { io, area } = state;
  const lockPath = area.at(LOCK_NAME);
  const ownerPath = `${lockPath}/${OWNER_FILE}`;
  const known = state.dev === undefined ? undefined : precisionByDev.get(state.dev);
  const replaced = (): NodeJS.ErrnoException => coded('ENOENT', `${state.lockPath} was removed and replaced by another lock`);
  const lost = (): NodeJS.ErrnoException => coded('ECOMPROMISED', `${state.lockPath} is no longer our lock: it was removed or replaced by another`);

  /** Device and inode of our lock, from its descriptor. */
  const learnIdentity = (): fs.Stats | undefined => {
    if (state.lockFd === undefined) return undefined;
    const st = fs.fstatSync(state.lockFd);
    state.ino = st.ino;
    state.fsDev = st.dev;
    return st;
  };

  /** Makes the lock under a temporary name, with everything in it. */
  const build = async (temp: string): Promise<void> => {
    // mkdir's mode goes through the umask: set it exactly only where the umask took something.
    const chmod = umaskTakes(state.mode);
    if (io.sync) {
      const fd = fs.openSync(temp, C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW);
      state.lockFd = fd;
      if (chmod) fs.fchmodSync(fd, state.mode);
      writeOwnerSync(`${fdDir(fd)}/${OWNER_FILE}`, state.ownerJson);
      fs.mkdirSync(`${fdDir(fd)}/${state.workName}`, state.mode);
      if (chmod) fs.chmodSync(`${fdDir(fd)}/${state.workName}`, state.mode);
      return;
    }
    if (chmod) await io.chmod(temp, state.mode);
    await io.writeNewFile(`${temp}/${OWNER_FILE}`, state.ownerJson, 0o644);
    await io.mkdir(`${temp}/${state.workName}`);
    if (chmod) await io.chmod(`${temp}/${state.workName}`, state.mode);
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
      await build(temp);
      step('acquire.built');
      // Atomic: the lock appears whole, or (EEXIST, ENOTEMPTY, ENOTDIR for a legacy lock file) not at all.
      await io.rename(temp, lockPath);
    } catch (err) {
      closeLockFd(state);
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
    state.placed = learnIdentity();
    step('acquire.placed');
  };

  const statOurs = async (): Promise<{ mtime: Date }> => {
    // proper-lockfile only stats before creating when the lock already exists.
    if (!state.created) throw coded('EEXIST', `${state.lockPath} already exists`);
    const placed = state.placed;
    state.placed = undefined;
    const st = placed ?? (await io.stat(lockPath));
    const mtime = shift(st.mtime, -state.skewMs);
    if (placed !== undefined || state.ino === undefined) {
      state.ino = st.ino;
      state.fsDev = st.dev;
      state.knownMtime = mtime;
      // The area was swapped for one on another filesystem since it was checked: the carried
      // precision may be wrong for it. Fail; proper-lockfile then removes the lock again.
      if (known !== undefined && st.dev !== state.dev) throw coded('EXDEV', `${state.lockPath} is not on the filesystem its staging area was on a moment ago`);
      return { mtime };
    }
    if (st.ino !== state.ino) throw replaced();
    // Ours is held open: the same device and inode is our lock (see above).
    if (state.lockFd !== undefined) {
      if (st.dev !== state.fsDev) throw replaced();
      return { mtime };
    }
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

  const touch = async (atime: Date, mtime: Date): Promise<void> => {
    const a = shift(atime, state.skewMs);
    const m = shift(mtime, state.skewMs);
    // Through our own descriptor where we have one: a heartbeat never touches a lock of someone else.
    // Elsewhere by name, never following a link a co-user put in the lock's place.
    if (state.lockFd !== undefined) fs.futimesSync(state.lockFd, a, m);
    else await io.lutimes(lockPath, a, m);
    state.knownMtime = mtime;
    // proper-lockfile's first lock on a filesystem probes its precision (this, then a stat): that
    // stat must see this mtime, not the one found when the lock was placed.
    state.placed = undefined;
  };

  const remove = async (): Promise<void> => {
    const hook = state.removeHook;
    state.removeHook = undefined;
    // Gone or replaced, as this client sees it: nothing of ours to remove, and the holder must hear
    // that it lost the lock. The names used below tell the rest.
    const st = await io.lstatOrNull(lockPath);
    if (st === null || st.ino !== state.ino || (state.lockFd !== undefined && st.dev !== state.fsDev)) throw lost();
    if (hook === undefined) return releaseOurs(state);
    try {
      await hook();
    } catch (err) {
      // The area could not be destroyed: still let go of our lock, then report why.
      await releaseOurs(state).catch(() => undefined);
      throw err;
    }
  };

  const lockFs: LockFs = {
    mkdir: (_p, cb) => toCallback(create(), cb),
    stat: (_p, cb) => toCallback(statOurs(), cb),
    utimes: (_p, atime, mtime, cb) => toCallback(touch(atime, mtime), cb),
    rmdir: (_p, cb) => toCallback(remove(), cb),
    // Called by proper-lockfile's exit handler (signal-exit) for locks still held at exit.
    rmdirSync() {
      releaseAtExit(state);
    },
  };
  if (known !== undefined) Object.defineProperty(lockFs, known.key, { value: known.value });
  return lockFs;
}

/**
 * The release at exit, synchronous and best effort (signal-exit's handler cannot wait), by the same
 * names as `releaseOurs`. What cannot go now (parts of an unfinished staging) is litter of a dead
 * pid, which the next holder of the area clears; a command still running under the lock keeps it
 * (judges on this machine follow the command).
 */
function releaseAtExit(state: LockFsState): void {
  const { area } = state;
  const work = workOf(state);
  try {
    if (readRecordSync(area.at(`${LOCK_NAME}/${OWNER_FILE}`), state.lockPath, MAX_OWNER_BYTES) !== state.ownerJson) return;
    if (fs.existsSync(area.at(`${work}/${COMMAND_FILE}`))) return;
    fs.renameSync(area.at(`${LOCK_NAME}/${OWNER_FILE}`), area.at(`${work}/${OWNER_FILE}`));
    if (state.settled !== true) {
      for (const name of fs.readdirSync(area.at(work))) {
        if (name.startsWith(CARRIER_PREFIX)) fs.renameSync(area.at(`${work}/${name}`), area.at(`${FENCE_FILE}/${name.slice(CARRIER_PREFIX.length)}`));
      }
    }
    const unfinished = fs.existsSync(area.at(`${work}/${COMMIT_FILE}`));
    const aside = sideName(unfinished ? LOCK_FENCED_PREFIX : LOCK_TRASH_PREFIX);
    fs.renameSync(area.at(work), area.at(aside));
    fs.rmdirSync(area.at(LOCK_NAME));
    if (!unfinished) fs.rmSync(area.at(aside), { recursive: true, force: true });
  } catch {
    /* best effort at exit */
  }
}
