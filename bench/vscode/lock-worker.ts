/**
 * Another process taking and releasing real locks, for the VS Code benchmark: the core as built
 * (dist/core.js), with its default timing (a heartbeat every 2.5 s while a lock is held).
 * Steered over IPC:
 *
 *   { type: 'lock' | 'release', id, staticDir, tags }
 *     -> { type: 'done', id, times: [[before, after], ...] }   (one pair per tag)
 *     -> { type: 'error', id, message }
 *
 * `before` and `after` are wall-clock times (Date.now()) read right before each acquire or release
 * and right after it returned: the lock appeared or went between the two. The extension host is
 * on the same machine, so its Date.now() is comparable. When the channel closes, the worker
 * releases what it holds and exits.
 */
import * as path from 'path';

type Core = typeof import('../../src/core');
type Lease = Awaited<ReturnType<Core['acquire']>>;

const core = require(path.join(__dirname, '..', '..', '..', 'dist', 'core.js')) as Core;
const leases = new Map<string, Lease>();

interface Request {
  type: 'lock' | 'release';
  id: number;
  staticDir: string;
  tags: string[];
}

async function handle(req: Request): Promise<[number, number][]> {
  const times: [number, number][] = [];
  for (const tag of req.tags) {
    const key = `${req.staticDir}\0${tag}`;
    if (req.type === 'lock') {
      const before = Date.now();
      const lease = await core.acquire(req.staticDir, tag, { createOnce: false, purpose: 'benchmark' });
      times.push([before, Date.now()]);
      leases.set(key, lease);
    } else {
      const lease = leases.get(key);
      if (lease === undefined) throw new Error(`${tag} is not held by this worker`);
      leases.delete(key);
      const before = Date.now();
      await lease.release();
      times.push([before, Date.now()]);
    }
  }
  return times;
}

process.on('message', (m: Request) => {
  handle(m).then(
    (times) => process.send?.({ type: 'done', id: m.id, times }),
    (err: unknown) => process.send?.({ type: 'error', id: m.id, message: err instanceof Error ? err.message : String(err) }),
  );
});

process.on('disconnect', () => {
  void Promise.allSettled([...leases.values()].map((l) => l.release())).then(() => process.exit(0));
});
