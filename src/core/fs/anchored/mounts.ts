/**
 * The mount points of this process, which tell a bind mount that a device number alone does not.
 */
import * as fs from 'fs';

/**
 * Where filesystems are mounted, as the kernel lists them for this process. A bind mount of a
 * directory of the same filesystem has the same device number as its parent, so the device alone
 * does not tell a mount point; this list does (paths as `whereIs` gives them).
 */
export function mountPoints(): Set<string> {
  let text: string;
  try {
    text = fs.readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return new Set();
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
