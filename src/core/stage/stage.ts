/**
 * Staging a build: every artifact from the sources into `<staticDir>/<tag>`, under its lock.
 *
 * Each artifact is written into the holder's work directory while it is hashed; when every source is
 * done, the commit moves them all into place, each in one rename (see journal.ts). A call is all or
 * nothing: if it fails or is cancelled before the commit, the area is untouched; if the commit
 * fails, it is undone and what it replaced comes back; a new area is released with destroy so a
 * later run can retry. The area never loses an artifact it had before the call, and a stager that
 * loses its lock can no longer change the area at all (the fence, see ../commit.ts). What the call
 * does to the area, entry by entry, is the Transaction (transaction.ts).
 */
import { setMaxListeners } from 'events';
import * as path from 'path';
import { StagingError, asStagingError, isStagingError } from '../base/errors';
import { acquire, type Lease } from '../lock/lock';
import { defaultWarn, tell } from '../log/history/report';
import { findBuildAbove } from '../lock/nesting';
import { warmCopyWorkers } from './pool';
import { archiveKindOf } from './sources/archive';
import { Transaction } from './transaction';
import type { StageOptions, StageResult } from './types';

/** Stages `sources` into the area `tag`: a new build (create-once) unless `add`. */
export async function stage(staticDir: string, tag: string, sources: readonly string[], options: StageOptions = {}): Promise<StageResult> {
  if (!isSourceList(sources)) {
    throw new StagingError('ESOURCE', 'Nothing to stage: give at least one source (a directory, files, an archive or an http(s) URL).');
  }
  if (options.signal?.aborted === true) throw new StagingError('ECANCELED', `Staging of ${tag} was cancelled before it began.`);
  // They start while the lock is taken, on the other cores.
  // Archives and downloads are written by this thread: only other local sources use the workers.
  if (sources.some((s) => !/^https?:\/\//i.test(s) && archiveKindOf(s) === undefined)) warmCopyWorkers();
  const lease = await acquire(staticDir, tag, {
    createOnce: options.add !== true,
    waitMs: options.waitMs ?? 0,
    purpose: options.purpose ?? `staging ${sources.join(' ')}`.slice(0, 200),
    ...(options.clientId !== undefined ? { clientId: options.clientId } : {}),
    ...(options.staleMs !== undefined ? { staleMs: options.staleMs } : {}),
    ...(options.refreshMs !== undefined ? { refreshMs: options.refreshMs } : {}),
    ...(options.signal !== undefined ? { signal: options.signal } : {}),
    ...(options.warn !== undefined ? { warn: options.warn } : {}),
    ...(options.onQueue !== undefined ? { onQueue: options.onQueue } : {}),
  });
  // One signal for the work: the caller's cancel, or the lock being lost.
  const work = new AbortController();
  // Each source and stream listens to it, and the copying workers.
  setMaxListeners(64, work.signal);
  const onCancel = (): void => work.abort(new StagingError('ECANCELED', `Staging into ${lease.dir} was cancelled; nothing it wrote was kept.`, { path: lease.dir }));
  const onLost = (): void => work.abort(lease.signal.reason);
  options.signal?.addEventListener('abort', onCancel, { once: true });
  lease.signal.addEventListener('abort', onLost, { once: true });
  const tx = new Transaction(lease, options, work.signal, sources);
  try {
    // Checked under the lock, as nesting is: a lock held above has already refused us (ELOCKED),
    // and a build that appeared above while we waited for the lock is seen now.
    await refuseInsideBuild(lease);
    await tx.begin();
    for (const spec of sources) await tx.stageSource(spec);
    await tx.commit();
  } catch (err) {
    // A write that failed because the lock was taken away meanwhile (its work directory deleted
    // under it) says so, whether or not the heartbeat has noticed yet.
    const reason: unknown = work.signal.aborted ? work.signal.reason : ((await tx.lostLock()) ?? err);
    await tx.rollback();
    await lease.release(lease.state === 'held' ? { destroy: lease.created } : {}).catch(() => undefined);
    throw isStagingError(reason) ? reason : asStagingError(reason, 'stage into', lease.dir);
  } finally {
    options.signal?.removeEventListener('abort', onCancel);
    lease.signal.removeEventListener('abort', onLost);
    await tx.close();
  }
  const result = tx.result();
  const written = [...result.added, ...result.replaced];
  await lease.record('staged', { artifacts: written.length, skipped: result.skipped.length, bytes: written.reduce((sum, e) => sum + e.size, 0) });
  // Committed: the build holds this staging whole, whoever holds its lock now. A lock taken away
  // after the commit point (a pause past the stale threshold) is said, not taken for a failure.
  await lease.release().catch((err: unknown) => {
    if (!isStagingError(err, 'ECOMPROMISED')) throw err;
    tell(
      options.warn ?? defaultWarn,
      new StagingError('ECOMPROMISED', `The lock on ${lease.dir} was lost after this staging was committed: the build holds the staging whole. ${err.message}`, { path: lease.dir }),
    );
  });
  return result;
}

/** ENESTED when the area lies inside an existing build: a new build goes beside it, never inside it. */
async function refuseInsideBuild(lease: Lease): Promise<void> {
  const above = await findBuildAbove(lease.staticDir, lease.tag);
  if (above === undefined) return;
  const beside = above.includes('/') ? `in ${above.slice(0, above.lastIndexOf('/'))}` : 'at the top of the static directory';
  throw new StagingError(
    'ENESTED',
    `Cannot stage into ${lease.tag}: it is inside the build ${above} (${path.join(lease.staticDir, above)}), and builds are not staged inside builds. ` +
      `Choose a tag beside ${above} (${beside}), not below it.`,
    { path: lease.dir },
  );
}

/** What a caller from JavaScript may pass as sources is not checked by types: at least one non-empty string. */
function isSourceList(v: unknown): v is readonly string[] {
  return Array.isArray(v) && v.length > 0 && v.every((s) => typeof s === 'string' && s !== '');
}
