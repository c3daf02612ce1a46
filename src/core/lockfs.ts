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
 * - stat reports a lock directory that is no longer the one we made (same path, other inode) as
 *   gone, so a lock replaced under us counts as lost.
 * - rmdir removes only our own lock directory (with its owner record), or, on release with
 *   destroy, runs the hook that moves the whole area away with the lock still inside it.
 */
import * as fs from 'fs';
import * as path from 'path';
import { errnoCode } from './errors';
import { OWNER_FILE } from './protocol';

type Callback<T = void> = (err: NodeJS.ErrnoException | null, value?: T) => void;

export interface LockFsState {
  readonly lockPath: string;
  readonly ownerJson: string;
  readonly skewMs: number;
  /** Set once our mkdir succeeded. */
  created: boolean;
  /** The inode of our lock directory, learned from proper-lockfile's first stat. */
  ino?: number;
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

export function makeLockFs(state: LockFsState): LockFs {
  const { lockPath } = state;
  const ownerPath = path.join(lockPath, OWNER_FILE);
  const shift = (d: Date, by: number): Date => (by === 0 ? d : new Date(d.getTime() + by));

  return {
    mkdir(p, cb) {
      fs.mkdir(p, (err) => {
        if (err) return cb(err);
        state.created = true;
        // 'wx': the directory is brand new, so the record cannot exist unless something is very wrong.
        fs.writeFile(ownerPath, state.ownerJson, { flag: 'wx' }, (werr) => {
          if (!werr) return cb(null);
          fs.rmdir(p, () => cb(werr));
        });
      });
    },

    stat(p, cb) {
      if (!state.created) {
        // proper-lockfile only stats before creating when the lock already exists.
        return cb(coded('EEXIST', `${p} already exists`));
      }
      fs.stat(p, (err, st) => {
        if (err) return cb(err);
        if (state.ino === undefined) state.ino = st.ino;
        else if (st.ino !== state.ino) {
          return cb(coded('ENOENT', `${p} was removed and replaced by another lock`));
        }
        cb(null, { mtime: shift(st.mtime, -state.skewMs) });
      });
    },

    utimes(p, atime, mtime, cb) {
      fs.utimes(p, shift(atime, state.skewMs), shift(mtime, state.skewMs), cb);
    },

    rmdir(p, cb) {
      if (state.removeHook !== undefined) {
        const hook = state.removeHook;
        state.removeHook = undefined;
        hook().then(
          () => cb(null),
          (err: NodeJS.ErrnoException) => cb(err),
        );
        return;
      }
      fs.lstat(p, (err, st) => {
        if (err) return cb(errnoCode(err) === 'ENOENT' ? null : err);
        if (state.ino !== undefined && st.ino !== state.ino) return cb(null); // someone else's now: not ours to remove
        fs.unlink(ownerPath, () => {
          fs.rmdir(p, (rerr) => cb(rerr && errnoCode(rerr) !== 'ENOENT' ? rerr : null));
        });
      });
    },

    // Called by proper-lockfile's exit handler (signal-exit) for locks still held at exit.
    rmdirSync(p) {
      try {
        const st = fs.lstatSync(p);
        if (state.ino !== undefined && st.ino !== state.ino) return;
        try {
          fs.unlinkSync(ownerPath);
        } catch {
          /* already gone */
        }
        fs.rmdirSync(p);
      } catch {
        /* best effort at exit */
      }
    },
  };
}
