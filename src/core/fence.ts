/**
 * The fencing token: per area, a number that grows from one holder to the next. It is kept in the
 * area's `.devserver-staging.fence` file, written whole (a new file renamed over the old one).
 *
 * A contender proposes the file's value + 1 in its owner record before its lock exists; once the
 * lock is its own it reads the file again, and if someone got there first (it read before another
 * holder came and went) it lets go and tries again, so two holders never share a token. The holder
 * then writes its token through its work directory, which fences that write like any other. Whoever
 * removes a lock that is not its own (takeover, force-release) first raises the file to that lock's
 * token, so a holder that died before writing its token cannot have it handed out again.
 */
import * as path from 'path';
import type { Dir } from './anchored';
import { StagingError, asStagingError, errnoCode } from './errors';
import type { Io } from './io';
import { sideName } from './holder';
import { FENCE_FILE } from './protocol';

/** The last token handed out in this area; 0 when none was. */
export async function readFence(io: Io, area: Dir, shownArea: string): Promise<number> {
  const shown = path.join(shownArea, FENCE_FILE);
  let text: string;
  try {
    text = await io.readRecord(area.at(FENCE_FILE), shown, 64);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return 0;
    throw asStagingError(err, 'read the fencing counter', shown);
  }
  const n = Number(text.trim());
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new StagingError('EIO', `The fencing counter ${shown} holds ${JSON.stringify(text.slice(0, 40))}, not a number. Remove it; the next holder starts a new count above any token still held.`, {
      path: shown,
    });
  }
  return n;
}

/**
 * Writes `value` as the area's counter: a new file made in `tempDir` (the holder's work directory,
 * or the area itself for one who is not the holder), then renamed over the counter.
 */
export async function writeFence(io: Io, area: Dir, tempDir: string, value: number, shownArea: string): Promise<void> {
  const temp = `${tempDir}/${sideName(`${FENCE_FILE}.`)}`;
  try {
    await io.writeNewFile(temp, `${value}\n`, 0o644);
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
