/** A copy asked of the pool and what it gives back: shared by the pool, its scheduler and the worker thread. */

/** What the source saw of a local file when it looked at it (its directory walk). */
export interface SeenFile {
  dev: number;
  ino: number;
  size: number;
  mtimeMs: number;
}

export interface CopyTask {
  /** The source file. */
  src: string;
  /** Where the copy goes: created, never replaced. */
  dest: string;
  /** The file the source saw; without it (a copy of a file of this staging), any regular file is taken. */
  seen?: SeenFile;
  /** Its size as far as known: how the pool schedules it (a large file has a worker to itself). */
  size: number;
  /**
   * The work directory as named through the lock, and its inode: looked at before each file is
   * created (and now and then during a large one), so that a holder whose lock was taken away
   * stops writing into it at once (see journal.ts).
   */
  fence?: { path: string; ino: number };
}

export interface Copied {
  size: number;
  sha256: string;
  /** The source file as the worker left it: a large file is checked once more against it. */
  end: { ino: number; size: number; mtimeMs: number };
  /** The copy's inode: what the commit checks it moves (journal.ts). */
  ino: number;
}
