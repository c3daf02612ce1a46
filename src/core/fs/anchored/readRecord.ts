/**
 * Reading the tool's own records and logs without following a link or blocking on a FIFO, and only
 * as regular files of a bounded size: whole, unless already seen, or a log's tail.
 */
import * as fs from 'fs';
import { errnoCode } from '../../base/errors';
import { fsPath } from '../../base/rawNames';
import { callsFor } from '../calls';
import { describeType, notARecord } from './refuse';

const C = fs.constants;

/**
 * Reads one of the tool's own small files (an owner record, a manifest) without following a link
 * and without blocking on a FIFO: ENOENT as usual when it is absent; EIO naming it when it is a
 * link, not a regular file, or larger than `maxBytes`. Kept synchronous for callers that cannot
 * wait for a promise (the release at exit, a command record read by a synchronous judge); every
 * other caller reads through `readRecord`, synchronous there too on a local filesystem.
 */
export function readRecordSync(p: string, shown: string, maxBytes: number): string {
  return readRecordBytesSync(p, shown, maxBytes).toString('utf8');
}

/** `readRecordSync`, as bytes. */
export function readRecordBytesSync(p: string, shown: string, maxBytes: number): Buffer {
  let fd: number;
  try {
    fd = fs.openSync(fsPath(p), C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK);
  } catch (err) {
    if (errnoCode(err) === 'ELOOP') throw notARecord(shown, 'a symbolic link');
    throw err;
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw notARecord(shown, describeType(st));
    if (st.size > maxBytes) throw notARecord(shown, `larger than ${maxBytes} bytes`);
    const buf = Buffer.alloc(Math.min(maxBytes + 1, st.size + 1));
    let n = 0;
    for (;;) {
      const got = fs.readSync(fd, buf, n, buf.length - n, null);
      if (got === 0) break;
      n += got;
      if (n >= buf.length) {
        if (n > maxBytes) throw notARecord(shown, `larger than ${maxBytes} bytes`);
        break;
      }
    }
    return buf.subarray(0, n);
  } finally {
    fs.closeSync(fd);
  }
}

/** `readRecordSync` with synchronous calls (`sync`, a local filesystem) or off the event loop's thread, for filesystems that may stall (NFS, FUSE). */
export async function readRecord(p: string, shown: string, maxBytes: number, sync = false): Promise<string> {
  return (await readRecordBytes(p, shown, maxBytes, sync)).toString('utf8');
}

/**
 * `readRecord`'s bytes, not decoded: a manifest of 100,000 artifacts (30 MB) decoded in one piece
 * would hold the event loop longer than a slice may, so its reader decodes it a slice at a time
 * (manifest.ts).
 */
export async function readRecordBytes(p: string, shown: string, maxBytes: number, sync = false): Promise<Buffer> {
  return (await readRecordUnlessSeen(p, shown, maxBytes, undefined, sync)).bytes as Buffer;
}

/**
 * What a record is, as far as its reader can tell without reading it: device, inode, size and the
 * modification and change times. A write(2) or truncate changes the times, a replacement the
 * inode; the change time cannot be set by a user. Not seen: the times are set as a write begins
 * (a read during it has part of each version under the final identity: see `readRecordUnlessSeen`),
 * coarse clocks give two writes in one tick the same times, and a write through a shared mapping
 * may not change them until later.
 */
export function recordIdentity(st: fs.Stats): string {
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
}

/**
 * `readRecordBytes`, skipping the read when the file's identity (`recordIdentity`, taken from the
 * descriptor that would be read) is `seen`: a reader that keeps what it made of a large record
 * (a manifest's counts, for a tooltip) pays one open and one fstat while it is unchanged. With
 * the identity, the change time (ms, the filesystem's clock): a reader should not keep what it
 * read of a file changed moments ago, which may have been read in the middle of a write.
 */
export async function readRecordUnlessSeen(
  p: string,
  shown: string,
  maxBytes: number,
  seen: string | undefined,
  sync = false,
): Promise<{ identity: string; changedMs: number; bytes?: Buffer }> {
  const calls = callsFor(sync);
  let fd: number;
  try {
    fd = await calls.open(fsPath(p), C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK);
  } catch (err) {
    if (errnoCode(err) === 'ELOOP') throw notARecord(shown, 'a symbolic link');
    throw err;
  }
  try {
    const st = await calls.fstat(fd);
    if (!st.isFile()) throw notARecord(shown, describeType(st));
    if (st.size > maxBytes) throw notARecord(shown, `larger than ${maxBytes} bytes`);
    const identity = recordIdentity(st);
    const changedMs = st.ctimeMs;
    if (identity === seen) return { identity, changedMs };
    // Not zeroed (30 MB of memset is another few milliseconds in one piece): only the bytes read
    // are ever handed out.
    const buf = Buffer.allocUnsafe(Math.min(maxBytes + 1, st.size + 1));
    let n = 0;
    for (;;) {
      const got = await calls.read(fd, buf, n, buf.length - n, null);
      if (got === 0) break;
      n += got;
      if (n >= buf.length) {
        if (n > maxBytes) throw notARecord(shown, `larger than ${maxBytes} bytes`);
        break;
      }
    }
    return { identity, changedMs, bytes: buf.subarray(0, n) };
  } finally {
    await calls.close(fd).catch(() => undefined);
  }
}

/** The end of a log: at most its last `maxBytes` bytes, from `from` (0: the whole file), of its `size`. */
export interface RecordTail {
  data: Buffer;
  from: number;
  size: number;
}

/**
 * Reads the last `maxBytes` bytes of one of the tool's logs, as `readRecord` reads a record: never
 * through a link, never from a FIFO or device (EIO naming it), ENOENT when it is absent.
 */
export async function readRecordTail(p: string, shown: string, maxBytes: number, sync = false): Promise<RecordTail> {
  const calls = callsFor(sync);
  let fd: number;
  try {
    fd = await calls.open(p, C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK, 0);
  } catch (err) {
    if (errnoCode(err) === 'ELOOP') throw notARecord(shown, 'a symbolic link');
    throw err;
  }
  try {
    const st = await calls.fstat(fd);
    if (!st.isFile()) throw notARecord(shown, describeType(st));
    const from = Math.max(0, st.size - maxBytes);
    const data = Buffer.allocUnsafe(st.size - from);
    let n = 0;
    while (n < data.length) {
      const got = await calls.read(fd, data, n, data.length - n, from + n);
      if (got === 0) break;
      n += got;
    }
    return { data: data.subarray(0, n), from, size: st.size };
  } finally {
    await calls.close(fd).catch(() => undefined);
  }
}
