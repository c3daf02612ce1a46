/**
 * A waiter for the handoff bench (part f), steered over IPC.
 * Receives { type: 'wait', staticDir, tag }: sends { type: 'started' }, waits for the lock with
 * `acquire(…, { waitMs })`, and once it holds it sends { type: 'acquired', atMs } (wall-clock
 * milliseconds with sub-millisecond precision, comparable across processes), releases it and
 * sends { type: 'released' }. Exits when the channel closes.
 */
import { performance } from 'perf_hooks';
import { acquire } from '../src/core/lock/lock';

interface Wait {
  type: 'wait';
  staticDir: string;
  tag: string;
}

const send = (m: unknown): void => {
  process.send?.(m);
};

process.on('message', (m: Wait) => {
  if (m.type !== 'wait') return;
  send({ type: 'started' });
  acquire(m.staticDir, m.tag, { createOnce: false, waitMs: 60_000 }).then(
    async (lease) => {
      send({ type: 'acquired', atMs: performance.timeOrigin + performance.now() });
      await lease.release();
      send({ type: 'released' });
    },
    (err: unknown) => send({ type: 'error', message: err instanceof Error ? err.message : String(err) }),
  );
});
process.on('disconnect', () => process.exit(0));
send({ type: 'ready' });
