/**
 * Decompressing xz for the tar reader: with the system's xz in a process of its own where there
 * is one, else with the built-in WebAssembly decoder, and the errors of both said alike.
 */
import { spawn } from 'child_process';
import * as fs from 'fs';
import { PassThrough, Readable } from 'stream';
import { XzReadableStream } from 'xz-decompress';
import { StagingError, errnoCode } from '../../../base/errors';
import { fsSourceError, messageOf, sourceError } from '../errors';
import { noop } from './reading';

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
export function xzDecompress(raw: Readable, label: string): Readable {
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
