/**
 * Where artifacts come in: a URL, a local directory, an archive or a plain file, each turned into
 * the entries it holds. Sources report what they find as it is (names, types, link targets); the
 * stager decides what may land in the area.
 */
import { constants, promises as fsp, type Stats } from 'fs';
import * as path from 'path';
import { fdPath } from '../anchored';
import { fileURLToPath } from 'url';
import { archiveFileEntries, archiveKindOf } from './archive';
import { changedSourceError, fsSourceError, messageOf, sourceError, throwIfAborted } from './sources/errors';
import { httpEntries } from './http';
import type { EntrySource, IncomingEntry, SourceContext } from './types';

/**
 * Opens one source: an `http://` or `https://` URL, a `file:` URL, or a local path (a directory,
 * a `.tar`, `.tar.gz`/`.tgz`, `.tar.xz`/`.txz` or `.zip` archive, or any other file). Nothing is
 * read until the iteration starts; stopping it early closes whatever was opened.
 */
export function openSource(spec: string, ctx: SourceContext): EntrySource {
  if (/^https?:\/\//i.test(spec)) return httpEntries(spec, ctx);
  if (/^file:/i.test(spec)) {
    let file: string;
    try {
      file = fileURLToPath(spec);
    } catch (err) {
      return failing(sourceError(`The staging source ${spec} is not a usable file URL: ${messageOf(err)}.`, spec, err));
    }
    return localEntries(file, ctx.signal);
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(spec)) {
    const scheme = spec.slice(0, spec.indexOf(':'));
    return failing(sourceError(`The staging source ${spec} uses the scheme ${scheme}:, which is not supported; use http(s) or a local path.`, spec));
  }
  if (spec === '') return failing(sourceError('A staging source is empty; give a path or a URL.', spec));
  return localEntries(spec, ctx.signal);
}

async function* failing(error: Error): AsyncGenerator<IncomingEntry> {
  throw error;
}

async function* localEntries(spec: string, signal: AbortSignal): AsyncGenerator<IncomingEntry> {
  const shown = path.resolve(spec);
  throwIfAborted(signal, shown);
  let st: Stats;
  let real: string;
  try {
    // The source itself may be a symbolic link (a "latest" link to a build); nothing in it is followed.
    st = await fsp.stat(shown);
    real = await fsp.realpath(shown);
  } catch (err) {
    throw fsSourceError(err, shown);
  }
  if (st.isDirectory()) {
    const root = await openDir(real, st, shown, shown);
    try {
      yield* walk(root, real, '', shown, signal);
    } finally {
      await root.close().catch(() => undefined);
    }
    return;
  }
  if (!st.isFile()) {
    throw sourceError(`The staging source ${shown} is a ${kindOf(st)}, not a file or a directory.`, shown);
  }
  const kind = archiveKindOf(path.basename(shown));
  if (kind !== undefined) {
    yield* archiveFileEntries(real, kind, signal, shown);
    return;
  }
  yield { name: path.basename(shown), type: 'file', localPath: real, size: st.size, localStat: identityOf(st), source: shown };
}


/**
 * Opens the directory `dir` that was seen as `seen`, without following a link in its place, and
 * checks it is the one seen: the source's owner may have exchanged it for a link to another
 * directory since, and the walk must not list what the link leads to.
 */
async function openDir(dir: string, seen: Stats, shown: string, shownRoot: string): Promise<fsp.FileHandle> {
  let handle: fsp.FileHandle;
  try {
    handle = await fsp.open(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ELOOP' || code === 'ENOTDIR') throw changedSourceError(shown);
    throw fsSourceError(err, shown, shownRoot);
  }
  const st = await handle.stat().catch(async (err: unknown) => {
    await handle.close().catch(() => undefined);
    throw fsSourceError(err, shown, shownRoot);
  });
  if (st.dev !== seen.dev || st.ino !== seen.ino || !st.isDirectory()) {
    await handle.close().catch(() => undefined);
    throw changedSourceError(shown);
  }
  return handle;
}

/**
 * Walks a directory depth first in a stable order (names sorted by code unit), each directory
 * before what it holds. Symbolic links are reported, never followed: each directory is listed
 * through its open handle, so a directory exchanged for a link after it was seen is never entered.
 * Files are named by path, and the stager checks that the file it opens is the one seen here.
 */
async function* walk(handle: fsp.FileHandle, realDir: string, rel: string, shownRoot: string, signal: AbortSignal): AsyncGenerator<IncomingEntry> {
  const here = fdPath(handle.fd) ?? realDir;
  const shownDir = rel === '' ? shownRoot : path.join(shownRoot, rel);
  let names: string[];
  try {
    names = await fsp.readdir(here);
  } catch (err) {
    throw fsSourceError(err, shownDir, shownRoot);
  }
  names.sort();
  for (const base of names) {
    throwIfAborted(signal, shownRoot);
    const name = rel === '' ? base : `${rel}/${base}`;
    const inHere = path.join(here, base);
    const source = path.join(shownDir, base);
    let st: Stats;
    try {
      st = await fsp.lstat(inHere);
    } catch (err) {
      throw fsSourceError(err, source, shownRoot);
    }
    if (st.isDirectory()) {
      yield { name, type: 'directory', source };
      const sub = await openDir(inHere, st, source, shownRoot);
      try {
        yield* walk(sub, path.join(realDir, base), name, shownRoot, signal);
      } finally {
        await sub.close().catch(() => undefined);
      }
    } else if (st.isFile()) {
      yield { name, type: 'file', localPath: path.join(realDir, base), size: st.size, localStat: identityOf(st), source };
    } else if (st.isSymbolicLink()) {
      let linkTarget: string;
      try {
        linkTarget = await fsp.readlink(inHere);
      } catch (err) {
        // No longer a link: exchanged since it was seen.
        if ((err as NodeJS.ErrnoException).code === 'EINVAL') throw changedSourceError(source);
        throw fsSourceError(err, source, shownRoot);
      }
      yield { name, type: 'symlink', linkTarget, source };
    } else {
      yield { name, type: 'other', what: kindOf(st), source };
    }
  }
}

function kindOf(st: Stats): string {
  if (st.isFIFO()) return 'FIFO (named pipe)';
  if (st.isSocket()) return 'socket';
  if (st.isCharacterDevice()) return 'character device';
  if (st.isBlockDevice()) return 'block device';
  if (st.isSymbolicLink()) return 'symbolic link';
  return 'special file';
}

/** What a local file was when the source looked at it: the stager checks it did not change since. */
function identityOf(st: { dev: number; ino: number; size: number; mtimeMs: number }): { dev: number; ino: number; size: number; mtimeMs: number } {
  return { dev: st.dev, ino: st.ino, size: st.size, mtimeMs: st.mtimeMs };
}
