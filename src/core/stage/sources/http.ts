/**
 * Downloads as entry sources, with Node's own fetch: a plain file becomes one entry, a tar
 * archive is unpacked as it streams in, a zip is downloaded to a part file first (its directory
 * is at its end) and then read.
 */
import * as fs from 'fs';
import { Readable, Transform } from 'stream';
import { pipeline } from 'stream/promises';
import { StagingError, asStagingError, errnoCode } from '../../base/errors';
import type { IncomingEntry, SourceContext, SourceOpener } from '../types';
import { archiveKindOf, archiveKindOfContentType } from './archive';
import { tarEntries } from './archive/tar';
import { zipEntries } from './archive/zip';
import { canceledError, messageOf, sourceError, throwIfAborted } from './errors';

/** Its size is known only once the server answers (Content-Length), so progress counts it then. */
export const httpSource: SourceOpener = {
  name: 'an http(s) URL',
  matches: (spec) => /^https?:\/\//i.test(spec),
  open: httpEntries,
};

/** The entries a URL gives: one file, or an archive's entries. */
export async function* httpEntries(url: string, ctx: SourceContext): AsyncGenerator<IncomingEntry> {
  const { signal } = ctx;
  throwIfAborted(signal, url);
  const response = await request(url, signal);
  let body: Readable | undefined;
  try {
    const name = lastSegment(url);
    const finalName = lastSegment(response.url || url);
    // The extension decides; the Content-Type only for names that have none ("/download?id=5").
    const kind =
      archiveKindOf(name) ??
      archiveKindOf(finalName) ??
      (name.includes('.') ? undefined : archiveKindOfContentType(response.headers.get('content-type')));
    const size = declaredSize(response);
    body = bodyStream(response, url, signal, size, (n) => ctx.onDownloadBytes?.(n, size));

    if (kind === undefined) {
      yield { name: name === '' ? 'download' : name, type: 'file', content: body, size, source: url };
      // Nothing follows, but the body must still be read before the source is done.
      await settledOrAborted(body, signal, url);
      throwIfAborted(signal, url);
    } else if (kind === 'zip') {
      const part = ctx.partPath();
      await download(body, part, url, ctx, size);
      yield* zipEntries(part, url, signal);
    } else {
      const stream = body;
      yield* tarEntries(() => stream, kind, url, signal);
    }
  } finally {
    if (body) body.destroy();
    else await response.body?.cancel().catch(() => undefined);
  }
}

async function request(url: string, signal: AbortSignal): Promise<Response> {
  let response: Response;
  try {
    // identity: Content-Length is then the size of what arrives, and a .gz stays as it is.
    response = await fetch(url, { signal, redirect: 'follow', headers: { 'accept-encoding': 'identity' } });
  } catch (err) {
    throw fetchError(err, url, signal);
  }
  if (!response.ok) {
    await response.body?.cancel().catch(() => undefined);
    const status = `${response.status}${response.statusText ? ` ${response.statusText}` : ''}`;
    const hint =
      response.status === 404 || response.status === 410
        ? 'check the URL'
        : response.status === 401 || response.status === 403
          ? 'check that the file may be downloaded without credentials'
          : response.status >= 500
            ? 'that is a failure on the server side; try again later'
            : 'check the URL';
    throw sourceError(`Downloading ${url} failed: the server answered HTTP ${status}; ${hint}.`, url);
  }
  return response;
}

function fetchError(err: unknown, url: string, signal: AbortSignal): StagingError {
  if (err instanceof StagingError) return err;
  if (signal.aborted) return canceledError(signal, url);
  const cause = err instanceof Error ? err.cause : undefined;
  const causeMessage = cause instanceof Error ? messageOf(cause) : '';
  const code = errnoCode(cause);
  let detail: string;
  if (/redirect count exceeded/i.test(causeMessage)) {
    detail = 'too many redirects (more than 20): the server redirects in a loop; check the URL';
  } else if (code === 'ECONNREFUSED') {
    detail = `connection refused (${causeMessage}); check that the server is running and the port is right`;
  } else if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_NONAME') {
    detail = `the host name could not be resolved (${causeMessage}); check the URL and the network`;
  } else if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') {
    detail = `the connection was closed by the server (${causeMessage}); try again`;
  } else if (causeMessage === 'bad port') {
    detail = `fetch refuses port ${new URL(url).port}, which belongs to another protocol; use another port`;
  } else if (code === 'ETIMEDOUT' || code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT') {
    detail = `the server did not answer in time (${causeMessage}); try again`;
  } else {
    detail = causeMessage || messageOf(err);
  }
  return sourceError(`Cannot download ${url}: ${detail}.`, url, err);
}

/** Content-Length, where it is the size of the body as it arrives. */
function declaredSize(response: Response): number | undefined {
  const encoding = response.headers.get('content-encoding');
  if (encoding !== null && encoding.toLowerCase() !== 'identity') return undefined;
  const length = response.headers.get('content-length');
  if (length === null || !/^\d+$/.test(length.trim())) return undefined;
  const n = Number(length);
  return Number.isSafeInteger(n) ? n : undefined;
}

/** The URL's last path segment, decoded ('' when the path ends in '/'). */
function lastSegment(url: string): string {
  let pathname: string;
  try {
    pathname = new URL(url).pathname;
  } catch {
    return '';
  }
  const raw = pathname.slice(pathname.lastIndexOf('/') + 1);
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw; // a stray '%': keep it as it is
  }
}

/**
 * The body as a Node Readable that fails with an ESOURCE naming the URL when the download is cut
 * off (fewer bytes than Content-Length, a reset connection), and whose destroy frees the socket.
 * `onBytes` hears each chunk's size as it arrives.
 */
function bodyStream(response: Response, url: string, signal: AbortSignal, expected: number | undefined, onBytes: (n: number) => void): Readable {
  const reader = response.body?.getReader();
  let received = 0;
  const cutOff = (cause?: unknown): StagingError =>
    sourceError(
      `Downloading ${url} failed: the connection ended after ${received}${expected === undefined ? '' : ` of ${expected}`} bytes; try again.`,
      url,
      cause,
    );
  return new Readable({
    highWaterMark: 256 * 1024,
    read() {
      if (!reader) {
        this.push(null);
        return;
      }
      reader.read().then(
        (result) => {
          if (result.done) {
            if (expected !== undefined && received < expected) this.destroy(cutOff());
            else this.push(null);
            return;
          }
          // A byte stream's chunks are Uint8Arrays; the DOM-less typings leave them untyped.
          const v = result.value as Uint8Array;
          received += v.byteLength;
          onBytes(v.byteLength);
          this.push(Buffer.from(v.buffer, v.byteOffset, v.byteLength));
        },
        (err: unknown) => this.destroy(signal.aborted ? canceledError(signal, url) : cutOff(err)),
      );
    },
    destroy(err, callback) {
      reader?.cancel().catch(() => undefined);
      callback(err);
    },
  });
}

/** Waits until the consumer has read or dropped `body`; an abort ends the wait at once. */
async function settledOrAborted(body: Readable, signal: AbortSignal, url: string): Promise<void> {
  if (body.readableEnded || body.destroyed) return;
  await new Promise<void>((resolve, reject) => {
    const done = (): void => {
      body.off('end', done);
      body.off('close', done);
      signal.removeEventListener('abort', onAbort);
      resolve();
    };
    const onAbort = (): void => {
      done();
      reject(canceledError(signal, url));
    };
    body.on('end', done);
    body.on('close', done);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** Writes `body` to the part file `part`, within the context's byte allowance. */
async function download(body: Readable, part: string, url: string, ctx: SourceContext, size: number | undefined): Promise<void> {
  const tooBig = (): StagingError =>
    ctx.tooBig?.(url) ??
    new StagingError(
      'ETOOBIG',
      `${url} is larger than the ${ctx.maxBytes} bytes this staging may still write; raise the size limit if the file is expected to be this big.`,
      { path: url },
    );
  if (size !== undefined && size > ctx.maxBytes) throw tooBig();
  let written = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      written += chunk.length;
      if (written > ctx.maxBytes) {
        callback(tooBig());
        return;
      }
      ctx.onPartBytes(chunk.length, size); // what was just written, as the stager adds them up
      callback(null, chunk);
    },
  });
  try {
    await pipeline(body, counter, fs.createWriteStream(part, { flags: 'wx' }), { signal: ctx.signal });
  } catch (err) {
    if (ctx.signal.aborted) throw canceledError(ctx.signal, url);
    if (err instanceof StagingError) throw err;
    // The disk's fault, not the server's: say so (a full disk gets its hint).
    throw asStagingError(err, `write the download of ${url} to`, part);
  }
}
