/**
 * Verifying a staged build against its manifest: every artifact it lists is there, of the size and
 * SHA-256 it records, and nothing else is beside them but bookkeeping.
 *
 * Verification only reads, and never takes the build's lock: a reader must not block stagers (a
 * large build takes a while to read, and a lock held that long would stall every `stage --add` of
 * it). A build being staged meanwhile is reported with its lock state, so callers can say that
 * the results may change.
 *
 * The walk and the hashing are verifier.ts's.
 */
import { StagingError, asStagingError, isStagingError } from './base/errors';
import { openBuild, readOpenedArtifacts } from './build/browse';
import { fsClockSkew } from './fs/clock';
import { recordHistory, thisActor } from './log/history';
import { judgeLock } from './lock/judge';
import { clampTiming } from './base/protocol';
import { resolveArea } from './fs/tags';
import type { LockState } from './base/types';
import { Verifier } from './verifier';
import type { VerifyOptions, VerifyResult } from './verifyTypes';

export type { ArtifactFacts, EntryType, VerifyOptions, VerifyProblem, VerifyProblemKind, VerifyProgress, VerifyResult } from './verifyTypes';

export { describeEntryType } from './verifier';









/**
 * Checks the build `tag` against its manifest. Rejects with ENOENT when there is no such build,
 * ENOMANIFEST when it has no manifest, ECORRUPT when the manifest is damaged, ECANCELED when
 * `signal` aborts; everything wrong with the artifacts themselves is in the result's `problems`.
 */
export async function verify(staticDir: string, tag: string, options: VerifyOptions = {}): Promise<VerifyResult> {
  const cancelled = (): StagingError => new StagingError('ECANCELED', `Verifying ${tag} was cancelled.`);
  const aborted = (): boolean => options.signal?.aborted === true;
  if (aborted()) throw cancelled();
  const area = await resolveArea(staticDir, tag);
  const build = await openBuild(area);
  const verifier = new Verifier(build, options);
  const onAbort = (): void => void verifier.stop();
  options.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const timing = clampTiming(options);
    const lockState = async (): Promise<LockState> => {
      const skew = await fsClockSkew(area.realStaticDir);
      return (await judgeLock({ staticDir: area.staticDir, tag: area.tag, dir: area.dir, opened: build }, timing, Date.now() + skew)).info.state;
    };
    const before = await lockState();
    const artifacts = await readOpenedArtifacts(area, build, undefined, options.maxParse !== undefined ? { maxParse: options.maxParse } : {});
    const problems = await verifier.run(artifacts, area.io.sync);
    const after = await lockState();
    const result: VerifyResult = {
      staticDir: area.staticDir,
      tag: area.tag,
      dir: area.dir,
      ok: problems.length === 0,
      state: before !== 'free' ? before : after,
      checkedFiles: verifier.files,
      checkedBytes: verifier.hashedBytes,
      problems,
    };
    const event = { tag: area.tag, kind: 'verified', holder: thisActor(options.clientId), ok: result.ok, problems: problems.length, files: result.checkedFiles, bytes: result.checkedBytes } as const;
    await recordHistory(area.staticDir, event, options.warn);
    return result;
  } catch (err) {
    if (aborted()) throw cancelled();
    throw isStagingError(err) ? err : asStagingError(err, 'verify', area.dir);
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    await verifier.stop();
    build.close();
  }
}
