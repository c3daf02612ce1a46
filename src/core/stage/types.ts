/**
 * Staging: putting a build's artifacts into `<staticDir>/<tag>` under its lock.
 * The types shared by the sources (where artifacts come in), the stager (where it is decided
 * what lands and how) and the callers (CLI, extension).
 */
import type { Readable } from 'stream';
import type { StagingError } from '../base/errors';
import type { HistoryOptions } from '../log/history';
import type { ManifestEntry } from '../build/manifest';
import type { Timing } from '../base/types';

/**
 * One thing a source yields: a file with its content, a directory, or a link. Names are as the
 * source gives them (an archive's entry name, a path relative to a copied directory); the stager
 * validates every one before anything is written.
 */
export interface IncomingEntry {
  /** Relative path inside the area, '/'-separated, as the source names it. Not yet trusted. */
  name: string;
  type: 'file' | 'directory' | 'symlink' | 'hardlink' | 'other';
  /** For files: the content, to be read exactly once, before the source yields its next entry. */
  content?: Readable;
  /** For files: the size in bytes, where the source knows it. */
  size?: number;
  /** For symlinks: the link's target as stored; for hardlinks: the name of the entry linked to. */
  linkTarget?: string;
  /** For 'other' (devices, FIFOs, sockets): what it is, for the error message. */
  what?: string;
  /** Where it came from, recorded in the manifest: a path, a URL, or `archive#entry`. */
  source: string;
  /**
   * For files that are plain local files: their path. The stager then has a worker open it once
   * (never through a link in its place), read, hash and write it instead of streaming `content`,
   * and may stage many such files at once. `content` must then be left unread (it may be omitted).
   */
  localPath?: string;
  /**
   * For `localPath` files: the file's device, inode, size and mtime when the source looked at it, before
   * anything was copied. The stager refuses the file if what it opens is another file (device and
   * inode), or if it differs afterwards (it changed while it was being staged, so its hash might
   * not be the copy's).
   */
  localStat?: { dev: number; ino: number; size: number; mtimeMs: number };
}

/** A source of entries: a local directory, files, an archive or a URL, already opened. */
export type EntrySource = AsyncIterable<IncomingEntry>;

/** What the stager gives a source when it opens it. */
export interface SourceContext {
  /** The area directory. */
  dir: string;
  /**
   * A fresh path inside the area for a temporary file (a zip must be downloaded whole before it
   * can be read). The stager removes every such path when the call ends, whatever happens.
   */
  partPath(): string;
  signal: AbortSignal;
  /** Bytes the source may still write to `partPath` files (downloads): beyond it, fail with ETOOBIG. */
  maxBytes: number;
  /** The ETOOBIG error for `source` passing `maxBytes`, saying which limit that is (size limit or free space). */
  tooBig?(source: string): StagingError;
  /** Reports bytes a source just wrote to a `partPath` file (an increment, not a running total), for progress. */
  onPartBytes(bytes: number, total?: number): void;
  /**
   * Reports bytes just received from a server (an increment), with the size it declared where it
   * did: the one measure of a download's progress whatever becomes of its body (a file, a zip
   * downloaded first, a tar unpacked as it streams in).
   */
  onDownloadBytes?(bytes: number, total?: number): void;
}

/**
 * One kind of staging source: a URL scheme, local paths. The table in `sources/index.ts` lists
 * them; the first whose `matches` accepts a source's spec opens it. A new kind is one file that
 * exports one of these, and one line in that table.
 */
export interface SourceOpener {
  /** What it opens, as the user writes it: named when no kind accepts a source. */
  readonly name: string;
  /** Whether `spec` is this kind's, by its form alone: nothing is read. */
  matches(spec: string): boolean;
  /** The entries of `spec`. Nothing is read until the iteration starts; stopping it early closes whatever was opened. */
  open(spec: string, ctx: SourceContext): EntrySource;
  /**
   * The bytes the entries of `spec` bring, where that is known before they are read (for
   * progress); undefined where it is not (an archive's unpacked size, a download). Never throws.
   * A local directory is measured by `measureTree`, off the main thread.
   */
  size?(spec: string, measureTree: MeasureTree): Promise<number | undefined>;
  /**
   * How many artifacts `spec` brings and the bytes of their names, where that is known before its
   * entries are read (for the manifest's size limit, checked before anything is copied);
   * undefined where it is not (an archive, a download). Never throws.
   */
  artifacts?(spec: string, measureTree: MeasureTree): Promise<{ artifacts: number; nameBytes: number } | undefined>;
}

/** What is below a local directory, links not followed (nor the FIFOs and devices opened). */
export interface TreeSize {
  /** Bytes of the regular files. */
  bytes: number;
  /** Regular files and symbolic links: the artifacts a staging of the directory records. */
  artifacts: number;
  /** The bytes of their names, relative to the directory. */
  nameBytes: number;
}

/** `TreeSize` of a local directory; undefined if it cannot be told in good time. The stager's copying workers do it. */
export type MeasureTree = (dir: string) => Promise<TreeSize | undefined>;

// The manifest is the core's (verify, browse and du read it too); staging writes it.
export type { Manifest, ManifestEntry } from '../build/manifest';

export interface StageProgress {
  /** The artifact being written now, or just finished ('' between artifacts). */
  artifact: string;
  /** Set on the one event sent when an artifact is finished: what became of it. */
  done?: 'added' | 'skipped' | 'replaced';
  artifactBytes: number;
  /** Undefined where unknown (a download without Content-Length, an archive entry stream). */
  artifactTotal?: number;
  /** Bytes copied by this call so far, over all artifacts (including copies found identical and dropped). */
  bytes: number;
  /** Undefined where unknown. */
  totalBytes?: number;
  /** Artifacts finished by this call so far (written, or skipped as identical). */
  artifacts: number;
  /** Bytes received from http(s) sources so far, as they arrive (compressed, for a .tar.gz); absent without downloads. */
  downloadBytes?: number;
  /** The sizes the servers declared (Content-Length) for the downloads begun so far; absent where none did. */
  downloadTotal?: number;
}

export interface StageOptions extends Partial<Timing>, HistoryOptions {
  /** Add to an existing build (lock without create-once). Default false: a new build, create-once. */
  add?: boolean;
  /** Replace an artifact of the same name whose content differs. Default false: that is an error. */
  overwrite?: boolean;
  /** Stops staging; the call rejects with ECANCELED within 100 ms. */
  signal?: AbortSignal;
  /** Called at most every 100 ms while bytes flow, and once per finished artifact. */
  onProgress?: (p: StageProgress) => void;
  /** Refuse to write more than this many bytes in one call (archive bombs, endless downloads). */
  maxBytes?: number;
  /** How long to wait for the lock, in ms (default 0). */
  waitMs?: number;
  /** While waiting for the lock: this caller's place in line and how many wait (see `acquire`). */
  onQueue?: (position: number, waiting: number) => void;
  purpose?: string;
  clientId?: string;
}

export interface StageResult {
  staticDir: string;
  tag: string;
  dir: string;
  /** Whether this call created the area. */
  created: boolean;
  /** Artifacts written by this call. */
  added: ManifestEntry[];
  /** Artifacts already there with the same size and hash: left as they were. */
  skipped: ManifestEntry[];
  /** Artifacts replaced (with `overwrite`). */
  replaced: ManifestEntry[];
  /** Bytes copied, including artifacts found identical after copying (then dropped). */
  bytes: number;
}

/** Default `maxBytes`: 64 GiB, far above any build, far below a full disk of a bomb. */
export const DEFAULT_MAX_BYTES = 64 * 1024 ** 3;

// The names staging keeps in an area are part of the on-disk protocol: defined there, once.
export { MANIFEST_FILE, PART_PREFIX, TIMESTAMP_FILE } from '../base/protocol';
