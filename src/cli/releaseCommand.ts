/** `devserver-stage release TAG`: releases one's own reservation of TAG (others: force-release). */
import { flushHistory } from '../core/log/history';
import { describeReservation, releaseReservation } from '../core/reserve';
import { commandMain } from './context';
import { printable } from './output';

export const main = commandMain(async (ctx, [typed]: readonly [string]) => {
  const tag = ctx.tagArg(typed);
  try {
    const info = await releaseReservation(ctx.staticDir(), tag, ctx.coreOptions());
    ctx.print({ released: true, previous: info }, `Released the reservation of ${printable(tag)} (${describeReservation(info)}).\n`);
  } finally {
    await flushHistory();
  }
});
