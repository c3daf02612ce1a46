/**
 * `devserver-stage force-release TAG`: removes whoever's lock is on TAG, recorded in the audit log
 * first. `--line`: clears TAG's line instead (clearLine), recorded the same way.
 */
import { StagingError, isStagingError } from '../core/base/errors';
import { flushHistory } from '../core/log/history';
import { describeHolder } from '../core/lock/refusals';
import { describeWaiter } from '../core/lock/queue';
import { clearLine, queueOf, type ClearedLine } from '../core/lock/lineView';
import { forceRelease } from '../core/remove';
import type { QueueEntry } from '../core/base/types';
import { EXIT } from './output';
import { commandMain } from './context';
import { printable } from './output';

export const main = commandMain(async (ctx, [tag]: readonly [string], o: { line?: boolean }) => {
  if (o.line === true) {
    const cleared = await clearLine(ctx.staticDir(), ctx.tagArg(tag), ctx.coreOptions());
    ctx.print(cleared, describeCleared(tag, cleared));
    return cleared.kept.length > 0 ? EXIT.error : EXIT.ok;
  }
  try {
    const previous = await forceRelease(ctx.staticDir(), ctx.tagArg(tag), ctx.coreOptions());
    ctx.print({ released: true, previous }, `Released ${printable(previous.lockPath)}, held by ${describeHolder(previous)} (was ${previous.state}).\n`);
    return EXIT.ok;
  } catch (err) {
    // Not locked, but a line may be what stands in the way: say how to clear it.
    if (isStagingError(err) && err.code === 'ENOTHELD') {
      const waiting = await queueOf(ctx.staticDir(), ctx.tagArg(tag), ctx.coreOptions()).catch(() => []);
      const n = waiting.length;
      if (n > 0) throw new StagingError('ENOTHELD', `${err.message} ${n} ${n === 1 ? 'ticket is' : 'tickets are'} in its line; force-release --line removes them.`, { ...(err.path !== undefined ? { path: err.path } : {}) });
    }
    throw err;
  } finally {
    await flushHistory();
  }
});

/** One line per ticket removed, saying which looked live (their waiters, if they still wait, go to the end of the line). */
function describeCleared(tag: string, c: ClearedLine): string {
  if (c.removed.length === 0 && c.kept.length === 0) return `Nobody waits in the line of ${printable(tag)}; nothing to clear.\n`;
  const line = (e: QueueEntry): string => {
    const looked = e.state === 'stale' ? `stale: ${e.staleReason ?? 'no heartbeat'}` : e.waiter !== undefined && e.heartbeatAheadMs === undefined ? 'LOOKED LIVE: if it still waits, it takes a new place at the end of the line' : 'could not be judged';
    return `  ${String(e.ticket)}  ${describeWaiter(e)}; ${looked}\n`;
  };
  let text = `Removed ${c.removed.length} ticket${c.removed.length === 1 ? '' : 's'} from the line of ${printable(tag)} (${printable(c.queue)}):\n`;
  for (const e of c.removed) text += line(e);
  if (c.kept.length > 0) {
    text += `Could not remove ${c.kept.length} (not this user's to remove):\n`;
    for (const e of c.kept) text += line(e);
  }
  return text;
}
