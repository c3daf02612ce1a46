/**
 * A long-lived waiter for a lock, steered round by round over IPC.
 * argv[2]: JSON { staticDir, id, staleMs?, refreshMs? }.
 * { type: 'wait', round, tag, waitMs, orderDir, marker }
 *   → acquire(createOnce: false, waitMs), reporting { type: 'position', round, position, waiting }
 *     at each onQueue call (the first as soon as its ticket exists). Once it holds the lock:
 *     creates `marker` with O_EXCL (EEXIST: another is inside too), then the first free
 *     `<orderDir>/<k>` (k = 0, 1, …) with O_EXCL, holding its id: the kernel numbers the entries.
 *     Sends { type: 'entered', round, seq: k, overlap, atMs }, removes the marker, releases and
 *     sends { type: 'released', round }; or { type: 'failed', round, code, message, atMs }.
 * { type: 'exit' } → exits.
 * `atMs`: wall-clock milliseconds with sub-millisecond precision, comparable across processes.
 */
import * as fs from 'fs';
import * as path from 'path';
import { performance } from 'perf_hooks';
import { acquire } from '../../src/core/lock/lock';

interface Args {
  staticDir: string;
  id: number;
  staleMs?: number;
  refreshMs?: number;
}

interface Wait {
  type: 'wait';
  round: number;
  tag: string;
  waitMs: number;
  orderDir: string;
  marker: string;
}

const args = JSON.parse(process.argv[2] ?? '{}') as Args;
const timing = {
  ...(args.staleMs !== undefined ? { staleMs: args.staleMs } : {}),
  ...(args.refreshMs !== undefined ? { refreshMs: args.refreshMs } : {}),
};
const send = (m: unknown): void => {
  process.send?.(m);
};
const wallMs = (): number => performance.timeOrigin + performance.now();

/** Creates the first free `<dir>/<k>` with O_EXCL and returns k. */
function enter(dir: string): number {
  for (let k = 0; ; k++) {
    try {
      fs.writeFileSync(path.join(dir, String(k)), `${args.id}\n`, { flag: 'wx' });
      return k;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}

async function wait(m: Wait): Promise<void> {
  let lease;
  try {
    lease = await acquire(args.staticDir, m.tag, {
      createOnce: false,
      waitMs: m.waitMs,
      purpose: `waiter ${args.id}`,
      ...timing,
      onQueue: (position, waiting) => send({ type: 'position', round: m.round, position, waiting }),
    });
  } catch (err) {
    const e = err as { code?: string; message?: string };
    send({ type: 'failed', round: m.round, code: e.code, message: e.message, atMs: wallMs() });
    return;
  }
  const atMs = wallMs();
  let overlap = false;
  let fd: number | undefined;
  try {
    fd = fs.openSync(m.marker, 'wx');
  } catch (err) {
    overlap = (err as NodeJS.ErrnoException).code === 'EEXIST';
  }
  const seq = enter(m.orderDir);
  send({ type: 'entered', round: m.round, seq, overlap, atMs });
  await new Promise((r) => setImmediate(r));
  if (fd !== undefined) {
    fs.closeSync(fd);
    fs.unlinkSync(m.marker);
  }
  try {
    await lease.release();
    send({ type: 'released', round: m.round });
  } catch (err) {
    send({ type: 'failed', round: m.round, code: (err as { code?: string }).code, message: (err as Error).message, atMs: wallMs() });
  }
}

process.on('message', (raw) => {
  const m = raw as { type: string };
  if (m.type === 'wait') void wait(m as Wait);
  else if (m.type === 'exit') process.disconnect?.();
});
send({ type: 'ready', id: args.id, pid: process.pid });
