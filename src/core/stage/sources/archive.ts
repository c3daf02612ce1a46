/**
 * Archives as entry sources: tar (plain, gzip, xz) streamed from a file or a download, and zip
 * read from a file. Entries are reported as the archive states them (raw names, true types, link
 * targets); the stager decides what may land.
 */
import * as fs from 'fs';
import { Readable, Transform } from 'stream';
import * as zlib from 'zlib';
import { Parser, type ReadEntry } from 'tar';
import * as yauzl from 'yauzl';
import { XzReadableStream } from 'xz-decompress';
import { StagingError, errnoCode } from '../../errors';
import type { IncomingEntry } from '../types';
import { canceledError, fsSourceError, messageOf, sourceError, throwIfAborted } from './errors';

export type ArchiveKind = 'tar' | 'tar.gz' | 'tar.xz' | 'zip';

const EXTENSIONS: readonly (readonly [string, ArchiveKind])[] = [
  ['.tar', 'tar'],
  ['.tar.gz', 'tar.gz'],
  ['.tgz', 'tar.gz'],
  ['.tar.xz', 'tar.xz'],
  ['.txz', 'tar.xz'],
  ['.zip', 'zip'],
];

/** The archive kind a file name's extension announces, if any (case-insensitive). */
export function archiveKindOf(name: string): ArchiveKind | undefined {
  const lower = name.toLowerCase();
  for (const [ext, kind] of EXTENSIONS) {
    if (lower.endsWith(ext) && lower.length > ext.length) return kind;
  }
  return undefined;
}

/** The archive kind a Content-Type announces, if it names one unambiguously. */
export function archiveKindOfContentType(contentType: string | null): ArchiveKind | undefined {
  const type = (contentType ?? '').split(';')[0].trim().toLowerCase();
  switch (type) {
    case 'application/x-tar':
    case 'application/x-gtar':
      return 'tar';
    case 'application/gzip':
    case 'application/x-gzip':
    case 'application/x-compressed-tar':
    case 'application/x-tgz':
      return 'tar.gz';
    case 'application/x-xz':
    case 'application/x-xz-compressed-tar':
      return 'tar.xz';
    case 'application/zip':
    case 'application/x-zip-compressed':
      return 'zip';
    default:
      return undefined;
  }
}

/**
 * Hands events from stream callbacks to an async generator, which waits for one at a time.
 * A failure (a broken archive, an abort) wakes the generator at once and wins over queued items.
 */
class Inbox<T> {
  private readonly items: T[] = [];
  private failure: { error: unknown } | undefined;
  private wake: (() => void) | undefined;

  get failed(): boolean {
    return this.failure !== undefined;
  }

  push(item: T): void {
    this.items.push(item);
    this.wake?.();
  }

  fail(error: unknown): void {
    this.failure ??= { error };
    this.wake?.();
  }

  async take(): Promise<T> {
    for (;;) {
      if (this.failure) throw this.failure.error;
      if (this.items.length > 0) return this.items.shift()!;
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = undefined;
    }
  }

  /** Waits for `pending`, or throws the failure as soon as there is one. */
  async until<R>(pending: Promise<R>): Promise<R> {
    let outcome: { value: R } | { error: unknown } | undefined;
    pending.then(
      (value) => {
        outcome = { value };
        this.wake?.();
      },
      (error: unknown) => {
        outcome = { error };
        this.wake?.();
      },
    );
    for (;;) {
      if (this.failure) throw this.failure.error;
      if (outcome) {
        if ('error' in outcome) throw outcome.error;
        return outcome.value;
      }
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = undefined;
    }
  }
}

/** Resolves once `stream` has ended or was destroyed, however that happened. */
function settledOf(stream: Readable): Promise<void> {
  if (stream.readableEnded || stream.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      stream.off('end', done);
      stream.off('close', done);
      resolve();
    };
    stream.on('end', done);
    stream.on('close', done);
  });
}

const noop = (): void => undefined;

// ---------------------------------------------------------------------------------------------
// tar

type TarItem = { entry: ReadEntry; ignored: boolean } | 'end';

const TAR_OTHER: Partial<Record<string, string>> = {
  CharacterDevice: 'character device',
  BlockDevice: 'block device',
  FIFO: 'FIFO (named pipe)',
  SparseFile: 'GNU sparse file (not supported)',
  ContinuationFile: 'multi-volume continuation (not supported)',
};

/**
 * The entries of a tar archive (plain, gzip or xz) read from `open()`, which is called when the
 * iteration starts. `label` (the archive's path or URL) names the source in entries and errors.
 * A file entry's content must be read to its end (or destroyed, which skips the rest of it)
 * before the next entry is produced: a tar archive can only be read in order.
 */
export async function* tarEntries(open: () => Readable, kind: 'tar' | 'tar.gz' | 'tar.xz', label: string, signal: AbortSignal): AsyncGenerator<IncomingEntry> {
  throwIfAborted(signal, label);
  const inbox = new Inbox<TarItem>();
  let current: Readable | undefined;
  let entries = 0;
  let sawEof = false;
  /** Whether the last thing read was a zero block (the end-of-archive marker is two of them). */
  let endMarker = false;
  let parserEnded = false;

  const fail = (error: unknown): void => {
    if (inbox.failed) return;
    inbox.fail(error);
    current?.destroy(error instanceof Error ? error : new Error(String(error)));
  };
  const broken = (detail: string, cause?: unknown): StagingError =>
    sourceError(`${label} is not a readable ${kind} archive: ${detail}. Check that the file is complete and of that kind.`, label, cause);

  // Not strict: its warnings are errors here all the same, but an empty archive is legal.
  // No ratio limit: gzip cannot pass about 1032:1, which only blank disk images come near, and
  // the stager's byte limit is what stops a bomb. Memory stays bounded by the input chunk size.
  const parser = new Parser({ strict: false, brotli: false, zstd: false, maxDecompressionRatio: Infinity });
  parser.on('entry', (entry: ReadEntry) => {
    entries++;
    endMarker = false;
    inbox.push({ entry, ignored: false });
  });
  parser.on('ignoredEntry', (entry: ReadEntry) => {
    endMarker = false;
    inbox.push({ entry, ignored: true });
  });
  parser.on('nullBlock', () => (endMarker = true));
  parser.on('eof', () => (sawEof = endMarker = true));
  parser.on('warn', (code: string, message: string, data: { cause?: unknown }) => {
    if (code === 'TAR_BAD_ARCHIVE' && sawEof && entries === 0) return; // nothing but the end marker
    const detail =
      code === 'TAR_ENTRY_INVALID' && entries === 0
        ? `it does not start with a tar header (${message}): it is not a tar archive, or not compressed as its name says`
        : message;
    fail(broken(detail, data));
  });
  parser.on('error', (err: Error) => fail(broken(messageOf(err).replace(/^TAR_\w+: /, ''), err)));
  parser.on('end', () => {
    parserEnded = true;
    // Without the zero blocks that end every archive, it was cut off between two entries.
    if (!endMarker) fail(broken('it ends without the end-of-archive marker, so it is truncated'));
    inbox.push('end');
  });

  const onAbort = (): void => fail(canceledError(signal, label));
  signal.addEventListener('abort', onAbort, { once: true });

  let input: Readable | undefined;
  try {
    const raw = open();
    input = kind === 'tar.xz' ? xzDecompress(raw, label) : raw;
    // The parser throws on some malformed input; thrown from a stream callback, that would be
    // an uncaught exception.
    input.on('data', (chunk: Buffer) => {
      try {
        if (!parser.write(chunk)) input!.pause();
      } catch (err) {
        fail(broken(messageOf(err), err));
      }
    });
    parser.on('drain', () => {
      if (!inbox.failed) input!.resume();
    });
    input.once('end', () => {
      try {
        parser.end();
      } catch (err) {
        fail(broken(messageOf(err), err));
      }
    });
    input.once('error', (err) => fail(err instanceof StagingError ? err : errnoCode(err) ? fsSourceError(err, label) : broken(messageOf(err), err)));

    for (;;) {
      const item = await inbox.take();
      if (item === 'end') return;
      const { entry, ignored } = item;
      const source = `${label}#${entry.path}`;
      if (ignored) {
        if (entry.meta) {
          throw broken(`a ${entry.type} header of ${entry.size} bytes is larger than this reader accepts`);
        }
        if (entry.type === 'TapeVolumeHeader') continue; // a volume label, not a file
        yield { name: entry.path, type: 'other', what: TAR_OTHER[entry.type] ?? `tar entry of unsupported type ${entry.type}`, source };
        continue;
      }
      switch (entry.type) {
        case 'File':
        case 'OldFile':
        case 'ContiguousFile': {
          const content = tarContent(entry);
          current = content;
          yield { name: entry.path, type: 'file', content, size: entry.size, source };
          await inbox.until(settledOf(content));
          current = undefined;
          break;
        }
        case 'Directory':
        case 'GNUDumpDir':
          entry.resume();
          yield { name: stripTrailingSlash(entry.path), type: 'directory', source };
          break;
        case 'SymbolicLink':
          entry.resume();
          yield { name: entry.path, type: 'symlink', linkTarget: entry.linkpath ?? '', source };
          break;
        case 'Link':
          entry.resume();
          yield { name: entry.path, type: 'hardlink', linkTarget: entry.linkpath ?? '', source };
          break;
        default:
          entry.resume();
          yield { name: entry.path, type: 'other', what: TAR_OTHER[entry.type] ?? `tar entry of type ${entry.type}`, source };
      }
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    current?.destroy();
    input?.destroy();
    if (!parserEnded) {
      inbox.fail(new Error('closed')); // later parser events must not reach anything
      parser.abort(new Error('the archive was closed before its end'));
    }
  }
}

/**
 * A real Node Readable over one tar entry, reading from the archive only as fast as it is read.
 * Destroying it skips the rest of the entry, so the archive can go on to the next one.
 */
function tarContent(entry: ReadEntry): Readable {
  const onData = (chunk: Buffer): void => {
    if (!out.push(chunk)) entry.pause();
  };
  const out = new Readable({
    highWaterMark: 256 * 1024,
    read() {
      entry.resume();
    },
    destroy(err, callback) {
      if (!entry.emittedEnd) {
        entry.off('data', onData);
        entry.resume(); // with no listener left, the rest is discarded
      }
      callback(err);
    },
  });
  entry.once('end', () => out.push(null));
  entry.on('data', onData);
  return out;
}

function stripTrailingSlash(name: string): string {
  // A trailing '/' is how tar and zip mark a directory, not part of its name.
  return name.length > 1 && name.endsWith('/') ? name.slice(0, -1) : name;
}

// ---------------------------------------------------------------------------------------------
// xz

/**
 * Decompresses an xz stream with xz-embedded compiled to WebAssembly (no native code, so it
 * bundles). That decoder serves one stream at a time per process and must always be finished,
 * failed or cancelled, or later xz archives would wait for ever: `destroy` sees to it.
 */
function xzDecompress(raw: Readable, label: string): Readable {
  const chunks = raw[Symbol.asyncIterator]();
  let inputController: ReadableStreamDefaultController<Uint8Array> | undefined;
  let inputPulled = false;
  let inputClosed = false;
  const compressed = new ReadableStream<Uint8Array>(
    {
      start(controller) {
        inputController = controller;
      },
      async pull(controller) {
        // The decoder pulls only once its start (which takes a process-wide lock) is done.
        inputPulled = true;
        const next = await chunks.next();
        if (next.done) {
          inputClosed = true;
          controller.close();
        } else {
          const chunk = next.value as Buffer;
          controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
        }
      },
      cancel() {
        raw.destroy();
      },
    },
    { highWaterMark: 0 },
  );
  const xz = new XzReadableStream(compressed);
  const reader = xz.getReader();
  let finished = false;

  return new Readable({
    highWaterMark: 256 * 1024,
    read() {
      reader.read().then(
        (result) => {
          if (result.done) {
            finished = true;
            this.push(null);
          } else {
            const v = result.value;
            this.push(Buffer.from(v.buffer, v.byteOffset, v.byteLength));
          }
        },
        (err: unknown) => {
          finished = true;
          this.destroy(xzError(err, label));
        },
      );
    },
    destroy(err, callback) {
      if (!finished) {
        finished = true;
        raw.destroy();
        // A failed input makes the decoder's pending or next pull fail, which releases it.
        if (!inputClosed) {
          try {
            inputController?.error(new Error('closed'));
          } catch {
            // already errored
          }
        }
        // Once it has pulled, its start is over and cancelling releases it too.
        if (inputPulled) reader.cancel().catch(noop);
      }
      callback(err);
    },
  });
}

function xzError(err: unknown, label: string): StagingError {
  if (err instanceof StagingError) return err;
  if (errnoCode(err)) return fsSourceError(err, label);
  const message = messageOf(err);
  const code = /error code (\d+)/.exec(message)?.[1];
  const detail =
    code === '5'
      ? 'it is not in the xz format'
      : code === '6'
        ? 'it uses an xz option the built-in decoder does not support (a SHA-256 integrity check or a BCJ filter); recompress it with plain `xz` (CRC64, LZMA2)'
        : code === '7'
          ? 'the xz data is corrupt'
          : code === '8' || /byteLength/.test(message)
            ? 'the xz data ends too early (the file is truncated)'
            : code === '3' || code === '4'
              ? 'it needs more memory than the xz decoder may use'
              : message;
  return sourceError(`${label} is not a readable tar.xz archive: ${detail}.`, label, err);
}

// ---------------------------------------------------------------------------------------------
// zip

const S_IFMT = 0o170000;
const ZIP_OTHER: Partial<Record<number, string>> = {
  0o020000: 'character device',
  0o060000: 'block device',
  0o010000: 'FIFO (named pipe)',
  0o140000: 'socket',
};
/** A symlink's target is its content: more than this is not a path. */
const MAX_LINK_TARGET = 64 * 1024;

function openZip(file: string, label: string): Promise<yauzl.ZipFile> {
  return new Promise((resolve, reject) => {
    // decodeStrings: false keeps yauzl from refusing unsafe names itself: they are reported as
    // they are, and the stager refuses them with its own message.
    yauzl.open(file, { lazyEntries: true, autoClose: false, decodeStrings: false, validateEntrySizes: true }, (err, zip) => {
      if (err) {
        reject(errnoCode(err) ? fsSourceError(err, label) : sourceError(`${label} is not a readable zip archive: ${messageOf(err)}.`, label, err));
      } else resolve(zip);
    });
  });
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
  try {
    const opening = openZip(file, label);
    // The open itself is not cancellable, but the wait for it is.
    opening.then((z) => (inbox.failed ? z.close() : undefined), noop);
    zip = await inbox.until(opening);
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
        const content = await openEntry(zip, entry, source);
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
    zip?.close();
  }
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
  return new Promise((resolve, reject) => {
    zip.openReadStream(entry, (err, stream) => {
      if (err) {
        reject(sourceError(`Cannot read ${source}: ${messageOf(err)}.`, source, err));
        return;
      }
      resolve(crcChecked(stream, entry.crc32, source));
    });
  });
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

// ---------------------------------------------------------------------------------------------

/** The entries of the archive file `file` of kind `kind`, named `label` in entries and errors. */
export function archiveFileEntries(file: string, kind: ArchiveKind, signal: AbortSignal, label = file): AsyncGenerator<IncomingEntry> {
  if (kind === 'zip') return zipEntries(file, label, signal);
  // 64 KiB chunks: gzip inflates each at once, up to about 1000 times its size, into memory.
  return tarEntries(() => fs.createReadStream(file, { highWaterMark: 64 * 1024 }), kind, label, signal);
}
