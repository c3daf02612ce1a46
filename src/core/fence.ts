/**
 * The fencing token: per area, a number that grows from one holder to the next. It is kept in the
 * area's `.devserver-staging.fence`, a symbolic link whose text is the number, written whole (a new
 * link renamed over the old one) and read with `readlink`, which never follows it.
 *
 * A link rather than a file: it is made in one call and read in one, and its few bytes live in
 * the inode. A small file renamed over another makes ext4 write the new file's data to disk at
 * once (its `auto_da_alloc` guard against losing a file replaced just before a crash), which cost
 * more than the rest of a lock cycle together. A regular file holding the number, as earlier
 * builds wrote it (and as is written where the filesystem has no symbolic links), is read too.
 *
 * A contender proposes the counter's value + 1 in its owner record before its lock exists, and
 * builds the proposal into its lock (`fence.next`, see lockfs.ts). Once the lock is its own it reads
 * the counter again: if someone got there first (it read before another holder came and went) it
 * lets go and tries again, so two holders never share a token; else it renames its proposal over
 * the counter, named through its lock, which fences that write like any other. Whoever removes a
 * lock that is not its own (takeover, force-release) first raises the counter to that lock's
 * token, so a holder that died before placing its token cannot have it handed out again.
 */
import * as path from 'path';
import type { Dir } from './anchored';
import { StagingError, asStagingError, errnoCode } from './errors';
import type { Io } from './io';
import { sideName } from './holder';
import { FENCE_FILE } from './protocol';

/** Inside a lock being built: the holder's proposed token, renamed over the counter once the lock is in place. */
export const FENCE_NEXT = 'fence.next';

/** What `symlink` answers on a filesystem that cannot make links (FAT, SMB without Unix extensions). */
const NO_LINKS = new Set(['EPERM', 'EOPNOTSUPP', 'ENOTSUP', 'ENOSYS']);

function parseCounter(text: string, shown: string): number {
  const n = Number(text.trim());
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new StagingError('EIO', `The fencing counter ${shown} holds ${JSON.stringify(text.slice(0, 40))}, not a number. Remove it; the next holder starts a new count above any token still held.`, {
      path: shown,
    });
  }
  return n;
}

/** The last token handed out in this area; 0 when none was. */
export async function readFence(io: Io, area: Dir, shownArea: string): Promise<number> {
  const shown = path.join(shownArea, FENCE_FILE);
  const p = area.at(FENCE_FILE);
  let text: string;
  try {
    text = await io.readlink(p);
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT') return 0;
    if (code !== 'EINVAL') throw asStagingError(err, 'read the fencing counter', shown);
    // Not a link: the number in a regular file (never through a link, never from a FIFO).
    try {
      text = await io.readRecord(p, shown, 64);
    } catch (err2) {
      if (errnoCode(err2) === 'ENOENT') return 0;
      throw asStagingError(err2, 'read the fencing counter', shown);
    }
  }
  return parseCounter(text, shown);
}

/**
 * Makes `p` hold `value`: a symbolic link whose text is the number, or a new regular file where
 * the filesystem cannot make links. Never over anything (EEXIST).
 */
export async function makeCounter(io: Io, p: string, value: number): Promise<void> {
  try {
    await io.symlink(String(value), p);
  } catch (err) {
    if (!NO_LINKS.has(errnoCode(err) ?? '')) throw err;
    await io.writeNewFile(p, `${value}\n`, 0o644);
  }
}

/**
 * Writes `value` as the area's counter: made new in `tempDir` (the area itself, for one who is not
 * the holder), then renamed over the counter.
 */
export async function writeFence(io: Io, area: Dir, tempDir: string, value: number, shownArea: string): Promise<void> {
  const temp = `${tempDir}/${sideName(`${FENCE_FILE}.`)}`;
  try {
    await makeCounter(io, temp, value);
    await io.rename(temp, area.at(FENCE_FILE));
  } catch (err) {
    await io.unlink(temp).catch(() => undefined);
    throw asStagingError(err, 'write the fencing counter', path.join(shownArea, FENCE_FILE));
  }
}

/** Raises the counter to at least `token` (a lock being removed by someone other than its holder). */
export async function raiseFence(io: Io, area: Dir, token: number | undefined, shownArea: string): Promise<void> {
  if (token === undefined) return;
  if ((await readFence(io, area, shownArea)) >= token) return;
  await writeFence(io, area, area.at('.'), token, shownArea);
}
