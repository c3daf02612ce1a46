/** `devserver-stage status TAG`: one area's lock state and holder, and who waits for it in line. */
import { inspect } from '../core/inspect';
import { queueOf } from '../core/queue';
import { commandMain } from './context';
import { formatStatus } from './format';

export const main = commandMain(async (ctx, [tag]: readonly [string]) => {
  const staticDir = ctx.staticDir();
  const [info, queue] = await Promise.all([inspect(staticDir, tag, ctx.coreOptions()), queueOf(staticDir, tag, ctx.coreOptions())]);
  ctx.print({ ...info, queue }, formatStatus(info, queue));
});
