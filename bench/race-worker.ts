/**
 * One contender in the stale-lock race (bench part c), steered over IPC.
 * Receives { type: 'go', mode, staticDir, tag, at }: at time `at` (epoch ms) tries once to take
 * the lock of `<staticDir>/<tag>`, with bare proper-lockfile or with the core, and replies
 * { type: 'result', ok, code }. Keeps a lock it won until { type: 'drop' }, then releases it and
 * replies { type: 'dropped' }. Exits when the channel closes.
 */
import * as path from 'path';
import * as lockfile from 'proper-lockfile';
import { acquire } from '../src/core/lock/lock';

interface Go {
  type: 'go';
  mode: 'bare' | 'core';
  staticDir: string;
  tag: string;
  at: number;
}

let drop: (() => Promise<unknown>) | undefined;

const send = (m: unknown): void => {
  process.send?.(m);
};

/** Sleeps most of the way, then spins, so all contenders start within a fraction of a millisecond when CPUs allow. */
async function startAt(at: number): Promise<void> {
  const sleepMs = at - Date.now() - 2;
  if (sleepMs > 0) await new Promise((r) => setTimeout(r, sleepMs));
  while (Date.now() < at) {
    /* spin */
  }
}

async function attempt(go: Go): Promise<void> {
  const dir = path.join(go.staticDir, go.tag);
  await startAt(go.at);
  try {
    if (go.mode === 'bare') {
      const release = await lockfile.lock(path.join(dir, 'devserver'), {
        realpath: false,
        lockfilePath: path.join(dir, 'devserver.lock'),
        stale: 2_000,
        retries: 0,
        // A lock taken over under us must not throw from a timer: the bench counts owners, nothing more.
        onCompromised: () => undefined,
      });
      drop = release;
    } else {
      const lease = await acquire(go.staticDir, go.tag, { createOnce: false, staleMs: 2_000 });
      drop = () => lease.release();
    }
    send({ type: 'result', ok: true });
  } catch (err) {
    send({ type: 'result', ok: false, code: (err as { code?: string }).code });
  }
}

process.on('message', (m: { type?: string }) => {
  if (m.type === 'go') void attempt(m as Go);
  else if (m.type === 'drop') {
    const d = drop;
    drop = undefined;
    // Releasing a lock someone else took over fails by design (ERELEASED, ECOMPROMISED): ignore.
    void (d === undefined ? Promise.resolve() : d().catch(() => undefined)).then(() => send({ type: 'dropped' }));
  }
});
process.on('disconnect', () => process.exit(0));
send({ type: 'ready' });
