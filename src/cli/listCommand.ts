/** `devserver-stage list [SUBPATH]`: the subdirectories with their lock states. */
import { list } from '../core/lock/inspect';
import { commandMain } from './context';
import { formatList } from './format';

export const main = commandMain(async (ctx, [subpath]: readonly [string]) => {
  const entries = await list(ctx.staticDir(), ctx.tagArg(subpath), ctx.coreOptions());
  ctx.print(entries, formatList(entries));
});
