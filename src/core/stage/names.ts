/**
 * Name safety: what an entry may be called inside an area, and where a link in the area leads.
 * A source's names are not trusted; every one passes through here before anything is written.
 */
import * as fs from 'fs';
import * as path from 'path';
import { StagingError } from '../base/errors';
import { asyncIo } from '../fs/io';
import { isReservedSegment } from '../base/protocol';
import { isInside } from '../fs/tags';
import type { IncomingEntry } from './types';

/** Linux's limit on a path: a longer one cannot be created, so it is refused up front. */
const PATH_MAX = 4096;
/** Links followed in one resolution before it counts as a loop (the kernel's limit). */
const MAX_LINK_DEPTH = 40;

export function unsafe(e: Pick<IncomingEntry, 'name' | 'source'>, why: string): StagingError {
  return new StagingError('EUNSAFE', `Refusing entry ${JSON.stringify(e.name)} from ${e.source}: ${why}. Nothing from this staging was kept.`);
}

export function conflict(name: string, e: Pick<IncomingEntry, 'name' | 'source'>, final: string): StagingError {
  return new StagingError(
    'ECONFLICT',
    `${name} is already staged in ${path.dirname(final)} with different content than ${e.source}. Stage it under another tag, or overwrite it explicitly.`,
    { path: final },
  );
}

/** The entry's name as a safe relative path inside the area, or EUNSAFE naming the entry. */
export function checkName(e: Pick<IncomingEntry, 'name' | 'source' | 'type'>): string {
  let name = e.name;
  if (typeof name !== 'string' || name === '') throw unsafe(e, 'it has no name');
  if (/[\u0000-\u001f\u007f]/.test(name)) throw unsafe(e, 'its name contains a NUL or control character');
  if (name.includes('\\')) throw unsafe(e, 'its name contains a backslash');
  if (name.startsWith('/') || /^[A-Za-z]:/.test(name)) throw unsafe(e, 'its name is an absolute path');
  while (name.startsWith('./')) name = name.slice(2);
  if (name.endsWith('/')) name = name.slice(0, -1);
  if (name === '' || name === '.') {
    if (e.type === 'directory') return '.';
    throw unsafe(e, 'it names the area itself');
  }
  const segments = name.split('/');
  segments.forEach((seg, i) => {
    if (seg === '' || seg === '.') throw unsafe(e, 'its name has an empty or "." segment');
    if (seg === '..') throw unsafe(e, 'its name climbs out with ".."');
    if (Buffer.byteLength(seg) > 255) throw unsafe(e, 'a segment of its name is longer than 255 bytes');
    if (isReservedSegment(seg, i === 0)) throw unsafe(e, `"${seg}" is reserved for the lock and the manifest`);
  });
  return segments.join('/');
}

/** EUNSAFE if `name`'s path in the area `dir` is longer than the system allows. */
export function checkPathLength(dir: string, name: string, e: Pick<IncomingEntry, 'name' | 'source'>): void {
  if (Buffer.byteLength(path.join(dir, name)) >= PATH_MAX) {
    throw unsafe(e, `its path in the area would be longer than the ${PATH_MAX} bytes the system allows`);
  }
}

/**
 * Where `target`, a link's content, leads from `fromDir`, following links on the way as the
 * kernel does, and taking parts that do not exist as written. Undefined if it ever climbs above
 * `area` (a real path), is absolute, or loops.
 */
export async function resolveInside(area: string, fromDir: string, target: string, depth = 0): Promise<string | undefined> {
  if (depth > MAX_LINK_DEPTH || path.isAbsolute(target)) return undefined;
  let current = fromDir;
  for (const part of target.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (current === area) return undefined;
      current = path.dirname(current);
      continue;
    }
    const next = path.join(current, part);
    const st = await asyncIo.lstatOrNull(next).catch(() => null);
    if (st?.isSymbolicLink() === true) {
      const inner = await fs.promises.readlink(next).catch(() => undefined);
      if (inner === undefined) return undefined;
      const resolved = await resolveInside(area, current, inner, depth + 1);
      if (resolved === undefined) return undefined;
      current = resolved;
    } else {
      current = next;
    }
  }
  return current === area || isInside(area, current) ? current : undefined;
}
