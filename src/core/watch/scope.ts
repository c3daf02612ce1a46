/**
 * How far a scan of a static directory goes. The model lists every folder below a static
 * directory on its own, and watches what it lists: a directory that is not a static directory of
 * builds (the whole machine, a home) would be walked and watched whole, and links a co-user plants
 * (`board/a -> .`) would be followed at every level, without end. So a scan lists each real
 * directory once, known by its device and inode as this host sees them, and refuses a root that
 * holds everything.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { StagingError } from '../base/errors';
import { printable } from '../base/format';
import { fsPath } from '../base/rawNames';

/**
 * Folders one scan lists on its own; beyond them, a folder is listed when someone asks for it (the
 * view expands it). A devserver has a few hundred boards: this only stops a directory that is not
 * a static directory from being watched whole.
 */
export const MAX_SCANNED_FOLDERS = 20_000;

/** `/`, and this user's home and every directory above it: each holds far more than builds. */
function holdsEverything(real: string): string | undefined {
  if (real === path.parse(real).root) return 'the root of the filesystem';
  let home: string;
  try {
    home = fs.realpathSync(os.homedir());
  } catch {
    home = os.homedir();
  }
  if (real === home) return 'your home directory';
  if (home.startsWith(`${real}/`)) return 'a directory that holds your home directory';
  return undefined;
}

/**
 * Refuses a static directory that a scan must not walk: `/`, a home directory, or one above a home
 * (EBADSTATICDIR, saying what it is and what to choose instead). `real` is its real path.
 */
export function checkScanRoot(shown: string, real: string): void {
  const what = holdsEverything(real);
  if (what === undefined) return;
  throw new StagingError(
    'EBADSTATICDIR',
    `${printable(shown)} is ${what}, not a static directory of builds: it is not scanned, as every directory in it would be listed and watched. Choose the directory the devserver serves its builds from (its static directory), such as /var/lib/devserver/static.`,
    { path: shown },
  );
}

/**
 * The real directories one scan of one static directory has listed, by device and inode, and the
 * tag each was listed as. A folder whose directory was listed already under another tag (a link to
 * it, or to a folder above it) is not listed again by the scan; nor is any folder once the scan
 * has listed `MAX_SCANNED_FOLDERS`.
 */
export class ScannedDirs {
  private readonly seen = new Map<string, string>();
  private full = false;

  constructor(private readonly limit = MAX_SCANNED_FOLDERS) {}

  /**
   * Claims the directory `id` (`dev:ino`) for `tag`: true when the scan should list it. `listed`
   * says whether the tag that claimed it first is still listed (a folder removed and another made
   * since may have the same inode).
   */
  claim(id: string, tag: string, listed: (tag: string) => boolean): boolean | 'full' {
    const first = this.seen.get(id);
    if (first !== undefined && first !== tag && listed(first)) return false;
    if (first === undefined && this.seen.size >= this.limit) {
      this.full = true;
      return 'full';
    }
    this.seen.set(id, tag);
    return true;
  }

  /** The tag the directory `id` was listed as, if the scan listed it. */
  tagOf(id: string): string | undefined {
    return this.seen.get(id);
  }

  /** Whether the scan stopped listing folders on its own. */
  get stopped(): boolean {
    return this.full;
  }
}

/** A directory's identity as this host sees it, following a link to it; undefined when it cannot be seen. */
export async function dirIdentity(dir: string): Promise<string | undefined> {
  const st = await fs.promises.stat(fsPath(dir)).catch(() => undefined);
  return st?.isDirectory() === true ? `${st.dev}:${st.ino}` : undefined;
}
