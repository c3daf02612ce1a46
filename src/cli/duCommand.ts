/** `devserver-stage du [SUBPATH]`: the staging areas with size, artifacts, last use and lock state. */
import { usage } from '../core/usage';
import { commandMain } from './context';
import { formatUsage } from './usageFormat';

export const main = commandMain(async (ctx, [subpath]: readonly [string]) => {
  const areas = await usage(ctx.staticDir(), { ...ctx.coreOptions(), subpath: ctx.tagArg(subpath) });
  ctx.print(areas, formatUsage(areas));
});
