/**
 * `devserver-stage reserve TAG --for DURATION [--note TEXT]`: takes the build's lock for a person
 * and returns at once, the lock held until the end it names. `--extend`: moves the end of one's
 * own reservation to DURATION from now.
 */
import { flushHistory } from '../core/log/history';
import { reservationDuration } from '../core/lock/reservation';
import { describeReservation, extendReservation, reserve } from '../core/reserve';
import type { LockInfo } from '../core/base/types';
import { commandMain, type CommandContext } from './context';
import { queueNotice } from './format';
import { printable, stderr } from './output';
import { stoppableWait } from './stopWait';

export const main = commandMain(async (ctx, [typed]: readonly [string], o: { for: string; note?: string; wait: number; extend?: boolean }) => {
  const tag = ctx.tagArg(typed);
  const forMs = reservationDuration(o.for);
  try {
    if (o.extend === true) {
      const info = await extendReservation(ctx.staticDir(), tag, { ...ctx.coreOptions(), forMs });
      ctx.print(info, `Moved the reservation of ${printable(tag)}: ${describeReservation(info)}.\n`);
      return;
    }
    const info = await reserveStoppable(ctx.staticDir(), tag, forMs, o, ctx.coreOptions());
    ctx.print(info, `Reserved ${printable(tag)}: ${describeReservation(info)}${info.holder?.fence !== undefined ? ` (fencing token ${info.holder.fence})` : ''}.\n`);
  } finally {
    await flushHistory();
  }
});

/** Ctrl-C, SIGTERM or SIGHUP while waiting in line stops the wait: the tool then exits 128 + that signal. */
function reserveStoppable(staticDir: string, tag: string, forMs: number, o: { note?: string; wait: number }, core: ReturnType<CommandContext['coreOptions']>): Promise<LockInfo> {
  const onQueue = queueNotice(tag, stderr);
  return stoppableWait((signal) =>
    reserve(staticDir, tag, {
      ...core,
      forMs,
      waitMs: o.wait * 1000,
      signal,
      ...(o.note !== undefined ? { note: o.note } : {}),
      ...(onQueue !== undefined ? { onQueue } : {}),
    }),
  );
}
