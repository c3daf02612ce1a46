/**
 * The model's cheap look at an area after an event on its lock entry: whether the lock is still
 * the one last judged (a heartbeat, which only moves its expiry), before any real judgement.
 */
import * as fs from 'fs';
import { fsPath } from '../base/rawNames';
import { lockIdOf } from '../lock/judge';
import type { AreaRecord } from './records';

/**
 * Whether the lock on disk is still the one last judged (`known`'s), and that judgement cannot have
 * aged; `work` counts the looks at the disk.
 */
export async function sameLock(known: AreaRecord | undefined, work: { probes: number }): Promise<boolean> {
  const e = known?.lock;
  if (known === undefined || e === undefined) return true;
  // A stale lock that is touched again may have a live holder once more; a lock judged before
  // its holder had written the owner record has a holder to show now.
  if (e.state === 'stale' || (e.state === 'held' && e.holder === undefined)) return false;
  // A reservation has no heartbeat: a touch of its lock is its owner moving its end (reserve.ts).
  if (e.reservation !== undefined) return false;
  work.probes++;
  const st = await fs.promises.lstat(fsPath(e.lockPath)).catch(() => null);
  if ((st === null ? undefined : lockIdOf(st)) !== e.lockId) return false;
  // A heartbeat: the lock's expiry moves with it, and the stale timer has nothing to judge
  // again. The mtime is read as local time, which it is where inotify reports heartbeats (local
  // filesystems); the expiry never moves earlier than judged.
  const now = Date.now();
  if (st !== null && e.state === 'held' && st.mtimeMs > known.judgedAt - (e.heartbeatAgeMs ?? 0)) {
    e.heartbeatAgeMs = Math.max(0, now - st.mtimeMs);
    known.judgedAt = now;
  }
  return true;
}
