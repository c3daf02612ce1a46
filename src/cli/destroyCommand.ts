/** `devserver-stage destroy TAG [--force]`: removes an area atomically, recorded in the audit log first. */
import { flushHistory } from '../core/log/history';
import { destroy } from '../core/remove';
import { commandMain } from './context';
import { printable } from './output';

export const main = commandMain(async (ctx, [typed]: readonly [string], o: { force?: boolean }) => {
  const tag = ctx.tagArg(typed);
  try {
    await destroy(ctx.staticDir(), tag, { ...ctx.coreOptions(), force: o.force === true });
    ctx.print({ destroyed: true, tag }, `Destroyed ${printable(tag)}.\n`);
  } finally {
    await flushHistory();
  }
});
