/**
 * Looking inside a build without writing anything: its directory opened as the rest of the core
 * opens areas (anchored/dir.ts), its entries listed through that descriptor, its manifest read from it.
 * For the views that show what a build holds (the tree, a tooltip, the details page) and for
 * `verify`: a co-user who swaps a build, or a folder inside it, for a link while they look must not
 * make them list or read anything outside the static directory.
 */
import * as fs from 'fs';
import * as path from 'path';
import { openBelow, openDir, openPath, type Dir } from '../fs/anchored';
import { callsFor } from '../fs/calls';
import { StagingError, asStagingError, errnoCode, isStagingError } from '../base/errors';
import { MAX_MANIFEST_BYTES, parseArtifacts, readManifestBytes, type JudgeOptions, type ManifestEntry } from './manifest';
import { MANIFEST_FILE } from '../base/protocol';
import { decodeName, fsPath, hasRawBytes } from '../base/rawNames';
import { eachInSlices, pause } from '../base/slices';
import { resolveArea, type Area } from '../fs/tags';

function noBuild(area: Area): StagingError {
  return new StagingError('ENOENT', `There is no build ${area.tag} in ${area.staticDir} (no directory ${area.dir}).`, { path: area.dir });
}

/** The build directory, opened level by level below the static directory (a link is followed only to a directory inside it). */
export async function openBuild(area: Area): Promise<Dir> {
  if (!area.exists) throw noBuild(area);
  let root: Dir;
  try {
    root = await openDir(area.realStaticDir, true, area.io.sync);
  } catch (err) {
    throw asStagingError(err, 'open the static directory', area.staticDir);
  }
  try {
    return await openPath(root, area.realStaticDir, area.segments, area.tag, area.io.sync);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') throw noBuild(area);
    throw isStagingError(err) ? err : asStagingError(err, 'open', area.dir);
  } finally {
    root.close();
  }
}

/**
 * The entries of a directory with their types, names decoded as UTF-8. A name that is not valid
 * UTF-8 would not survive as a plain string: given back to the kernel it names another file or
 * none, and two such names can decode alike (a view would show one row twice). Those are kept
 * apart, in `undecodable`, their names decoded as rawNames.ts decodes them: every byte kept, shown
 * as `\xNN` by `printable`, and reached again only through `fsPath` (the core's Io and opened
 * directories do that).
 */
export async function readEntries(p: string, sync: boolean): Promise<{ entries: fs.Dirent[]; undecodable: fs.Dirent[] }> {
  const raw = await callsFor(sync).readdirTypedRaw(fsPath(p));
  const entries: fs.Dirent[] = [];
  const undecodable: fs.Dirent[] = [];
  for (const e of raw) {
    const name = decodeName(e.name);
    (hasRawBytes(name) ? undecodable : entries).push(Object.assign(e, { name }));
  }
  return { entries, undecodable };
}

/** Entries read from the kernel at a time by `readEntriesInSlices`. */
const DIR_BATCH = 128;

/**
 * `readEntries` of a directory that may hold 100,000 entries: read a batch at a time, pausing
 * between slices (slices.ts), where reading and decoding them all at once holds the event loop
 * for a large part of a second. `sync`: the batches are read synchronously (a local filesystem).
 * Names are read as strings, a Buffer each costing far more; only where one holds U+FFFD, which
 * is what a name that is not UTF-8 decodes to, is the directory read again as `readEntries` reads it.
 */
export async function readEntriesInSlices(p: string, sync: boolean): Promise<{ entries: fs.Dirent[]; undecodable: fs.Dirent[] }> {
  const calls = callsFor(sync);
  const dir = await calls.opendir(fsPath(p), { bufferSize: DIR_BATCH, encoding: 'utf8' });
  const entries: fs.Dirent[] = [];
  try {
    for (let n = 1; ; n++) {
      const e = await calls.readEntry(dir);
      if (e === null) break;
      if (e.name.includes('\uFFFD')) return await readEntries(p, sync);
      entries.push(e);
      if (n % 64 === 0) {
        const p = pause();
        if (p !== undefined) await p;
      }
    }
  } finally {
    await calls.closeDir(dir);
  }
  return { entries, undecodable: [] };
}

/** One entry of a directory inside a build, as a view shows it. */
export interface BuildEntry {
  name: string;
  /** lstat's size: a link's own, never what it leads to. */
  size: number;
  directory: boolean;
  /** A regular file (not a link, FIFO or other special file). */
  file: boolean;
}

/** Entries lstat'ed at once while a build's directory is read. */
const STAT_LANES = 64;

/**
 * The entries of `<staticDir>/<tag>/<rel>` (rel '' for the top of the build, '/'-separated): the
 * build opened as `openBuild` does, each folder of `rel` without following a link (ELOOP or ENOTDIR
 * when one is a link or a file now), and each entry lstat'ed through the opened folder. Entries that
 * vanish meanwhile are left out. Read and lstat'ed in slices, a few at a time: a build can hold
 * 100,000 files at its top, and the reader is often an editor's event loop.
 */
export async function readBuildDir(staticDir: string, tag: string, rel = ''): Promise<BuildEntry[]> {
  const area = await resolveArea(staticDir, tag);
  const sync = area.io.sync;
  let dir = await openBuild(area);
  try {
    for (const seg of rel === '' ? [] : rel.split('/')) {
      const next = await openBelow(dir, seg, sync);
      dir.close();
      dir = next;
    }
    const { entries } = await readEntriesInSlices(dir.at('.'), sync);
    const opened = dir;
    const sized: BuildEntry[] = [];
    await eachInSlices(entries, STAT_LANES, async (e) => {
      const st = await fs.promises.lstat(opened.at(e.name)).catch(() => undefined);
      if (st !== undefined) sized.push({ name: e.name, size: st.size, directory: st.isDirectory(), file: st.isFile() });
    });
    return sized;
  } finally {
    dir.close();
  }
}

/**
 * The artifacts the manifest of the build `tag` lists, in its order, read from the opened build
 * directory: ENOENT when there is no such build, ENOMANIFEST when it has none, ECORRUPT when it is
 * damaged, EIO naming it when it is a link, a FIFO or larger than `maxBytes`.
 */
export async function readBuildArtifacts(staticDir: string, tag: string, maxBytes = MAX_MANIFEST_BYTES, options: JudgeOptions = {}): Promise<ManifestEntry[]> {
  const area = await resolveArea(staticDir, tag);
  const build = await openBuild(area);
  try {
    return await readOpenedArtifacts(area, build, maxBytes, options);
  } finally {
    build.close();
  }
}

/** The artifacts of an opened build's manifest (see `readBuildArtifacts`). */
export async function readOpenedArtifacts(area: Area, build: Dir, maxBytes = MAX_MANIFEST_BYTES, options: JudgeOptions = {}): Promise<ManifestEntry[]> {
  const shown = path.join(area.dir, MANIFEST_FILE);
  const bytes = await readManifestBytes(build.at(MANIFEST_FILE), shown, maxBytes);
  if (bytes === undefined) {
    throw new StagingError(
      'ENOMANIFEST',
      `The build ${area.tag} (${area.dir}) has no manifest (${MANIFEST_FILE}), so there is nothing to verify it against: ` +
        'it was not staged by this tool, or its staging never finished.',
      { path: shown, next: [{ kind: 'add', staticDir: area.staticDir, tag: area.tag }] },
    );
  }
  return parseArtifacts(bytes, shown, options);
}
