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
import { recordHistory, thisActor, type HistoryOptions } from './log/history';
import { judgeLock } from './lock/judge';
import { clampTiming } from './base/protocol';
import { resolveArea } from './fs/tags';
import type { LockState, Timing } from './base/types';
import { Verifier } from './verifier';

export { describeEntryType } from './verifier';


/**
 * What is wrong with one artifact:
 * - `missing`: listed, not there;
 * - `truncated`, `grown`: a file smaller, or larger, than recorded;
 * - `changed`: a file of the recorded size whose SHA-256 differs, or a link leading elsewhere;
 * - `unlisted`: a file, link or other non-directory in the build that the manifest does not list
 *   (bookkeeping such as the lock, the manifest and `staged.timestamp` never is);
 * - `not-a-file`: a directory, link, FIFO, socket or device where a file is listed;
 * - `not-a-link`: anything but a link where a link is listed;
 * - `unreadable`: there, but this user cannot read it (or reading failed).
 */
export type VerifyProblemKind = 'missing' | 'truncated' | 'grown' | 'changed' | 'unlisted' | 'not-a-file' | 'not-a-link' | 'unreadable';

/** What kind of directory entry something is. */
export type EntryType = 'file' | 'symlink' | 'directory' | 'fifo' | 'socket' | 'device' | 'unknown';

/** What an artifact is, or was recorded as: as much as is known. */
export interface ArtifactFacts {
  type?: EntryType;
  size?: number;
  sha256?: string;
  linkTarget?: string;
}

export interface VerifyProblem {
  /** The artifact's name relative to the build, '/'-separated. */
  path: string;
  kind: VerifyProblemKind;
  /** What the manifest records (absent for `unlisted`). */
  expected?: ArtifactFacts;
  /** What is there (absent for `missing`). */
  actual?: ArtifactFacts;
  /** Where the kind alone does not say why: the error for `unreadable`, the directory on the way that is not one for `missing`. */
  detail?: string;
}

export interface VerifyProgress {
  /** Listed artifacts dealt with so far, of `totalFiles`. */
  files: number;
  totalFiles: number;
  /** Bytes dealt with so far (hashed, or known to be wrong without reading), of `totalBytes`, the listed files' sizes. */
  bytes: number;
  totalBytes: number;
  /** The artifact being checked now. */
  current?: string;
}

export interface VerifyOptions extends Partial<Timing>, HistoryOptions {
  /** Identifies this process or editor window in the history. */
  clientId?: string;
  /** Stops verifying; the call rejects with ECANCELED. */
  signal?: AbortSignal;
  /** Called at most every 100 ms, and once at the end. */
  onProgress?: (p: VerifyProgress) => void;
  /** Worker threads hashing large files beside the main thread (which hashes the small ones). Default: one per core, at most 2. */
  concurrency?: number;
  /** The most of the manifest parsed in one piece (see `JudgeOptions.maxParse`; ETOOBIG past it). Default: no limit. */
  maxParse?: number;
}

export interface VerifyResult {
  staticDir: string;
  tag: string;
  /** `<staticDir>/<tag>` */
  dir: string;
  /** No problems. */
  ok: boolean;
  /**
   * The build's lock state while it was verified (held, stale or legacy if it was so before or
   * after): a held build may be being staged, and these results may change.
   */
  state: LockState;
  /** Listed artifacts checked (files and links): all of the manifest's. */
  checkedFiles: number;
  /** Bytes read and hashed. */
  checkedBytes: number;
  /** In the order of their paths. */
  problems: VerifyProblem[];
}

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
