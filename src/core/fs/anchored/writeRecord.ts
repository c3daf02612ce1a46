/**
 * Writing the tool's own records: created with `O_EXCL | O_NOFOLLOW`, appended to and touched only
 * through a descriptor that is a regular file with one link.
 */
import * as fs from 'fs';
import { errnoCode } from '../../base/errors';
import { type Calls, callsFor } from '../calls';
import { notARecord, refuseUnlessOneLink } from './refuse';

const C = fs.constants;

/**
 * Creates one of the tool's own files with `data`, never through a link and never over anything
 * (EEXIST if the name is taken by anything at all), with exactly `mode` whatever the umask, so that
 * every user who can see the area can read it.
 */
export function createRecordSync(p: string, data: string | Buffer, mode = 0o644): void {
  // Kept synchronous for a caller that cannot wait for a promise (the command record, written
  // before the command starts); every other caller creates through `createRecord`.
  const fd = fs.openSync(p, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, mode);
  try {
    // Linked elsewhere between the create and the write: that name is not ours to fill.
    refuseUnlessOneLink(fs.fstatSync(fd), p);
    if (typeof data === 'string') fs.writeSync(fd, data);
    else fs.writeSync(fd, data);
    fs.fchmodSync(fd, mode);
  } catch (err) {
    fs.closeSync(fd);
    try {
      fs.unlinkSync(p);
    } catch {
      /* best effort: the name was ours a moment ago */
    }
    throw err;
  }
  fs.closeSync(fd);
}

/** `createRecordSync` with synchronous calls (`sync`, a local filesystem) or through the thread pool. */
export async function createRecord(p: string, data: string | Buffer, mode = 0o644, sync = false): Promise<void> {
  const calls = callsFor(sync);
  const fd = await calls.open(p, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, mode);
  try {
    refuseUnlessOneLink(await calls.fstat(fd), p);
    const bytes = typeof data === 'string' ? Buffer.from(data) : data;
    for (let off = 0; off < bytes.length; ) off += await calls.write(fd, bytes, off, bytes.length - off);
    await calls.fchmod(fd, mode);
  } catch (err) {
    await calls.close(fd).catch(() => undefined);
    await calls.unlink(p).catch(() => undefined);
    throw err;
  }
  await calls.close(fd);
}

export interface AppendOptions {
  /** The mode of a file this call creates (default 0o644, less the umask unless `exact`). */
  mode?: number;
  /**
   * Create the file only with `O_EXCL` and give it exactly `mode`, whatever the umask; open an
   * existing one without `O_CREAT`. `false`: never create it (ENOENT when it is missing).
   */
  create?: 'umask' | 'exact' | false;
  /** Write nothing when the file already holds this many bytes or more: the answer is then `full`. */
  fullAt?: number;
  /** Synchronous calls (a local filesystem, see io.ts). */
  sync?: boolean;
  /** After a write, hand the descriptor to `keep` instead of closing it: the caller appends to it again, and closes it. */
  keep?: (fd: number) => void;
}

/** What an append did: `full` when `fullAt` was reached and nothing was written. */
export type AppendOutcome = 'written' | 'created' | 'full';

const O_APPEND_RECORD = C.O_WRONLY | C.O_APPEND | C.O_NOFOLLOW | C.O_NONBLOCK;

/** Opens a log for appending, creating it as `create` says: the descriptor and whether this call made it. */
async function openForAppend(calls: Calls, p: string, shown: string, mode: number, create: AppendOptions['create']): Promise<{ fd: number; created: boolean }> {
  for (let tries = 0; ; tries++) {
    try {
      if (create === 'umask') return { fd: await calls.open(p, O_APPEND_RECORD | C.O_CREAT, mode), created: false };
      if (create !== 'exact' || tries % 2 === 0) return { fd: await calls.open(p, O_APPEND_RECORD, 0), created: false };
      return { fd: await calls.open(p, O_APPEND_RECORD | C.O_CREAT | C.O_EXCL, mode), created: true };
    } catch (err) {
      const code = errnoCode(err);
      if (code === 'ELOOP') throw notARecord(shown, 'a symbolic link');
      // O_NONBLOCK on a FIFO without a reader.
      if (code === 'ENXIO') throw notARecord(shown, 'a FIFO');
      if (code === 'EISDIR') throw notARecord(shown, 'a directory');
      // Missing, then made by another writer in between (or the other way round): look again, a few times.
      const retry = create === 'exact' && ((tries % 2 === 0 && code === 'ENOENT') || (tries % 2 === 1 && code === 'EEXIST'));
      if (!retry || tries >= 5) throw err;
    }
  }
}

/**
 * Appends one line to one of the tool's logs, never through a link and never into a FIFO, a
 * device or a file with other names: the open does not block and the descriptor must be a
 * regular file with one link (else EIO naming it, and nothing is written). The line goes out
 * in one `write` on an `O_APPEND` descriptor, so concurrent writers' lines stay whole.
 */
export async function appendRecord(p: string, shown: string, line: string, options: AppendOptions = {}): Promise<AppendOutcome> {
  const calls = callsFor(options.sync === true);
  const mode = options.mode ?? 0o644;
  const { fd, created } = await openForAppend(calls, p, shown, mode, options.create ?? 'umask');
  let kept = false;
  try {
    const st = await calls.fstat(fd);
    refuseUnlessOneLink(st, shown);
    // Exactly `mode`: the umask of whoever happened to create it must not decide who may append.
    if (created) await calls.fchmod(fd, mode);
    if (options.fullAt !== undefined && st.size >= options.fullAt) return 'full';
    await calls.write(fd, Buffer.from(line));
    if (options.keep !== undefined) {
      options.keep(fd);
      kept = true;
    }
    return created ? 'created' : 'written';
  } finally {
    if (!kept) await calls.close(fd).catch(() => undefined);
  }
}

/** What `touchRecord` found: the file touched, or no longer the file meant under that name (gone, or another in its place). */
export type TouchOutcome = 'touched' | 'replaced';

/**
 * Sets both times of one of the tool's own files, which must still be the file `ino`, through a
 * descriptor (`futimes`), never by path: the open follows no link and does not block, and what it
 * opened is touched only when it is that very file, regular and with one link. EIO naming it when
 * it has other names (a hard link) or is not a regular file; `replaced` when the name holds
 * another file, a link, or nothing.
 */
export async function touchRecord(p: string, shown: string, ino: number, time: Date, sync = false): Promise<TouchOutcome> {
  const calls = callsFor(sync);
  let fd: number;
  try {
    fd = await calls.open(p, C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK, 0);
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT' || code === 'ELOOP') return 'replaced';
    throw err;
  }
  try {
    const st = await calls.fstat(fd);
    if (st.ino !== ino) return 'replaced';
    refuseUnlessOneLink(st, shown);
    await calls.futimes(fd, time, time);
    return 'touched';
  } finally {
    await calls.close(fd).catch(() => undefined);
  }
}
