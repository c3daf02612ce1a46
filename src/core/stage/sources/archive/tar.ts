/**
 * Tar archives (plain, gzip, xz) as entries, streamed in order from a file or a download: the
 * parser's events turned into entries, each file's content read only as fast as it is consumed,
 * and gzip inflated off this thread.
 */
import { PassThrough, Readable } from 'stream';
import * as zlib from 'zlib';
import { Parser, type ReadEntry } from 'tar';
import { StagingError, errnoCode } from '../../../base/errors';
import type { IncomingEntry } from '../../types';
import { canceledError, fsSourceError, messageOf, sourceError, throwIfAborted } from '../errors';
import { Inbox, settledOf, stripTrailingSlash } from './reading';
import { xzDecompress } from './xz';

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
