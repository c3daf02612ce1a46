/**
 * A lock holder in its own process, steered over IPC by a test.
 * argv[2]: JSON { staticDir, tag, ...AcquireOptions }.
 * Sends { type: 'acquired', pid, token } or { type: 'error', code, message };
 * later { type: 'lost', code, message, atMs } if the lock is lost, then { type: 'explained', loss, sentence }
 * (who broke it, from explainLoss).
 * Accepts 'release' and 'release-destroy'; replies { type: 'released' } and exits.
 */
import { acquire, type AcquireOptions } from '../../src/core/lock/lock';
import { explainLoss, lossSentence } from '../../src/core/loss';

interface Args extends AcquireOptions {
  staticDir: string;
  tag: string;
}

/** A message to the test, while it listens: an explanation that comes after the release has no one to hear it. */
const send = (m: unknown): void => {
  if (process.connected) process.send?.(m);
};

async function main(): Promise<void> {
  const { staticDir, tag, ...options } = JSON.parse(process.argv[2] ?? '{}') as Args;
  let lease;
  try {
    lease = await acquire(staticDir, tag, options);
  } catch (err) {
    const e = err as { code?: string; message?: string };
    send({ type: 'error', code: e.code, message: e.message });
    process.disconnect?.();
    return;
  }
  lease.on('lost', (reason) => {
    send({ type: 'lost', code: reason.code, message: reason.message, atMs: Date.now() });
    void explainLoss(lease, lease.timing).then((loss) => send({ type: 'explained', loss, sentence: lossSentence(loss) }));
  });
  send({ type: 'acquired', pid: process.pid, token: lease.holder.token });
  process.on('message', (m) => {
    if (m !== 'release' && m !== 'release-destroy') return;
    lease.release({ destroy: m === 'release-destroy' }).then(
      () => send({ type: 'released' }),
      (err: { code?: string; message?: string }) => send({ type: 'release-error', code: err.code, message: err.message }),
    ).finally(() => process.disconnect?.());
  });
}

void main();
