/** `devserver-stage destroy TAG [--force]`: removes an area atomically, recorded in the audit log first. */
import { flushHistory } from '../core/history';
import { destroy } from '../core/remove';
import { commandMain } from './context';

export const main = commandMain(async (ctx, [tag]: readonly [string], o: { force?: boolean }) => {
  try {
    await destroy(ctx.staticDir(), tag, { ...ctx.coreOptions(), force: o.force === true });
    ctx.print({ destroyed: true, tag }, `Destroyed ${tag}.\n`);
  } finally {
    await flushHistory();
  }
});
