/**
 * Local paths as sources: a directory (its contents, walked without following links), an archive
 * (`.tar`, `.tar.gz`/`.tgz`, `.tar.xz`/`.txz`, `.zip`: unpacked) or any other file (one entry).
 * The path itself may be a link (a `latest` link to a build), which is followed.
 */
import { constants, promises as fsp, type Stats } from 'fs';
import * as path from 'path';
import { fdPath } from '../../fs/anchored';
import { callsFor } from '../../fs/calls';
import { ioFor, ioForTreeBelow } from '../../fs/io';
import type { IncomingEntry, MeasureTree, SourceOpener } from '../types';
import { archiveFileEntries, archiveKindOf } from './archive';
import { changedSourceError, fsSourceError, sourceError, throwIfAborted } from './errors';

/** Any spec that does not name a URL scheme (`scheme://`) is a local path. */
const URL_LIKE = /^[a-z][a-z0-9+.-]*:\/\//i;

export const localSource: SourceOpener = {
  name: 'a local path',
  matches: (spec) => spec !== '' && !URL_LIKE.test(spec),
  open: (spec, ctx) => localEntries(spec, ctx.signal),
  size: localSize,
  artifacts: localArtifacts,
};


export async function* localEntries(spec: string, signal: AbortSignal): AsyncGenerator<IncomingEntry> {
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
    // On a local filesystem a synchronous lstat takes microseconds where a round trip through
    // the thread pool takes tens, and the walk is then most of a staging's main thread.
    const sync = ioForTreeBelow(await ioFor(real, st.dev), real).sync;
    const root = await openDir(real, st, shown, shown, sync);
    try {
      yield* walk(root, real, '', shown, signal, sync);
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


/** A directory of the source, opened: listed and looked into through `fd`. */
interface OpenedDir {
  fd: number;
  close(): Promise<void>;
}

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/**
 * Opens the directory `dir` that was seen as `seen`, without following a link in its place, and
 * checks it is the one seen: the source's owner may have exchanged it for a link to another
 * directory since, and the walk must not list what the link leads to. With synchronous calls on
 * a local filesystem (`sync`): a build's hundreds of directories would otherwise each wait for
 * three round trips to the thread pool.
 */
async function openDir(dir: string, seen: Stats, shown: string, shownRoot: string, sync: boolean): Promise<OpenedDir> {
  const opening = (err: unknown): Error => {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ELOOP' || code === 'ENOTDIR' ? changedSourceError(shown) : fsSourceError(err, shown, shownRoot);
  };
  const calls = callsFor(sync);
  let fd: number;
  try {
    fd = await calls.open(dir, DIR_FLAGS);
  } catch (err) {
    throw opening(err);
  }
  const close = (): Promise<void> => calls.close(fd);
  let st: Stats;
  try {
    st = await calls.fstat(fd);
  } catch (err) {
    await close().catch(() => undefined);
    throw fsSourceError(err, shown, shownRoot);
  }
  if (st.dev !== seen.dev || st.ino !== seen.ino || !st.isDirectory()) {
    await close().catch(() => undefined);
    throw changedSourceError(shown);
  }
  return { fd, close };
}

/**
 * Walks a directory depth first in a stable order (names sorted by code unit), each directory
 * before what it holds. Symbolic links are reported, never followed: each directory is listed
 * through its open handle, so a directory exchanged for a link after it was seen is never entered.
 * Files are named by path, and the stager checks that the file it opens is the one seen here.
 */
async function* walk(handle: OpenedDir, realDir: string, rel: string, shownRoot: string, signal: AbortSignal, sync: boolean): AsyncGenerator<IncomingEntry> {
  const calls = callsFor(sync);
  const here = fdPath(handle.fd) ?? realDir;
  const shownDir = rel === '' ? shownRoot : path.join(shownRoot, rel);
  let names: string[];
  try {
    names = await calls.readdir(here);
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
      st = await calls.lstat(inHere);
    } catch (err) {
      throw fsSourceError(err, source, shownRoot);
    }
    if (st.isDirectory()) {
      yield { name, type: 'directory', source };
      const sub = await openDir(inHere, st, source, shownRoot, sync);
      try {
        yield* walk(sub, path.join(realDir, base), name, shownRoot, signal, sync);
      } finally {
        await sub.close().catch(() => undefined);
      }
    } else if (st.isFile()) {
      yield { name, type: 'file', localPath: path.join(realDir, base), size: st.size, localStat: identityOf(st), source };
    } else if (st.isSymbolicLink()) {
      let linkTarget: string;
      try {
        linkTarget = await calls.readlink(inHere);
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

/**
 * The bytes below a local source: a file's size, a directory's files added up (links not
 * followed) by `measureTree`; undefined for an archive (what it unpacks to is known only once
 * read) or a path that cannot be looked at.
 */
export async function localSize(spec: string, measureTree: MeasureTree): Promise<number | undefined> {
  // The source itself may be a link (a `latest` link to a build): sources follow it, so count it.
  const st = await fsp.stat(spec).catch(() => undefined);
  if (st === undefined) return undefined;
  if (!st.isDirectory()) return archiveKindOf(path.basename(spec)) !== undefined ? undefined : st.size;
  return (await measureTree(spec))?.bytes;
}

/**
 * The artifacts a local source brings and the bytes of their names: a file is one, named by its
 * base name; a directory's files and links are counted by `measureTree`; undefined for an archive
 * or a path that cannot be looked at.
 */
export async function localArtifacts(spec: string, measureTree: MeasureTree): Promise<{ artifacts: number; nameBytes: number } | undefined> {
  const st = await fsp.stat(spec).catch(() => undefined);
  if (st === undefined) return undefined;
  if (!st.isDirectory()) return archiveKindOf(path.basename(spec)) !== undefined ? undefined : { artifacts: 1, nameBytes: Buffer.byteLength(path.basename(path.resolve(spec))) };
  return measureTree(spec);
}
