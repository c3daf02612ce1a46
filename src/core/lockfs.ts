/**
 * The filesystem proper-lockfile sees for one lock. proper-lockfile does the atomic mkdir, the
 * heartbeat (utimes every refresh interval) and the compromise detection; this adapter adds what
 * the protocol needs on top, at the only seams proper-lockfile offers:
 *
 * - mkdir builds the whole lock under a temporary name (owner record and proposed fencing token
 *   inside) and renames it into place, so the lock never exists without its record: a holder
 *   killed at any instant leaves either no lock or a complete one, which the judge can tell dead
 *   from its pid. Then, still inside mkdir, it settles the token (see fence.ts): it reads the
 *   counter again and renames its proposal over it, or, if another holder came and went since the
 *   proposal, removes the lock again and fails with ERETRY. Doing this before proper-lockfile's
 *   first stat means the mtime proper-lockfile starts from is the lock's final one.
 * - When the lock already exists, stat fails with EEXIST instead of letting proper-lockfile judge
 *   staleness: its takeover (rmdir, then mkdir) lets two contenders both win. The core judges and
 *   takes over itself (see takeover.ts).
 * - stat and utimes shift times by the filesystem clock offset, so heartbeats are written in the
 *   filesystem's time while proper-lockfile keeps reasoning in local time.
 * - stat reports a lock directory that is no longer the one we made as gone, so a lock replaced
 *   under us counts as lost.
 * - rmdir moves our lock directory aside in one rename, checks that what it moved was ours (and
 *   puts it back if not), then deletes it; on release with destroy, it runs the hook that moves the
 *   whole area away with the lock still inside it. A lock whose work directory holds a commit that
 *   could not be undone (commit.ts) is not deleted: it is moved aside as `devserver.lock.fenced.*`
 *   for the next holder, who finishes the undo; if even that rename fails, it stays in place and
 *   goes stale.
 *
 * Which lock is ours: on a local filesystem the holder keeps its lock directory open from the
 * moment it made it. An inode cannot be freed, so its number cannot be given to another file,
 * while it is open; so the same device and inode is this very lock, whatever was renamed meanwhile,
 * and no owner record needs reading to tell. Elsewhere (NFS, sshfs: a server can reuse an inode
 * number another client still has open) it is the inode and, byte for byte, our owner record.
 *
 * The holder's work directory (`work.<token>`, the fence: see lock.ts) is made with the lock on
 * network filesystems, and on local ones when the holder first needs it, while the lock is in its
 * place, through the lock's own descriptor: it lands in this holder's lock, never in a lock of
 * someone else that took its place (whose name then leads to no work directory of ours).
 *
 * Every path here is named through the area's open directory or the lock's (see anchored.ts).
 */
import * as fs from 'fs';
import * as path from 'path';
import { readRecordSync, removeTree, removeTreeSync, type Dir } from './anchored';
import { StagingError, asStagingError, errnoCode } from './errors';
import { FENCE_NEXT, makeCounter, readFence } from './fence';
import { sideName } from './holder';
import type { Io } from './io';
import { COMMAND_FILE, COMMIT_FILE, FENCE_FILE, LOCK_FENCED_PREFIX, LOCK_NAME, LOCK_NEW_PREFIX, LOCK_TRASH_PREFIX, MAX_OWNER_BYTES, OWNER_FILE } from './protocol';

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
  /** The fencing token proposed in the owner record, built into the lock and settled by mkdir; none: no token. */
  readonly fence?: number;
  /** Set once our mkdir succeeded. */
  created: boolean;
  /** The inode of our lock directory. */
  ino?: number;
  /** The device the lock is about to be made on (the area directory's), if known. */
  readonly dev?: number;
  /** The device of our lock directory, learned with `ino`. */
  fsDev?: number;
  /** Local filesystems: our lock directory, open from the moment it was made until it is deleted. */
  lockFd?: number;
  /** The lock's fstat once it was in place and settled, for proper-lockfile's first stat. */
  placed?: fs.Stats;
  /** Whether our proposed token is still inside the lock (not yet renamed over the counter). */
  proposalInLock?: boolean;
  /** Whether the work directory was made. */
  workMade?: boolean;
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

/** Where an open descriptor's directory is, for the kernel (see anchored.ts). */
const fdDir = (fd: number): string => `/proc/self/fd/${fd}`;

const shift = (d: Date, by: number): Date => (by === 0 ? d : new Date(d.getTime() + by));

/** Whether the umask takes bits from `mode`, so that what is made must be given `mode` afterwards. */
const umaskTakes = (mode: number): boolean => (mode & ~UMASK) !== mode;

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

/**
 * The usual release on a local filesystem: our lock, already moved aside and checked, holds just
 * its record (and a work directory, if one was made, empty unless a staging was cut short), so it
 * goes in a handful of calls through its own descriptor. False when there is more to it (parts of
 * an unfinished staging, a command record): then the caller walks it.
 */
function removeKnownSync(area: Dir, name: string, state: LockFsState): boolean {
  if (state.lockFd === undefined) return false;
  const own = fdDir(state.lockFd);
  try {
    fs.unlinkSync(`${own}/${OWNER_FILE}`);
    if (state.proposalInLock === true) fs.unlinkSync(`${own}/${FENCE_NEXT}`);
    if (state.workMade === true) fs.rmdirSync(`${own}/${state.workName}`);
    fs.rmdirSync(area.at(name));
    return true;
  } catch {
    return false;
  }
}

/** Whether the lock at `lockPath` (by default in its place) is still the one we made. */
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
 * The work directory, made where it is made on first need (a local filesystem, see above). Making
 * it moves the lock's mtime, which proper-lockfile would take at the next heartbeat for another
 * holder's doing: the mtime is set back to the heartbeat's, through the lock's descriptor.
 */
export function ensureWorkDir(state: LockFsState): void {
  if (state.workMade === true || state.lockFd === undefined) return;
  // Only while our lock is in its place: moved away, it is no lock any more (its names lead
  // nowhere, as they should), and wherever a co-user moved it is no place to make anything.
  let st: fs.Stats | undefined;
  try {
    st = fs.lstatSync(state.area.at(LOCK_NAME), { throwIfNoEntry: false });
  } catch {
    st = undefined;
  }
  if (st === undefined || st.ino !== state.ino || st.dev !== state.fsDev) return;
  const own = fdDir(state.lockFd);
  try {
    fs.mkdirSync(`${own}/${state.workName}`, state.mode);
  } catch (err) {
    // The lock is deleted (taken away and removed): its names lead nowhere, and the work that
    // needed the directory fails there, as a fenced holder's work does.
    if (errnoCode(err) === 'ENOENT') return;
    if (errnoCode(err) !== 'EEXIST') throw asStagingError(err, 'make the work directory in', state.lockPath);
  }
  state.workMade = true;
  if (umaskTakes(state.mode)) fs.chmodSync(`${own}/${state.workName}`, state.mode);
  if (state.knownMtime !== undefined) {
    const m = shift(state.knownMtime, state.skewMs);
    fs.futimesSync(state.lockFd, m, m);
  }
}

export function makeLockFs(state: LockFsState): LockFs {
  const { io, area } = state;
  const lockPath = area.at(LOCK_NAME);
  const ownerPath = `${lockPath}/${OWNER_FILE}`;
  const shownArea = path.dirname(state.lockPath);
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

  /**
   * Moves our lock out of its place in one rename, then deletes it; puts back anything not ours.
   * One holding an unfinished commit is moved to a fenced name and kept (see above).
   */
  const removeOurs = async (): Promise<void> => {
    const keep = await holdsUnfinishedCommit();
    const aside = sideName(keep ? LOCK_FENCED_PREFIX : LOCK_TRASH_PREFIX);
    try {
      await io.rename(lockPath, area.at(aside));
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') throw lost();
      if (keep) throw unfinishedKept(err);
      throw err;
    }
    // Between our check and the rename another instance may have taken the place (a force-release
    // and a new holder): then put it back at once. Its holder's writes go through its own lock's
    // name, so nothing of it could change while it was out of place.
    if (!(await isOurLock(state, area.at(aside)))) {
      await io.rename(area.at(aside), lockPath).catch(() => undefined);
      throw lost();
    }
    if (keep) {
      closeLockFd(state);
      return;
    }
    if (!(io.sync && removeKnownSync(area, aside, state))) await rmTreeSoon(io, area, aside);
    closeLockFd(state);
  };

  /** Whether our work directory holds a commit whose undo did not finish (commit.ts); one that cannot be looked at counts as holding one. */
  const holdsUnfinishedCommit = async (): Promise<boolean> => {
    if (state.workMade !== true) return false;
    const own = state.lockFd !== undefined ? fdDir(state.lockFd) : lockPath;
    return (await io.lstatOrNull(`${own}/${state.workName}/${COMMIT_FILE}`).catch(() => true)) !== null;
  };

  /** The lock holding an unfinished commit could not even be moved aside: it stays in place, untouched, and goes stale. */
  const unfinishedKept = (err: unknown): StagingError => {
    const detail = err instanceof Error ? err.message : String(err);
    return new StagingError(
      'EUNFINISHED',
      `Could not let go of ${state.lockPath}: it holds a commit that could not be undone yet, and it could not be moved aside (${detail}). ` +
        'It stays in place with everything in it and turns stale; whoever takes it over next finishes the undo once the cause is gone (a full disk: once space is freed).',
      { path: state.lockPath, cause: err },
    );
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
      if (state.fence !== undefined) {
        await makeCounter(io, `${fdDir(fd)}/${FENCE_NEXT}`, state.fence);
        state.proposalInLock = true;
      }
      return;
    }
    if (chmod) await io.chmod(temp, state.mode);
    await io.writeNewFile(`${temp}/${OWNER_FILE}`, state.ownerJson, 0o644);
    if (state.fence !== undefined) {
      await makeCounter(io, `${temp}/${FENCE_NEXT}`, state.fence);
      state.proposalInLock = true;
    }
    await io.mkdir(`${temp}/${state.workName}`);
    if (chmod) await io.chmod(`${temp}/${state.workName}`, state.mode);
    state.workMade = true;
  };

  /**
   * The lock is in place: our proposed token becomes the counter, unless another holder came and
   * went since it was proposed (then ours goes again, and ERETRY asks for a new proposal).
   */
  const settleFence = async (): Promise<void> => {
    if (state.fence === undefined) return;
    try {
      if ((await readFence(io, area, shownArea)) >= state.fence) throw coded('ERETRY', `${state.lockPath}: another holder took the proposed fencing token first`);
      // Named through the lock: if the lock was taken away this instant, this fails (the fence).
      await io.rename(area.at(`${LOCK_NAME}/${FENCE_NEXT}`), area.at(FENCE_FILE));
      state.proposalInLock = false;
    } catch (err) {
      try {
        learnIdentity();
      } catch {
        /* then the record tells (isOurLock) */
      }
      await removeOurs().catch(() => undefined);
      closeLockFd(state);
      if (errnoCode(err) === 'ERETRY') throw err;
      throw asStagingError(err, 'write the fencing counter', path.join(shownArea, FENCE_FILE));
    }
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
    await settleFence();
    state.placed = learnIdentity();
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
    if (state.lockFd !== undefined) fs.futimesSync(state.lockFd, a, m);
    else await io.utimes(lockPath, a, m);
    state.knownMtime = mtime;
    // proper-lockfile's first lock on a filesystem probes its precision (this, then a stat): that
    // stat must see this mtime, not the one found when the lock was placed.
    state.placed = undefined;
  };

  const remove = async (): Promise<void> => {
    const hook = state.removeHook;
    state.removeHook = undefined;
    // Gone or replaced: nothing of ours to remove, and the holder must hear that it lost the lock.
    // The inode tells most replacements; what was moved is checked once it is moved (below).
    const st = await io.lstatOrNull(lockPath);
    if (st === null || st.ino !== state.ino || (state.lockFd !== undefined && st.dev !== state.fsDev)) throw lost();
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
    utimes: (_p, atime, mtime, cb) => toCallback(touch(atime, mtime), cb),
    rmdir: (_p, cb) => toCallback(remove(), cb),
    // Called by proper-lockfile's exit handler (signal-exit) for locks still held at exit.
    rmdirSync() {
      try {
        const st = fs.lstatSync(lockPath);
        if (state.ino !== undefined && st.ino !== state.ino) return;
        if (readRecordSync(ownerPath, ownerPath, MAX_OWNER_BYTES) !== state.ownerJson) return;
        // A command still running under the lock keeps it: judges on this machine follow the command.
        if (fs.existsSync(`${lockPath}/${state.workName}/${COMMAND_FILE}`)) return;
        // Nor is a commit cut off by the exit deleted: the lock stays, and the next holder undoes it.
        if (fs.existsSync(`${lockPath}/${state.workName}/${COMMIT_FILE}`)) return;
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

