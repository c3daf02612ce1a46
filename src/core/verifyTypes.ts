/** What a verification reports: its problems, progress, options and result, shared by verify.ts and the Verifier. */
import type { HistoryOptions } from './log/history';
import type { LockState, Timing } from './base/types';

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
