/**
 * Tags name staging areas: `<staticDir>/<tag>`. Everything the core touches goes through
 * `resolveArea`, which keeps the area inside the static directory.
 */
import * as fs from 'fs';
import * as path from 'path';
import { StagingError, asStagingError, errnoCode } from '../base/errors';
import { isInside, openDir, openPath, type Dir } from './anchored';
import { printable } from '../base/format';
import { ioForStaticDir, realpathOf, statOf, type Io } from './io';
import { isProtocolName } from '../base/protocol';

export interface Area {
  /** The static directory as given, made absolute. */
  staticDir: string;
  /** The static directory with symlinks resolved. */
  realStaticDir: string;
  /** Normalised tag: segments joined with '/'. */
  tag: string;
  segments: string[];
  /** `<staticDir>/<tag>` */
  dir: string;
  /** Whether the area directory exists (at the time of resolving). */
  exists: boolean;
  /** The device of the area directory, as `ensureAreaDir` last found it. */
  dev?: number;
  /** How to call the static directory's filesystem (see io.ts). */
  io: Io;
}

const MAX_SEGMENT_BYTES = 255;
const MAX_TAG_BYTES = 1024;

function badTag(tag: unknown, why: string): StagingError {
  // Quoted as `printable` quotes a name it escapes, so that either reads the same.
  const name = typeof tag === 'string' ? printable(tag.length > 120 ? `${tag.slice(0, 120)}…` : tag) : String(tag);
  const shown = name.startsWith('"') ? name : `"${name}"`;
  return new StagingError('EBADTAG', `Invalid tag ${shown}: ${why}.`);
}

export interface TagOptions {
  /**
   * Accept any name a directory can have but NUL and `/`: a control character, or bytes that are
   * not UTF-8 (kept as rawNames.ts keeps them). For looking only (status, list, du, watch): such a
   * name is shown (escaped) and judged, never locked, staged into or removed, since no command
   * could name it in its records (history, queue, audit) as it is.
   */
  anyName?: boolean;
}

/** A lone surrogate: half of a character, which no name on disk decodes to but a kept byte (rawNames.ts). */
const LONE_SURROGATE = /\p{Cs}/u;
const CONTROL = /[\u0000-\u001f\u007f]/;

/** What the tool does with an area whose name it can only look at, for the message that refuses to do more. */
const LOOK_ONLY =
  'such an area can be listed and looked at (list, status, du, watch), but not locked, staged into or removed by this tool; rename it (mv) to a name of printable characters first';

/**
 * Checks a tag's syntax and returns its segments. Pure: touches no file.
 * A tag is a relative path of one or more segments separated by '/', with no empty, '.' or '..'
 * segment, no control characters, no bytes that are not UTF-8 (both allowed with `anyName`), and
 * no segment that collides with the lock protocol's names.
 */
export function parseTag(tag: unknown, options: TagOptions = {}): string[] {
  if (typeof tag !== 'string') throw badTag(tag, 'a tag must be a string');
  if (tag.length === 0) throw badTag(tag, 'it is empty; name a subdirectory of the static directory, such as "eve-release/R120-15662.0.0"');
  if (tag.includes('\0')) throw badTag(tag, 'it contains a NUL character');
  if (!options.anyName && CONTROL.test(tag)) throw badTag(tag, `it contains a control character; ${LOOK_ONLY}`);
  if (LONE_SURROGATE.test(tag)) {
    // Bytes that are not UTF-8 are kept as U+DC80 to U+DCFF; any other lone half came from no name.
    if (/[\ud800-\udc7f\udd00-\udfff]/.test(tag.replace(/[\ud800-\udbff][\udc00-\udfff]/g, ''))) {
      throw badTag(tag, 'it holds half of a character (a lone UTF-16 surrogate), which no name can');
    }
    if (!options.anyName) throw badTag(tag, `its name is not valid UTF-8 (shown as \\xNN); ${LOOK_ONLY}`);
  }
  if (tag.startsWith('/') || path.isAbsolute(tag)) throw badTag(tag, 'it is an absolute path; give a path relative to the static directory');
  if (Buffer.byteLength(tag) > MAX_TAG_BYTES) throw badTag(tag, `it is longer than ${MAX_TAG_BYTES} bytes`);
  // A single trailing slash is harmless ("board/build/" from shell completion); anything else empty is not.
  const segments = (tag.endsWith('/') ? tag.slice(0, -1) : tag).split('/');
  for (const seg of segments) {
    if (seg === '') throw badTag(tag, 'it has an empty path segment ("//")');
    if (seg === '.' || seg === '..') throw badTag(tag, `it has a "${seg}" segment; tags must stay inside the static directory`);
    if (Buffer.byteLength(seg) > MAX_SEGMENT_BYTES) throw badTag(tag, `a segment is longer than ${MAX_SEGMENT_BYTES} bytes`);
    if (isProtocolName(seg)) {
      throw badTag(tag, `"${seg}" is reserved by the lock protocol`);
    }
  }
  return segments;
}

// The containment rule lives with the other path rules of acting on what was checked.
export { isInside } from './anchored';

/** Answers, and answers under way: callers that ask at once (a status asks twice) share one. */
const staticCache = new Map<string, Promise<{ realStaticDir: string; io: Io }>>();

/** Resolves and checks the static directory; the answer is cached because it is asked on every call. */
export async function resolveStaticDir(staticDir: unknown): Promise<{ staticDir: string; realStaticDir: string; io: Io }> {
  if (typeof staticDir !== 'string' || staticDir.length === 0) {
    throw new StagingError('EBADSTATICDIR', 'No static directory given.', { reason: 'no-static-dir', next: [{ kind: 'give-static-dir' }] });
  }
  if (staticDir.includes('\0')) throw new StagingError('EBADSTATICDIR', 'The static directory path contains a NUL character.');
  const abs = path.resolve(staticDir);
  let entry = staticCache.get(abs);
  if (entry === undefined) {
    entry = checkStaticDir(abs);
    staticCache.set(abs, entry);
    // A failure is not kept: the directory may be made or mounted before the next call.
    entry.catch(() => staticCache.delete(abs));
  }
  return { staticDir: abs, ...(await entry) };
}

async function checkStaticDir(abs: string): Promise<{ realStaticDir: string; io: Io }> {
  let real: string;
  let st: fs.Stats;
  try {
    real = await realpathOf(abs);
    st = await statOf(real);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') {
      throw new StagingError('EBADSTATICDIR', `The static directory ${abs} does not exist; create it or point to another one.`, { path: abs, reason: 'missing' });
    }
    throw asStagingError(err, 'open the static directory', abs);
  }
  if (!st.isDirectory()) throw new StagingError('EBADSTATICDIR', `The static directory ${abs} is not a directory.`, { path: abs, reason: 'not-a-directory' });
  return { realStaticDir: real, io: await ioForStaticDir(real, st.dev) };
}

/**
 * Resolves a tag to its staging area and proves it stays inside the static directory: every
 * existing segment that is a symlink must resolve inside it, and nothing along the way may be a
 * file. Segments that do not exist yet are fine; `ensureAreaDir` creates them.
 */
export async function resolveArea(staticDirIn: unknown, tag: unknown, options: TagOptions = {}): Promise<Area> {
  const segments = parseTag(tag, options);
  const { staticDir, realStaticDir, io } = await resolveStaticDir(staticDirIn);
  const normalized = segments.join('/');
  let current = staticDir;
  let exists = true;
  for (let i = 0; i < segments.length; i++) {
    current = path.join(current, segments[i]);
    let st: fs.Stats;
    try {
      // Each level above was checked to be a directory, so null here means this one does not exist.
      const found = await io.lstatOrNull(current);
      if (found === null) {
        exists = false;
        break;
      }
      st = found;
    } catch (err) {
      if (err instanceof StagingError) throw err;
      throw asStagingError(err, 'inspect', current);
    }
    if (st.isSymbolicLink()) {
      let target: string;
      try {
        target = await io.realpath(current);
      } catch {
        throw badTag(normalized, `${current} is a symbolic link that leads nowhere`);
      }
      if (!isInside(realStaticDir, target)) {
        throw badTag(normalized, `${current} is a symbolic link that leads outside the static directory (to ${target})`);
      }
      st = await io.stat(current);
    }
    if (!st.isDirectory()) {
      throw badTag(normalized, `${current} exists and is not a directory`);
    }
  }
  return { staticDir, realStaticDir, tag: normalized, segments, dir: path.join(staticDir, ...segments), exists, io };
}

/** A directory `openArea` created, with its parent held open: removing it again stays in the same place. */
export interface CreatedDir {
  parent: Dir;
  name: string;
  /** The path, for messages only. */
  shown: string;
}

export interface OpenedArea {
  /** The area directory itself, opened: everything below it goes through `dir.at(name)`. */
  dir: Dir;
  /** The directories this call created, deepest last. */
  created: CreatedDir[];
  /** Releases the descriptors of the created directories' parents (the caller closes `dir`). */
  closeParents(): void;
}

/**
 * Opens the area, creating missing directories one level at a time through the descriptor of the
 * level above, so that a directory swapped for a symlink while this runs cannot lead the creation
 * outside. A segment that is a symlink is followed only to a directory inside the static directory.
 * With `exclusive`, the area itself must not exist yet (create-once).
 */
export async function openArea(area: Area, exclusive: boolean): Promise<OpenedArea> {
  const parents: Dir[] = [];
  const created: CreatedDir[] = [];
  // Local filesystems take the synchronous path (io.ts): a few microseconds a step.
  const sync = area.io.sync;
  let current: Dir;
  try {
    current = await openDir(area.realStaticDir, true, sync);
  } catch (err) {
    throw asStagingError(err, 'open the static directory', area.staticDir);
  }
  let shown = area.staticDir;
  try {
    for (let i = 0; i < area.segments.length; i++) {
      const seg = area.segments[i];
      const last = i === area.segments.length - 1;
      shown = path.join(shown, seg);
      let madeHere = false;
      let next: Dir | undefined;
      for (let tries = 0; next === undefined; tries++) {
        try {
          next = await openPath(current, area.realStaticDir, [seg], area.tag, sync);
        } catch (err) {
          const code = errnoCode(err);
          if (code === 'ENOTDIR') throw badTag(area.tag, `${shown} exists and is not a directory`);
          if (code !== 'ENOENT' || tries > 5) throw err instanceof StagingError ? err : asStagingError(err, 'open', shown);
          try {
            await area.io.mkdir(current.at(seg));
            madeHere = true;
            created.push({ parent: current, name: seg, shown });
          } catch (mkErr) {
            if (errnoCode(mkErr) === 'ENOENT') {
              throw new StagingError('ENOENT', `${path.dirname(shown)} was removed by another process while this one was creating ${shown}.`, { path: shown });
            }
            if (errnoCode(mkErr) !== 'EEXIST') throw asStagingError(mkErr, 'create', shown);
          }
        }
      }
      if (last && exclusive && !madeHere) {
        next.close();
        throw new StagingError('EEXIST', `The staging area ${shown} already exists; choose another tag, or add to it without create-once.`, { path: shown });
      }
      parents.push(current);
      current = next;
    }
  } catch (err) {
    await removeCreated(created);
    current.close();
    for (const p of parents) p.close();
    throw err;
  }
  const keep = new Set(created.map((c) => c.parent));
  for (const p of parents) if (!keep.has(p)) p.close();
  area.exists = true;
  area.dev = current.dev;
  return {
    dir: current,
    created,
    closeParents() {
      for (const p of keep) p.close();
    },
  };
}

/** Removes directories `openArea` created, deepest first, only while they are empty. */
export async function removeCreated(created: readonly CreatedDir[]): Promise<void> {
  for (let i = created.length - 1; i >= 0; i--) {
    try {
      await fs.promises.rmdir(created[i].parent.at(created[i].name));
    } catch {
      return; // not empty any more: someone else is using it, leave it and its parents alone
    }
  }
}
