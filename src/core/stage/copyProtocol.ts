/**
 * The messages between the copying workers (copyWorker.ts) and the thread that hands them files
 * (copyWorkers.ts), and the sizes both go by. Plain data, cloned by `postMessage`.
 */
import type { Copied, SeenFile } from './copyTypes';
import type { TreeSize } from './types';

/** Why a copy failed (see `CopyFailure`). */
export type FailSide = 'changed' | 'source' | 'dest' | 'stopped' | 'lost';

/** Up to this size a file is read whole, hashed and written in one go (the same in copy.ts). */
export const SMALL_MAX = 1024 * 1024;
/**
 * Larger files are copied in chunks of this size: small enough to stay in the core's cache
 * between the read, the hash and the write, and the stop flag is looked at between them.
 */
export const CHUNK = 256 * 1024;
/** A large file's progress is sent this often (bytes). */
export const PROGRESS_EVERY = 8 * 1024 * 1024;
/** Measuring a source tree gives up after this long (progress then has no total). */
export const MEASURE_MS = 10_000;

export interface CopyJob {
  id: number;
  src: string;
  dest: string;
  seen?: SeenFile;
  fence?: { path: string; ino: number };
  /** `dest` was created already (empty, by the creating worker) as this inode: opened, not created. */
  created?: number;
}

/** `stop`: the calling staging's flag, set when it stops (looked at between files and chunks). */
export type ToWorker = { stop: SharedArrayBuffer } & ({ copy: CopyJob[] } | { create: CopyJob[] } | { measure: { id: number; dirs: string[] } });

export interface ErrorShape {
  message: string;
  code?: string;
  path?: string;
  syscall?: string;
}

export type Result =
  | { id: number; size: number; sha256: string; end: Copied['end']; ino: number }
  | { id: number; failed: FailSide; error?: ErrorShape }
  | { id: number; total: TreeSize | null }
  | { id: number; created: number };

export type FromWorker = { results: Result[] } | { id: number; progress: number };
