/**
 * Where an area's line is and how its directories are reached (see queue.ts): the area's path as
 * the kernel places it, the queue's path, the cheap look whether anyone waits, and the queue's
 * directories opened (or made) through descriptors, never through a link.
 */
import * as fs from 'fs';
import * as path from 'path';
import { isWithin, openBelow, openDir, whereIs, type Dir } from '../fs/anchored';
import { callsFor } from '../fs/calls';
import { errnoCode } from '../base/errors';
import { sideName } from '../base/holder';
import { dropCachedListing as dropListing } from '../fs/fresh';
import { asyncIo, cachesAttributes, ioFor, isLocalDevice, type Io } from '../fs/io';
import { META_DIR, areaKey, QUEUE_DIR, QUEUE_PROBE_PREFIX } from '../base/protocol';
import { resolveArea, type Area } from '../fs/tags';

/**
 * The area's path inside the static directory as the kernel places it, so that a tag reached
 * through a link queues with the tag it leads to; the tag itself when the area is not there (yet).
 */
export async function areaPathOf(area: Area): Promise<string> {
  return areaPathAt(area, await fs.promises.realpath(area.dir).catch(() => undefined));
}

function areaPathAt(area: Area, real: string | undefined): string {
  if (real === undefined || real === area.realStaticDir || !isWithin(area.realStaticDir, real)) return area.tag;
  return path.relative(area.realStaticDir, real).split(path.sep).join('/');
}

/** The same for an area the caller opened: where the kernel places that very directory. */
export function openedAreaPath(area: Area, opened: Dir): string {
  let real: string | undefined;
  try {
    real = whereIs(opened);
  } catch {
    real = undefined;
  }
  return areaPathAt(area, real);
}

/** Where an area's queue is, for messages (and for the cheap look whether anyone waits). */
export function queuePath(staticDir: string, key: string): string {
  return path.join(staticDir, META_DIR, QUEUE_DIR, key);
}

/**
 * True when nobody waits for any area of the static directory: one lstat. A directory's link
 * count is 2 plus its subdirectories (on most filesystems; where it is not, false, and the area's
 * own queue is looked for), and each area's queue is removed by its last waiter.
 */
export async function nobodyWaitsAnywhere(io: Io, realStaticDir: string): Promise<boolean> {
  const queues = await io.lstatOrNull(path.join(realStaticDir, META_DIR, QUEUE_DIR)).catch(() => null);
  return queues === null || (queues.isDirectory() && queues.nlink === 2);
}

/** The directory of the queue of `<staticDir>/<tag>`, whether or not anyone waits (it exists only while someone does). */
export async function queueDirOf(staticDir: string, tag: string): Promise<string> {
  const area = await resolveArea(staticDir, tag);
  return queuePath(area.staticDir, areaKey(await areaPathOf(area)));
}

/** Mode of the queue directories: readable by all, writable by whoever may write the static directory. */
function modeFor(staticDir: Dir): number {
  return 0o755 | (staticDir.mode & 0o022);
}

/**
 * Opens the directory `name` of ours in `parent`, making it where it is missing: with `mode`
 * exactly (whatever the umask), and then something else in its place (a link, a file, a FIFO:
 * the name is reserved for the tool) is removed, never followed. Without `mode`, as the umask
 * says, and anything else in its place is refused.
 */
async function ownDir(parent: Dir, name: string, sync: boolean, mode?: number): Promise<Dir> {
  const p = parent.at(name);
  const calls = callsFor(sync);
  for (let tries = 0; ; tries++) {
    try {
      return await openBelow(parent, name, sync);
    } catch (err) {
      const code = errnoCode(err);
      if (tries >= 3 || (code !== 'ENOENT' && (mode === undefined || (code !== 'ELOOP' && code !== 'ENOTDIR')))) throw err;
      if (code !== 'ENOENT') await calls.unlink(p);
    }
    try {
      await calls.mkdir(p, mode);
    } catch (err) {
      if (errnoCode(err) === 'EEXIST') continue;
      throw err;
    }
    const dir = await openBelow(parent, name, sync);
    // mkdir's mode went through the umask: set it exactly, on what was opened.
    if (mode !== undefined) await calls.fchmod(dir.fd, mode).catch(() => undefined);
    return dir;
  }
}

export interface QueueDirs {
  /** `.devserver-staging/queue`, to remove the area's directory once it is empty. */
  queue: Dir;
  /** `.devserver-staging/queue/<key>`: the tickets. */
  dir: Dir;
  /** Whether its filesystem is local (events for every change) and whether its clients cache listings. */
  local: boolean;
  caching: boolean;
}

/** Opens an area's queue through descriptors, never through a link; `create` makes what is missing. */
export async function openQueue(realStaticDir: string, key: string, create: boolean, sync: boolean): Promise<QueueDirs> {
  const root = await openDir(realStaticDir, true, sync);
  const open: Dir[] = [];
  try {
    const meta = create ? await ownDir(root, META_DIR, sync) : await openBelow(root, META_DIR, sync);
    open.push(meta);
    const queue = create ? await ownDir(meta, QUEUE_DIR, sync, modeFor(root)) : await openBelow(meta, QUEUE_DIR, sync);
    open.push(queue);
    const dir = create ? await ownDir(queue, key, sync, modeFor(root)) : await openBelow(queue, key, sync);
    open.push(dir);
    await ioFor(dir.at('.'), dir.dev);
    const local = isLocalDevice(dir.dev);
    return { queue, dir, local, caching: !local && (await cachesAttributes(dir.at('.'))) };
  } catch (err) {
    for (const d of open) d.close();
    throw err;
  } finally {
    root.close();
    open[0]?.close(); // the bookkeeping directory was only a way through
  }
}

export function closeQueue(q: QueueDirs): void {
  q.dir.close();
  q.queue.close();
}

export function readdir(io: Io, dir: Dir): Promise<string[]> {
  return callsFor(io.sync).readdir(dir.at('.'));
}

/**
 * On a filesystem whose clients cache listings (sshfs keeps them 20 s), making and removing an
 * entry drops this client's cached listing of the queue, so the next read sees other hosts' tickets.
 */
export async function dropCachedListing(q: QueueDirs): Promise<void> {
  if (q.caching) await dropListing(q.dir.at('.'), sideName(QUEUE_PROBE_PREFIX));
}

/**
 * The queue of an area, opened to read, with its key; undefined where nobody waits (or what is
 * there is not a directory of ours). One lstat while nobody waits anywhere.
 */
export async function openExistingQueue(area: Area): Promise<{ q: QueueDirs; key: string } | undefined> {
  if (await nobodyWaitsAnywhere(area.io, area.realStaticDir)) return undefined;
  const key = areaKey(await areaPathOf(area));
  if ((await asyncIo.lstatOrNull(queuePath(area.realStaticDir, key)).catch(() => null)) === null) return undefined;
  try {
    return { q: await openQueue(area.realStaticDir, key, false, false), key };
  } catch {
    return undefined; // a link, a file: nobody can wait there
  }
}
