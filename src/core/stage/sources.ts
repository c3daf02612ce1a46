/**
 * Where artifacts come in: a URL, a local directory, an archive or a plain file, each turned into
 * the entries it holds. Sources report what they find as it is (names, types, link targets); the
 * stager decides what may land in the area.
 */
import { promises as fsp, type Stats } from 'fs';
import * as path from 'path';
import { fileURLToPath } from 'url';
import { archiveFileEntries, archiveKindOf, fsSourceError, messageOf, sourceError, throwIfAborted } from './archive';
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
    yield* walk(real, '', shown, signal);
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
 * Walks a directory depth first in a stable order (names sorted by code unit), each directory
 * before what it holds. Symbolic links are reported, never followed.
 */
async function* walk(realRoot: string, rel: string, shownRoot: string, signal: AbortSignal): AsyncGenerator<IncomingEntry> {
  const dir = rel === '' ? realRoot : path.join(realRoot, rel);
  const shownDir = rel === '' ? shownRoot : path.join(shownRoot, rel);
  let names: string[];
  try {
    names = await fsp.readdir(dir);
  } catch (err) {
    throw fsSourceError(err, shownDir, shownRoot);
  }
  names.sort();
  for (const base of names) {
    throwIfAborted(signal, shownRoot);
    const name = rel === '' ? base : `${rel}/${base}`;
    const file = path.join(dir, base);
    const source = path.join(shownDir, base);
    let st: Stats;
    try {
      st = await fsp.lstat(file);
    } catch (err) {
      throw fsSourceError(err, source, shownRoot);
    }
    if (st.isDirectory()) {
      yield { name, type: 'directory', source };
      yield* walk(realRoot, name, shownRoot, signal);
    } else if (st.isFile()) {
      yield { name, type: 'file', localPath: file, size: st.size, localStat: identityOf(st), source };
    } else if (st.isSymbolicLink()) {
      let linkTarget: string;
      try {
        linkTarget = await fsp.readlink(file);
      } catch (err) {
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
