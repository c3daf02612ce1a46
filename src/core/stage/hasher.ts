/**
 * SHA-256 of local files in worker threads. Hashing every staged byte on the main thread made
 * staging a directory CPU-bound at about a third of `cp -r`'s speed; in workers it runs beside the
 * copy (which the kernel does), and the main thread stays free for the editor.
 */
import * as os from 'os';
import { Worker } from 'worker_threads';

// Inline, so the bundle needs no separate worker file. Reads with a fixed buffer; reports size too.
// Workers share the process's descriptors: the file is read through the stager's own descriptor,
// at explicit offsets (the copy reads the same descriptor), and left open for the stager to close.
const WORKER_SOURCE = `
const { parentPort } = require('worker_threads');
const fs = require('fs');
const crypto = require('crypto');
const buf = Buffer.allocUnsafe(4 * 1024 * 1024);
parentPort.on('message', ({ id, fd, limit }) => {
  try {
    const st = fs.fstatSync(fd);
    const hash = crypto.createHash('sha256');
    let size = 0;
    for (;;) {
      const n = fs.readSync(fd, buf, 0, Math.min(buf.length, limit - size), size);
      if (n === 0) break;
      hash.update(buf.subarray(0, n));
      size += n;
      if (size % (16 * 1024 * 1024) === 0) parentPort.postMessage({ id, progress: size });
    }
    parentPort.postMessage({ id, size, sha256: hash.digest('hex'), opened: { ino: st.ino, size: st.size, mtimeMs: st.mtimeMs } });
  } catch (err) {
    parentPort.postMessage({ id, error: String(err && err.message || err), code: err && err.code });
  }
});
`;

/** What a file was when the worker began to read it: to tell whether it changed while it was staged. */
export interface FileIdentity {
  ino: number;
  size: number;
  mtimeMs: number;
}

export interface FileDigest {
  size: number;
  sha256: string;
  opened: FileIdentity;
}

interface Reply {
  id: number;
  /** Bytes hashed so far, sent every 16 MiB of a large file. */
  progress?: number;
  size?: number;
  sha256?: string;
  opened?: FileIdentity;
  error?: string;
  code?: string;
}

export class FileHasher {
  private readonly workers: Worker[] = [];
  private readonly pending = new Map<
    number,
    { resolve: (r: FileDigest) => void; reject: (e: Error) => void; onProgress?: (bytes: number) => void }
  >();
  private nextId = 0;
  private turn = 0;
  private closed = false;

  /** Two workers where there are two cores or more: one per core beside the main thread's I/O. */
  constructor(private readonly size = Math.max(1, Math.min(2, os.cpus().length))) {}

  /**
   * The size and SHA-256 of the file open as `fd`; `onProgress` hears bytes hashed so far, now
   * and then. The caller keeps `fd` open until this settles. `limit`: read no more than this many
   * bytes (the size and hash are then of those), for a file that may keep growing while it is read.
   */
  hash(fd: number, onProgress?: (bytes: number) => void, limit = Number.MAX_SAFE_INTEGER): Promise<FileDigest> {
    if (this.closed) return Promise.reject(new Error('the hasher was closed'));
    if (this.workers.length < this.size) this.spawn();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, onProgress === undefined ? { resolve, reject } : { resolve, reject, onProgress });
      this.workers[this.turn++ % this.workers.length].postMessage({ id, fd, limit });
    });
  }

  private spawn(): void {
    const w = new Worker(WORKER_SOURCE, { eval: true });
    w.on('message', (r: Reply) => {
      const p = this.pending.get(r.id);
      if (p === undefined) return;
      if (r.progress !== undefined) {
        p.onProgress?.(r.progress);
        return;
      }
      this.pending.delete(r.id);
      if (r.error !== undefined) p.reject(Object.assign(new Error(r.error), r.code !== undefined ? { code: r.code } : {}));
      else {
        p.onProgress?.(r.size!);
        p.resolve({ size: r.size!, sha256: r.sha256!, opened: r.opened! });
      }
    });
    w.on('error', (err) => this.failAll(err));
    // Not unref'd: while a hash is awaited the worker may be all that keeps the process alive
    // (a command-line staging would exit silently). The stager closes them when it is done.
    this.workers.push(w);
  }

  private failAll(err: Error): void {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }

  /**
   * Stops the workers, even mid-file: a cancelled staging must not keep reading. Hashes still
   * pending fail only once the workers are gone, since their callers then close the descriptors.
   */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.workers.map((w) => w.terminate()));
    this.workers.length = 0;
    this.failAll(new Error('the hasher was closed'));
  }
}
