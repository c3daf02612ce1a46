/**
 * The messages between the hashing workers (hashWorker.ts) and the hasher that hands them files
 * (hasher.ts). Plain data, cloned by `postMessage`.
 */

/** What a file was when the worker began to read it: to tell whether it changed while it was staged. */
export interface FileIdentity {
  ino: number;
  size: number;
  mtimeMs: number;
}

/**
 * Hash the file open as `fd` (a descriptor of this process: workers share them), from its start,
 * reading no more than `limit` bytes.
 */
export interface HashJob {
  id: number;
  fd: number;
  limit: number;
}

/** Bytes hashed so far (now and then, of a large file), then the digest or the failure. */
export type HashReply =
  | { id: number; progress: number }
  | { id: number; size: number; sha256: string; opened: FileIdentity }
  | { id: number; error: string; code?: string };
