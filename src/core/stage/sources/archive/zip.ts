/**
 * Zip archives as entries, read from a file through one descriptor: the central directory read
 * ahead, small entries read and checked at once, the others streamed and checked against their
 * CRC-32 as they are read.
 */
import * as fs from 'fs';
import { Readable, Transform, pipeline } from 'stream';
import * as zlib from 'zlib';
import * as yauzl from 'yauzl';
import { StagingError, errnoCode } from '../../../base/errors';
import { callsFor } from '../../../fs/calls';
import { ioFor } from '../../../fs/io';
import type { IncomingEntry } from '../../types';
import { canceledError, fsSourceError, messageOf, sourceError, throwIfAborted } from '../errors';
import { Inbox, noop, settledOf, stripTrailingSlash } from './reading';

const S_IFMT = 0o170000;
const ZIP_OTHER: Partial<Record<number, string>> = {
  0o020000: 'character device',
  0o060000: 'block device',
  0o010000: 'FIFO (named pipe)',
  0o140000: 'socket',
};
/** A symlink's target is its content: more than this is not a path. */
const MAX_LINK_TARGET = 64 * 1024;

/** The zip archive `file`, opened once: yauzl reads it through `fd` (and closes it), and so may this module. */
interface OpenedZip {
  zip: yauzl.ZipFile;
  fd: number;
  /** Its size, and whether it is on a local filesystem (where small entries are read with synchronous calls). */
  size: number;
  local: boolean;
}

function openZip(file: string, label: string): Promise<OpenedZip> {
  return new Promise((resolve, reject) => {
    fs.open(file, 'r', (openErr, fd) => {
      if (openErr !== null) return reject(fsSourceError(openErr, label));
      const fail = (err: unknown): void => {
        fs.close(fd, noop);
        reject(errnoCode(err) ? fsSourceError(err, label) : sourceError(`${label} is not a readable zip archive: ${messageOf(err)}.`, label, err));
      };
      fs.fstat(fd, (statErr, st) => {
        if (statErr !== null) return fail(statErr);
        ioFor(file, st.dev).then((io) => {
          // decodeStrings: false keeps yauzl from refusing unsafe names itself: they are reported as
          // they are, and the stager refuses them with its own message.
          yauzl.fromRandomAccessReader(new ZipReader(fd, io.sync), st.size, { lazyEntries: true, autoClose: false, decodeStrings: false, validateEntrySizes: true }, (err, zip) => {
            if (err) fail(err);
            else resolve({ zip, fd, size: st.size, local: io.sync });
          });
        }, fail);
      });
    });
  });
}

/** Bytes read ahead of yauzl's small reads: a central directory entry is about a hundred bytes. */
const READ_AHEAD = 1024 * 1024;

/**
 * The archive as yauzl reads it: its central directory, which yauzl reads a record and then a
 * name at a time (two reads of a few dozen bytes for each entry, each a round trip to the thread
 * pool), is read ahead a megabyte at a time (with one synchronous call on a local filesystem), and
 * the small reads are served from that. Entries' data are streamed from the descriptor. It closes
 * the descriptor once yauzl and its streams are done with it.
 */
class ZipReader extends yauzl.RandomAccessReader {
  private ahead: { start: number; data: Buffer } | undefined;

  constructor(
    readonly fd: number,
    private readonly sync: boolean,
  ) {
    super();
  }

  override _readStreamForRange(start: number, end: number): Readable {
    // Not fs.createReadStream: destroying one closes its descriptor, whatever autoClose says.
    const fd = this.fd;
    let at = start;
    return new Readable({
      highWaterMark: 256 * 1024,
      read(size) {
        const want = Math.min(Math.max(size, 64 * 1024), end - at);
        if (want <= 0) return void this.push(null);
        const buf = Buffer.allocUnsafe(want);
        fs.read(fd, buf, 0, want, at, (err, n) => {
          if (err !== null) this.destroy(err);
          else if (n === 0) this.destroy(new Error('unexpected EOF'));
          else {
            at += n;
            this.push(buf.subarray(0, n));
          }
        });
      },
    });
  }

  override read(buffer: Buffer, offset: number, length: number, position: number, callback: (err: Error | null, bytesRead?: number) => void): void {
    const serve = (): boolean => {
      const a = this.ahead;
      if (a === undefined || position < a.start || position + length > a.start + a.data.length) return false;
      a.data.copy(buffer, offset, position - a.start, position - a.start + length);
      process.nextTick(callback, null, length);
      return true;
    };
    if (serve()) return;
    if (length > READ_AHEAD) {
      fs.read(this.fd, buffer, offset, length, position, (err, n) => callback(err, n));
      return;
    }
    const filled = (n: number, data: Buffer): void => {
      this.ahead = { start: position, data: data.subarray(0, n) };
      // Short of `length`: the archive ends first, which yauzl reports.
      if (!serve()) {
        const got = Math.max(0, Math.min(length, n));
        data.copy(buffer, offset, 0, got);
        process.nextTick(callback, null, got);
      }
    };
    const data = Buffer.allocUnsafe(READ_AHEAD);
    callsFor(this.sync)
      .read(this.fd, data, 0, READ_AHEAD, position)
      .then(
        (n) => filled(n, data),
        (err: Error) => callback(err),
      );
  }

  override close(callback: (err: Error | null) => void): void {
    fs.close(this.fd, callback);
  }
}

/**
 * The entry's name as stored (the Info-ZIP Unicode path where there is one). Strict, so that
 * backslashes reach the stager as they are: it refuses them, rather than staging `a\b` as `a/b`.
 */
function zipName(entry: yauzl.Entry): string {
  return yauzl.getFileNameLowLevel(entry.generalPurposeBitFlag, entry.fileNameRaw, entry.extraFields, true);
}

/** The Unix file type bits, where the archive was made on a Unix-like system. */
function zipFileType(entry: yauzl.Entry): number {
  const host = entry.versionMadeBy >> 8;
  if (host !== 3 && host !== 19) return 0; // 3: Unix, 19: macOS
  return (entry.externalFileAttributes >>> 16) & S_IFMT;
}

function zipMethod(method: number): string {
  const names: Partial<Record<number, string>> = { 9: 'deflate64', 12: 'bzip2', 14: 'LZMA', 93: 'zstd', 95: 'xz', 98: 'PPMd' };
  return names[method] ?? `method ${method}`;
}

/**
 * The entries of the zip archive `file`, opened when the iteration starts. `label` (the
 * archive's path, or the URL it was downloaded from) names the source in entries and errors.
 */
export async function* zipEntries(file: string, label: string, signal: AbortSignal): AsyncGenerator<IncomingEntry> {
  throwIfAborted(signal, label);
  const inbox = new Inbox<yauzl.Entry | 'end'>();
  let current: Readable | undefined;
  const fail = (error: unknown): void => {
    if (inbox.failed) return;
    inbox.fail(error);
    current?.destroy(error instanceof Error ? error : new Error(String(error)));
  };
  const onAbort = (): void => fail(canceledError(signal, label));
  signal.addEventListener('abort', onAbort, { once: true });

  let zip: yauzl.ZipFile | undefined;
  let opened: OpenedZip | undefined;
  try {
    const opening = openZip(file, label);
    // The open itself is not cancellable, but the wait for it is.
    opening.then((z) => (inbox.failed ? z.zip.close() : undefined), noop);
    opened = await inbox.until(opening);
    zip = opened.zip;
    zip.on('entry', (entry: yauzl.Entry) => inbox.push(entry));
    zip.on('end', () => inbox.push('end'));
    zip.on('error', (err: Error) => fail(sourceError(`${label} is not a readable zip archive: ${messageOf(err)}.`, label, err)));

    for (;;) {
      zip.readEntry();
      const entry = await inbox.take();
      if (entry === 'end') return;
      const name = zipName(entry);
      const source = `${label}#${name}`;
      const type = zipFileType(entry);
      if (type === 0o120000) {
        const target = await readAll(await openEntry(zip, entry, source), MAX_LINK_TARGET, source, inbox);
        yield { name, type: 'symlink', linkTarget: target.toString('utf8'), source };
      } else if (name.endsWith('/') || type === 0o040000) {
        yield { name: stripTrailingSlash(name), type: 'directory', source };
      } else if (type === 0 || type === 0o100000) {
        const content = (opened.local ? smallEntry(opened, entry, source) : undefined) ?? (await openEntry(zip, entry, source));
        current = content;
        yield { name, type: 'file', content, size: entry.uncompressedSize, source };
        await inbox.until(settledOf(content));
        current = undefined;
      } else {
        yield { name, type: 'other', what: ZIP_OTHER[type] ?? `file of Unix type 0o${type.toString(8)}`, source };
      }
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    inbox.fail(new Error('closed'));
    current?.destroy();
    // It closes the descriptor once its streams are done with it.
    zip?.close();
  }
}

/** Entries up to this size are read, inflated and checked in one piece. */
const SMALL_ENTRY = 1024 * 1024;

/**
 * A small entry's content read with synchronous calls, inflated at once and checked (its size and
 * CRC-32) before it is handed on; undefined for an entry that is not small or not plainly stored
 * or deflated, which goes through yauzl's stream. Thousands of small entries otherwise each wait
 * for several round trips to the thread pool, one after the other.
 */
function smallEntry(opened: OpenedZip, entry: yauzl.Entry, source: string): Readable | undefined {
  if (entry.compressedSize > SMALL_ENTRY || entry.uncompressedSize > SMALL_ENTRY || entry.isEncrypted() || !entry.canDecodeFileData()) return undefined;
  const corrupt = (detail: string, cause?: unknown): StagingError => sourceError(`${source} is corrupt: ${detail}.`, source, cause);
  const header = readAt(opened.fd, 30, entry.relativeOffsetOfLocalHeader, source);
  if (header.readUInt32LE(0) !== 0x04034b50) throw corrupt(`invalid local file header signature: 0x${header.readUInt32LE(0).toString(16)}`);
  const start = entry.relativeOffsetOfLocalHeader + 30 + header.readUInt16LE(26) + header.readUInt16LE(28);
  if (start + entry.compressedSize > opened.size) throw corrupt(`file data overflows file bounds: ${start} + ${entry.compressedSize} > ${opened.size}`);
  const stored = readAt(opened.fd, entry.compressedSize, start, source);
  let data: Buffer;
  if (entry.compressionMethod === 0) data = stored;
  else {
    try {
      // One byte more than it declares: a longer content is caught below, and no bomb is inflated past it.
      data = zlib.inflateRawSync(stored, { maxOutputLength: entry.uncompressedSize + 1 });
    } catch (err) {
      throw corrupt(errnoCode(err) === 'ERR_BUFFER_TOO_LARGE' ? `it is longer than the ${entry.uncompressedSize} bytes its entry declares` : messageOf(err), err);
    }
  }
  if (data.length !== entry.uncompressedSize) throw corrupt(`it holds ${data.length} bytes where its entry declares ${entry.uncompressedSize}`);
  if (typeof zlib.crc32 === 'function' && zlib.crc32(data) >>> 0 !== entry.crc32 >>> 0) {
    throw corrupt('its CRC-32 does not match; check that the archive is complete');
  }
  const content = new Readable({ read: noop });
  content.push(data);
  content.push(null);
  return content;
}

/** `length` bytes of the archive at `position`; a short read is a truncated archive. */
function readAt(fd: number, length: number, position: number, source: string): Buffer {
  const buf = Buffer.allocUnsafe(length);
  for (let got = 0; got < length; ) {
    let n: number;
    try {
      n = fs.readSync(fd, buf, got, length - got, position + got);
    } catch (err) {
      throw fsSourceError(err, source);
    }
    if (n === 0) throw sourceError(`${source} is corrupt: the archive ends inside it; check that the archive is complete.`, source);
    got += n;
  }
  return buf;
}

/** Opens one zip entry's content, checked against its CRC-32 as it is read. */
function openEntry(zip: yauzl.ZipFile, entry: yauzl.Entry, source: string): Promise<Readable> {
  if (entry.isEncrypted()) {
    return Promise.reject(sourceError(`${source} is encrypted; encrypted zip entries are not supported.`, source));
  }
  if (!entry.canDecodeFileData()) {
    return Promise.reject(
      sourceError(`${source} is compressed with ${zipMethod(entry.compressionMethod)}, which is not supported (only stored and deflate are); repack the archive.`, source),
    );
  }
  const deflated = entry.compressionMethod === 8;
  return new Promise((resolve, reject) => {
    zip.openReadStream(entry, deflated ? { decodeFileData: false } : {}, (err, stream) => {
      if (err) {
        reject(sourceError(`Cannot read ${source}: ${messageOf(err)}.`, source, err));
        return;
      }
      resolve(crcChecked(deflated ? inflated(stream, entry.uncompressedSize) : stream, entry.crc32, source));
    });
  });
}

/** Output chunks of a large entry's inflate: a few round trips to the thread pool per megabyte (yauzl's own asks for 16 KiB at a time). */
const INFLATE_CHUNK = 128 * 1024;

/**
 * A deflated entry's bytes as stored, inflated by Node's zlib, never past the size its entry
 * declares (a bomb stops there) and refused if it ends short of it. Errors reach the stream
 * returned, which `crcChecked` words as the archive's.
 */
function inflated(stored: Readable, size: number): Readable {
  let got = 0;
  const counted = new Transform({
    highWaterMark: 256 * 1024,
    transform(chunk: Buffer, _encoding, callback) {
      got += chunk.length;
      if (got > size) callback(new Error(`it is longer than the ${size} bytes its entry declares`));
      else callback(null, chunk);
    },
    flush(callback) {
      callback(got === size ? undefined : new Error(`it holds ${got} bytes where its entry declares ${size}`));
    },
  });
  pipeline(stored, zlib.createInflateRaw({ chunkSize: INFLATE_CHUNK }), counted, noop);
  return counted;
}

function crcChecked(src: Readable, expected: number, source: string): Readable {
  // zlib.crc32 arrived in Node 20.15; without it the sizes (checked by yauzl) still are.
  const crc32 = typeof zlib.crc32 === 'function' ? zlib.crc32 : undefined;
  let crc = 0;
  const out = new Transform({
    highWaterMark: 256 * 1024,
    transform(chunk: Buffer, _encoding, callback) {
      if (crc32) crc = crc32(chunk, crc);
      callback(null, chunk);
    },
    flush(callback) {
      if (crc32 && crc >>> 0 !== expected >>> 0) {
        callback(sourceError(`${source} is corrupt: its CRC-32 does not match; check that the archive is complete.`, source));
      } else callback();
    },
  });
  src.on('error', (err) => out.destroy(sourceError(`${source} is corrupt: ${messageOf(err)}.`, source, err)));
  out.on('close', () => src.destroy());
  src.pipe(out);
  return out;
}

async function readAll(stream: Readable, limit: number, source: string, inbox: Inbox<unknown>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  const done = new Promise<void>((resolve, reject) => {
    stream.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) stream.destroy(sourceError(`${source} is a symbolic link whose target is longer than ${limit} bytes.`, source));
      else chunks.push(chunk);
    });
    stream.once('end', resolve);
    stream.once('error', reject);
  });
  try {
    await inbox.until(done);
  } finally {
    stream.destroy();
  }
  return Buffer.concat(chunks);
}
