/**
 * Taking and releasing a staging area's lock: the devserver's AcquireLock/ReleaseLock, with a
 * named holder, a heartbeat, stale takeover by exactly one process, and the protected work told
 * (through an AbortSignal) when the lock is lost. The held lock is the Lease (lease.ts); one attempt
 * at taking it, and a stale lock's takeover, are attempt.ts; why it cannot be taken, refusals.ts.
 */
import * as path from 'path';
import { openDirIfThere, openDirWhere } from '../fs/anchored';
import { fsClockSkew } from '../fs/clock';
import { StagingError } from '../base/errors';
import { lockPathOf } from './judge';
import { Lease, leaseHeldAt, type ReleaseOptions } from './lease';
import type { OpenedLockArea } from './options';
import { clampTiming } from '../base/protocol';
import { findHeldAbove } from './nesting';
import { Line } from './queue';
import { cancelled, lockedError, nestingError, queuedError } from './refusals';
import { tryAcquire } from './attempt';
import { openArea, parseTag, removeCreated, resolveArea, resolveStaticDir, type Area } from '../fs/tags';

export { Lease, heldLeases, type LeaseEvents, type ReleaseOptions } from './lease';
export type { AcquireOptions } from './options';
import type { AcquireOptions } from './options';


/**
 * Takes the lock of `<staticDir>/<tag>`. With `createOnce` (the default) the area must not exist
 * and is created; if the lock then cannot be taken, the directories this call created are removed
 * again, and an area that existed before is left exactly as it was.
 */
export async function acquire(staticDir: string, tag: string, options: AcquireOptions = {}): Promise<Lease> {
  const startedMs = Date.now();
  const timing = clampTiming(options);
  const createOnce = options.createOnce ?? true;
  const waitMs = Math.max(0, options.waitMs ?? 0);
  // An existing area is opened at once; what resolving would have checked, opening it proved.
  const quick = createOnce ? undefined : await openExisting(staticDir, tag);
  const area = quick?.area ?? (await resolveArea(staticDir, tag));
  if (waitMs === 0 && area.segments.length > 1) {
    // Fail before creating anything inside an area another holds (the check after taking decides).
    const above = await findHeldAbove(area, timing, Date.now() + (await fsClockSkew(area.realStaticDir)), area.io).catch((err: unknown) => {
      quick?.opened.dir.close();
      throw err;
    });
    if (above !== undefined) {
      quick?.opened.dir.close();
      throw nestingError(area, { info: above, relation: 'above' });
    }
  }
  let opened: OpenedLockArea = quick?.opened ?? (await openArea(area, createOnce));
  const line = new Line(area, opened.dir, timing, { ...options, waits: waitMs > 0 });
  let handedOver = false;
  try {
    const deadline = Date.now() + waitMs;
    let vanished = 0;
    let retries = 0;
    // What the fencing counter was found at by an attempt that had to let go: the next proposes above it.
    const counter = { hint: 0 };
    for (;;) {
      if (options.signal?.aborted === true) throw cancelled(area, options.signal);
      // Those who wait enter in turn: while a live waiter is ahead, this caller does not try (queue.ts).
      const ahead = await line.ahead();
      const outcome = ahead.length > 0 ? ahead : await tryAcquire(area, opened, timing, options, counter);
      if (outcome instanceof Lease) {
        await line.leave();
        handedOver = true;
        outcome.adopt(options.warn);
        await outcome.record('acquired', { waitedMs: Date.now() - startedMs });
        return outcome;
      }
      if (outcome === 'retry') {
        // The lock vanished or we took a stale one over: try again at once. Every so often through
        // a timer: on a local filesystem each step is synchronous, and a run of retries must not
        // keep the event loop (timers, signals) waiting.
        if (++retries % 8 === 0) await sleep(1 + Math.random() * 4, options.signal).catch(() => {
          throw cancelled(area, options.signal!);
        });
        continue;
      }
      if (outcome === 'vanished') {
        if (createOnce || ++vanished > 10) {
          throw new StagingError('ENOENT', `The staging area ${area.dir} was removed by another process while this one was locking it.`, { path: area.dir });
        }
        const again = await openArea(area, false);
        again.created.unshift(...opened.created);
        const parentsBefore = opened.closeParents;
        opened.dir.close();
        opened = { ...again, closeParents: () => (parentsBefore(), again.closeParents()) };
        line.moveTo(opened.dir);
        continue;
      }
      if (Date.now() >= deadline) {
        if (Array.isArray(outcome)) throw await queuedError(area, opened, timing, { shown: line.shown, ahead: outcome }, waitMs);
        throw outcome instanceof StagingError ? outcome : lockedError(outcome);
      }
      // A new place in line, or a watch just begun: look again, since what changed before made no event.
      if (await line.join()) continue;
      await line.wait(deadline, options.signal, !Array.isArray(outcome)).catch((err: unknown) => {
        throw options.signal?.aborted === true ? cancelled(area, options.signal) : err;
      });
    }
  } catch (err) {
    await line.leave();
    await removeCreated(opened.created);
    throw err;
  } finally {
    if (!handedOver) {
      opened.closeParents();
      opened.dir.close();
    }
  }
}

/**
 * An existing area on a local filesystem, the usual case, opened in one lookup from the static
 * directory's real path with `O_NOFOLLOW`: for a tag of one segment that is the same lookup as
 * opening the static directory and then the area below it; for a deeper tag it is kept only if the
 * kernel places what it opened exactly at that path (no link on the way). Then the area is a
 * directory, inside the static directory, reached without a link: all that `resolveArea` checks.
 * Undefined otherwise (missing, a link to follow, a network filesystem): then `resolveArea` and
 * `openArea` go level by level and say what is wrong.
 */
async function openExisting(staticDirIn: string, tag: string): Promise<{ area: Area; opened: OpenedLockArea } | undefined> {
  const segments = parseTag(tag);
  const { staticDir, realStaticDir, io } = await resolveStaticDir(staticDirIn);
  if (!io.sync) return undefined;
  const where = path.join(realStaticDir, ...segments);
  const dir = segments.length === 1 ? await openDirIfThere(where, true) : await openDirWhere(where, true);
  if (dir === undefined) return undefined;
  const area: Area = { staticDir, realStaticDir, tag: segments.join('/'), segments, dir: path.join(staticDir, ...segments), exists: true, dev: dir.dev, io };
  return { area, opened: { dir, created: [], closeParents: () => undefined } };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) return reject(signal.reason);
    const onAbort = (): void => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Runs `fn` while holding the lock (OpenStack's `synchronized`). `fn` receives the lease's signal,
 * which aborts if the lock is lost. If `fn` fails and this call created the area, the area is
 * destroyed so a later run can retry (the devserver's failed-staging path); an area that existed
 * before is kept. If the lock was lost, this rejects with ECOMPROMISED even when `fn` succeeded.
 */
export async function withLock<T>(
  staticDir: string,
  tag: string,
  fn: (signal: AbortSignal, lease: Lease) => Promise<T> | T,
  options: AcquireOptions & { destroyOnError?: boolean } = {},
): Promise<T> {
  const lease = await acquire(staticDir, tag, options);
  let result: T;
  try {
    result = await fn(lease.signal, lease);
  } catch (err) {
    await lease.release(lease.state === 'held' ? { destroy: options.destroyOnError ?? lease.created } : {}).catch(() => undefined);
    throw err;
  }
  await lease.release(); // rejects with ECOMPROMISED if the lock was lost, even when `fn` succeeded
  return result;
}

/**
 * Releases a lock this process holds, by tag (the devserver's ReleaseLock). ENOTHELD when this
 * process does not hold it: only the holder may release.
 */
export async function release(staticDir: string, tag: string, options: ReleaseOptions = {}): Promise<void> {
  const area = await resolveArea(staticDir, tag);
  const lease = leaseHeldAt(lockPathOf(area.dir));
  if (lease === undefined) {
    throw new StagingError('ENOTHELD', `This process does not hold the lock on ${area.dir}; only its holder can release it (or force-release it).`, {
      path: lockPathOf(area.dir),
    });
  }
  await lease.release(options);
}
