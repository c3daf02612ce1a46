/** `devserver-stage force-release TAG`: removes whoever's lock is on TAG, recorded in the audit log first. */
import { flushHistory } from '../core/history';
import { describeHolder } from '../core/lock';
import { forceRelease } from '../core/remove';
import { commandMain } from './context';
import { printable } from './output';

export const main = commandMain(async (ctx, [tag]: readonly [string]) => {
  try {
    const previous = await forceRelease(ctx.staticDir(), ctx.tagArg(tag), ctx.coreOptions());
    ctx.print({ released: true, previous }, `Released ${printable(previous.lockPath)}, held by ${describeHolder(previous)} (was ${previous.state}).\n`);
  } finally {
    await flushHistory();
  }
});
