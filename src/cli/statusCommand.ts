/** `devserver-stage status TAG`: one area's lock state and holder, and who waits for it in line. */
import { isStagingError } from '../core/base/errors';
import { inspect } from '../core/lock/inspect';
import { queueOf } from '../core/lock/lineView';
import { commandMain } from './context';
import { formatStatus } from './format';

export const main = commandMain(async (ctx, [typed]: readonly [string]) => {
  const staticDir = ctx.staticDir();
  const tag = ctx.tagArg(typed);
  const [info, queue] = await Promise.all([
    inspect(staticDir, tag, ctx.coreOptions()),
    // A name no one can lock (a control character, bytes that are not UTF-8) has no one in line;
    // a tag that is bad in itself is refused by inspect.
    queueOf(staticDir, tag, ctx.coreOptions()).catch((err: unknown) => {
      if (isStagingError(err, 'EBADTAG')) return [];
      throw err;
    }),
  ]);
  ctx.print({ ...info, queue }, formatStatus(info, queue));
});
