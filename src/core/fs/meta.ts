/**
 * The bookkeeping directory at the top of the static directory, `.devserver-staging`: clock probes,
 * the audit log, the trash, the history. Every user who may write the static directory writes
 * there, so it is made with the static directory's write bits (group, other, the sticky and
 * set-group-ID bits), whatever the umask of the process that happens to make it first.
 */
import { type Dir, openOrMakeBelow } from './anchored';
import { META_DIR } from '../base/protocol';

/** Opens `.devserver-staging` below the opened static directory, making it where missing; a link or file in its place is refused. */
export function openMeta(top: Dir, sync = false): Promise<Dir> {
  return openOrMakeBelow(top, META_DIR, { sync, mode: 0o755 | (top.mode & 0o3022) });
}
