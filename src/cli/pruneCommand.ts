/**
 * `devserver-stage prune [SUBPATH] (--keep N | --older-than DURATION) [--dry-run]`: removes the
 * least recently used areas, never held ones. That one of the two rules is given is checked by the
 * parser (commands.ts).
 */
import { flushHistory } from '../core/log/history';
import { prune } from '../core/prune';
import { commandMain } from './context';
import { EXIT } from './output';
import { formatPrune } from './usageFormat';

export const main = commandMain(async (ctx, [subpath]: readonly [string], o: { keep?: number; olderThan?: number; dryRun?: boolean }) => {
  try {
    const result = await prune(ctx.staticDir(), {
      ...ctx.coreOptions(),
      subpath: ctx.tagArg(subpath),
      dryRun: o.dryRun === true,
      ...(o.keep !== undefined ? { keep: o.keep } : {}),
      ...(o.olderThan !== undefined ? { olderThan: o.olderThan } : {}),
    });
    ctx.print(result, formatPrune(result));
    return result.failed.length > 0 ? EXIT.error : EXIT.ok;
  } finally {
    // Each removal's record is written before the process exits, on a network filesystem too.
    await flushHistory();
  }
});
