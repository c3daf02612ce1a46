/**
 * Whether an open directory lies on another mount than the one it was opened from: what tells a
 * bind mount, whose device number is its parent's, from a plain directory.
 */
import * as fs from 'fs';
import { errnoCode } from '../../base/errors';
import { type Dir, whereIs } from './dir';

const fdinfo = Buffer.alloc(512);

/**
 * The kernel's id of the mount an open descriptor is on (`mnt_id` in `/proc/self/fdinfo`, Linux
 * 3.15 and later); undefined where the kernel does not say (no such file, no such line). Read
 * through the descriptor itself, so it is the mount of what was opened, not of whatever a path
 * leads to now. Any other failure (no descriptor left to read it with) throws: a removal that
 * cannot tell must not go on as if nothing were mounted.
 */
export function mountIdOf(fd: number): number | undefined {
  let info: number;
  try {
    info = fs.openSync(`/proc/self/fdinfo/${fd}`, 'r');
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return undefined;
    throw err;
  }
  try {
    const n = fs.readSync(info, fdinfo, 0, fdinfo.length, 0);
    const m = /(?:^|\n)mnt_id:\s*(\d+)/.exec(fdinfo.toString('latin1', 0, n));
    return m === null ? undefined : Number(m[1]);
  } finally {
    fs.closeSync(info);
  }
}

/**
 * Where filesystems are mounted, as the kernel lists them for this process (paths as `whereIs`
 * gives them). A bind mount of a directory of the same filesystem has the same device number as
 * its parent, so the device alone does not tell a mount point; this list does.
 */
export function mountPoints(): Set<string> {
  let text: string;
  try {
    text = fs.readFileSync('/proc/self/mountinfo', 'utf8');
  } catch (err) {
    // No table on this system: nothing to tell by. One that could not be read is not an empty one.
    if (errnoCode(err) === 'ENOENT') return new Set();
    throw err;
  }
  // Field 5 is the mount point, with spaces, tabs, newlines and backslashes escaped in octal.
  const unescape = (p: string): string => p.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(parseInt(o, 8)));
  return new Set(
    text
      .split('\n')
      .map((line) => line.split(' ')[4])
      .filter((p): p is string => p !== undefined && p !== '')
      .map(unescape),
  );
}

/**
 * Tells, for directories opened below `top`, whether each is on another mount than `top`: by the
 * mount ids of the descriptors where the kernel gives them (a few bytes read per directory), else
 * by the system's mount table, read once. The table costs more the more mounts a machine has, and
 * a release asks this of every lock it takes apart.
 */
export function mountBoundary(top: Dir): (dir: Dir) => boolean {
  let topId: number | undefined | null = null;
  let table: Set<string> | undefined;
  return (dir) => {
    if (dir.dev !== top.dev) return true;
    if (topId === null) topId = mountIdOf(top.fd);
    const id = topId === undefined ? undefined : mountIdOf(dir.fd);
    if (id !== undefined) return id !== topId;
    return (table ??= mountPoints()).has(whereIs(dir));
  };
}
