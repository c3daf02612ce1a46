/**
 * The directories a staging makes in its work directory for those the area lacks, as the journal
 * keeps them: each reopened only if it is still the directory that was made, and only so many
 * kept open while nothing is written into them.
 */
import { openBelow, type Dir } from '../fs/anchored';
import { StagingError } from '../base/errors';

/** A directory the area lacks, made in the work directory. */
export interface TreeDir {
  /** Its name in the area. */
  rel: string;
  /** Its path below the work directory: `dir.<n>` for the topmost, then the names inside. */
  at: string;
  /** Its name in its parent (the work directory, or the new directory above it). */
  base: string;
  parent: TreeDir | undefined;
  /** The inode it was made with: it is reopened only if it is still that directory. */
  ino: number;
  /** Open while in use (and a while after); closed when too many are open. */
  dir: Dir | undefined;
  users: number;
  /** The mode the umask gave it, where `shareBits` were added until the commit. */
  ownMode?: number;
}

/** New directories kept open at once while nothing is being written into them. */
const IDLE_DIRS_OPEN = 64;

/** The new directories' descriptors, opened while in use and a while after. */
export class NewDirs {
  /** Those not in use but still open, least recently used first. */
  private readonly idle = new Set<TreeDir>();

  /**
   * @param workOpen the work directory, open (where the topmost new directories are)
   * @param shown the area's path, for messages
   * @param sync whether the area's filesystem calls are synchronous (io.ts)
   */
  constructor(
    private readonly workOpen: () => Dir,
    private readonly shown: string,
    private readonly sync: boolean,
  ) {}

  /** The descriptor of the new directory `t`, opened again if it was closed; `unuse` when done. */
  async use(t: TreeDir): Promise<Dir> {
    if (t.dir === undefined) {
      const parent = t.parent === undefined ? this.workOpen() : await this.use(t.parent);
      try {
        const dir = await openBelow(parent, t.base, this.sync);
        if (dir.ino !== t.ino) {
          dir.close();
          throw new StagingError('EUNSAFE', `Cannot stage into ${t.rel} in ${this.shown}: its directory in the lock's work directory was replaced while staging.`, { path: this.shown });
        }
        t.dir = dir;
      } finally {
        if (t.parent !== undefined) this.unuse(t.parent);
      }
    }
    this.idle.delete(t);
    t.users++;
    return t.dir;
  }

  /** Done with `t` (see `use`): kept open for a while, closed once too many are idle. */
  unuse(t: TreeDir, counted = true): void {
    if (counted) t.users--;
    if (t.users > 0) return;
    this.idle.add(t);
    while (this.idle.size > IDLE_DIRS_OPEN) {
      const oldest = this.idle.values().next().value!;
      this.idle.delete(oldest);
      oldest.dir?.close();
      oldest.dir = undefined;
    }
  }

  /** Forgets the idle ones, once every descriptor was closed. */
  clear(): void {
    this.idle.clear();
  }
}
