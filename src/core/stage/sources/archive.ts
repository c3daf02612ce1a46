/**
 * Archives as entry sources: tar (plain, gzip, xz) streamed from a file or a download, and zip
 * read from a file. Entries are reported as the archive states them (raw names, true types, link
 * targets); the stager decides what may land.
 */
import { spawn } from 'child_process';
import * as fs from 'fs';
import { PassThrough, Readable, Transform } from 'stream';
import * as zlib from 'zlib';
import { Parser, type ReadEntry } from 'tar';
import * as yauzl from 'yauzl';
import { XzReadableStream } from 'xz-decompress';
import { StagingError, errnoCode } from '../../base/errors';
import { ioFor } from '../../fs/io';
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
    input = kind === 'tar.xz' ? xzDecompress(raw, label) : kind === 'tar.gz' ? gunzipIfGzip(raw) : raw;
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

/** Output chunks of Node's gunzip: a few round trips to the thread pool per megabyte, not dozens. */
const GUNZIP_CHUNK = 128 * 1024;

/**
 * `raw`, gunzipped by Node's zlib if it starts as gzip does, else as it is (the parser takes a
 * plain tar as before). Node's zlib streams inflate in the thread pool, on another core, while
 * this thread parses, hashes and writes what came before; the tar parser's own gunzip inflates on
 * this thread, between them.
 */
function gunzipIfGzip(raw: Readable): Readable {
  const out = new PassThrough({ highWaterMark: 256 * 1024 });
  let gunzip: zlib.Gunzip | undefined;
  const onReadable = (): void => {
    const head = raw.read() as Buffer | null;
    if (head === null) return;
    raw.off('readable', onReadable);
    raw.off('end', onEnd);
    raw.unshift(head);
    if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) {
      gunzip = zlib.createGunzip({ chunkSize: GUNZIP_CHUNK });
      // zlib's errors carry codes (Z_DATA_ERROR) that are not the filesystem's: the archive is broken.
      gunzip.once('error', (err) => out.destroy(new Error(err.message)));
      raw.pipe(gunzip).pipe(out);
    } else raw.pipe(out);
  };
  const onEnd = (): void => {
    out.end();
  };
  raw.on('readable', onReadable);
  raw.once('end', onEnd);
  raw.once('error', (err) => out.destroy(err));
  out.once('close', () => {
    raw.destroy();
    gunzip?.destroy();
  });
  return out;
}

function stripTrailingSlash(name: string): string {
  // A trailing '/' is how tar and zip mark a directory, not part of its name.
  return name.length > 1 && name.endsWith('/') ? name.slice(0, -1) : name;
}

// ---------------------------------------------------------------------------------------------
// xz

/**
 * Where the system's xz is, if it has one: the decoder `tar -xJf` itself runs, native and about
 * twice as fast as the built-in one; it runs in a process of its own, on another core, while this
 * thread parses, hashes and writes. Looked for only where the system keeps it (not on PATH, which
 * a caller's environment sets). DEVSERVER_STAGING_BUILTIN_XZ=1 keeps to the built-in decoder.
 */
function systemXz(): string | undefined {
  if (process.env.DEVSERVER_STAGING_BUILTIN_XZ === '1') return undefined;
  if (foundXz === undefined) {
    foundXz = '';
    for (const candidate of ['/usr/bin/xz', '/bin/xz', '/usr/local/bin/xz']) {
      try {
        fs.accessSync(candidate, fs.constants.X_OK);
        foundXz = candidate;
        break;
      } catch {
        // not there
      }
    }
  }
  return foundXz === '' ? undefined : foundXz;
}
let foundXz: string | undefined;

/** What the system's xz may use to decompress: every preset needs at most 65 MiB; a crafted header is not given gigabytes. */
const XZ_MEMLIMIT = '256MiB';

/** An xz stream, decompressed by the system's xz if there is one, else by the built-in decoder. */
function xzDecompress(raw: Readable, label: string): Readable {
  const xz = systemXz();
  return xz !== undefined ? xzProcess(xz, raw, label) : xzBuiltin(raw, label);
}

/**
 * `raw` through the system's xz: its output ends only once xz has exited with success, having
 * checked the stream's integrity to its end; anything else fails the output, saying why. An xz
 * that cannot be started (removed or replaced since it was found) leaves `raw` unread, and the
 * built-in decoder reads it instead.
 */
function xzProcess(bin: string, raw: Readable, label: string): Readable {
  const child = spawn(bin, ['--decompress', '--stdout', '--quiet', `--memlimit-decompress=${XZ_MEMLIMIT}`], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, LC_ALL: 'C' },
  });
  const out = new PassThrough({ highWaterMark: 256 * 1024 });
  let said = '';
  let started = false;
  let instead: Readable | undefined;
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (text: string) => {
    if (said.length < 4096) said += text;
  });
  // xz stops reading when it finds an error: what is still written to it then fails, and is not the news.
  child.stdin.on('error', noop);
  raw.once('error', (err) => out.destroy(err));
  // Not a byte is read before xz runs, so that the built-in decoder can have the whole stream.
  child.once('spawn', () => {
    started = true;
    raw.pipe(child.stdin);
  });
  child.stdout.pipe(out, { end: false });
  child.once('error', (err) => {
    if (started || out.destroyed) {
      out.destroy(fsSourceError(err, label));
      return;
    }
    foundXz = '';
    instead = xzBuiltin(raw, label);
    instead.once('error', (e) => out.destroy(e));
    instead.pipe(out);
  });
  child.once('close', (code, signal) => {
    if (out.destroyed || instead !== undefined) return;
    if (code === 0) out.end();
    else out.destroy(xzError(new Error(said.trim() !== '' ? said.trim() : `xz ended with ${signal ?? `exit code ${code}`}`), label));
  });
  out.once('close', () => {
    raw.destroy();
    instead?.destroy();
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return out;
}

/**
 * Decompresses an xz stream with xz-embedded compiled to WebAssembly (no native code, so it
 * bundles). That decoder serves one stream at a time per process and must always be finished,
 * failed or cancelled, or later xz archives would wait for ever: `destroy` sees to it.
 */
function xzBuiltin(raw: Readable, label: string): Readable {
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
  // The built-in decoder's error codes, and the system xz's messages (in the C locale).
  const detail =
    code === '5' || /File format not recognized/.test(message)
      ? 'it is not in the xz format'
      : code === '6'
        ? 'it uses an xz option the built-in decoder does not support (a SHA-256 integrity check or a BCJ filter); recompress it with plain `xz` (CRC64, LZMA2)'
        : /Unsupported/.test(message)
          ? `it uses an xz option this system's xz does not support (${message.replace(/^.*?: /, '')})`
          : code === '7' || /corrupt/i.test(message)
            ? 'the xz data is corrupt'
            : code === '8' || /byteLength|Unexpected end of input/.test(message)
              ? 'the xz data ends too early (the file is truncated)'
              : code === '3' || code === '4' || /Memory usage limit/.test(message)
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
    if (this.sync) {
      let n: number;
      try {
        n = fs.readSync(this.fd, data, 0, READ_AHEAD, position);
      } catch (err) {
        process.nextTick(callback, err);
        return;
      }
      filled(n, data);
    } else {
      fs.read(this.fd, data, 0, READ_AHEAD, position, (err, n) => (err !== null ? callback(err) : filled(n, data)));
    }
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
