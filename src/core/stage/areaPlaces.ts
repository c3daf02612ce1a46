/**
 * The area's directories as a commit reaches them: each level opened once per commit without
 * following links, so that every rename into the area goes through a directory that was checked.
 */
import { openBelow, type Dir } from '../fs/anchored';
import type { Io } from '../fs/io';

export class AreaPlaces {
  /** Directories of the area the commit opened, by name in the area. */
  private readonly opened = new Map<string, Dir>();

  constructor(
    private readonly area: Dir,
    private readonly fs: Io,
  ) {}

  /** Whether something is at `rel` in the area. */
  async exists(rel: string): Promise<boolean> {
    const where = await this.parentOf(rel);
    if (where === undefined) return false;
    return (await this.fs.lstat(where.dir.at(where.name)).catch(() => null)) !== null;
  }

  /**
   * The opened directory holding `rel` in the area, each level opened once per commit without
   * following links (a build of thousands of files has a few dozen directories); undefined when
   * a level is missing or not a directory.
   */
  async parentOf(rel: string): Promise<{ dir: Dir; name: string } | undefined> {
    const segs = rel.split('/');
    const name = segs.pop()!;
    if (name === '' || name === '.' || name === '..') return undefined;
    let dir = this.area;
    let key = '';
    for (const seg of segs) {
      if (seg === '' || seg === '.' || seg === '..') return undefined;
      key = key === '' ? seg : `${key}/${seg}`;
      let next = this.opened.get(key);
      if (next === undefined) {
        try {
          next = await openBelow(dir, seg, this.fs.sync);
        } catch {
          return undefined;
        }
        this.opened.set(key, next);
      }
      dir = next;
    }
    return { dir, name };
  }

  /** Lets go of the directories the commit opened. */
  close(): void {
    for (const d of this.opened.values()) d.close();
    this.opened.clear();
  }
}
