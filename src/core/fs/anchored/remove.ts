/**
 * Removing a tree through descriptors, without recursion and without crossing into a mount: one
 * walk, its calls made synchronously or through the thread pool as `callsFor` says.
 */
import * as fs from 'fs';
import { StagingError, errnoCode } from '../../base/errors';
import { META_DIR } from '../../base/protocol';
import { type Calls, callsFor } from '../calls';
import { type Dir, checkName, openBelow } from './dir';
import { mountBoundary } from './mounts';

const ifThere = (err: unknown): undefined => {
  if (errnoCode(err) === 'ENOENT') return undefined;
  throw err;
};

/** How deep a removal keeps directories open; what lies deeper is moved up to the top of the tree first. */
const REMOVE_DEPTH = 64;

/**
 * `removeTree`, its calls made through `calls`: one code path for the synchronous and the
 * asynchronous removal. It walks with a stack of its own, never by recursion (a co-user decides
 * how deep a tree is), and keeps at most `REMOVE_DEPTH` directories open: a directory found deeper is renamed, through the descriptors, to the top of the tree being
 * removed (the same filesystem, inside the same tree), and removed from there.
 */
async function removal(parent: Dir, name: string, calls: Calls, keep?: (names: readonly string[]) => boolean): Promise<void> {
  // ENOENT from these means done already: the entry went meanwhile.
  const lstatIf = (p: string): Promise<fs.Stats | undefined> => calls.lstat(p).catch(ifThere);
  const unlinkIf = (p: string): Promise<void> => calls.unlink(p).catch(ifThere);
  const rmdirIf = (p: string): Promise<void> => calls.rmdir(p).catch(ifThere);
  checkName(name);
  const at = parent.at(name);
  const st = await lstatIf(at);
  if (st === undefined) return;
  if (!st.isDirectory()) {
    await unlinkIf(at);
    return;
  }
  let root: Dir;
  try {
    root = await openBelow(parent, name, calls.sync);
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT') return;
    // Swapped for a link or a file since the lstat: remove that entry itself, never what it leads to.
    if (code === 'ELOOP' || code === 'ENOTDIR') await removal(parent, name, calls, keep);
    else throw err;
    return;
  }
  // Asked only where there is something inside to remove: an empty directory is removed by one
  // rmdir, which never crosses into a mount (EBUSY).
  const crossesMount = mountBoundary(parent);
  const elsewhere = (dir: Dir): StagingError | undefined =>
    crossesMount(dir)
      ? new StagingError('EIO', `Did not remove ${dir.shown}: another filesystem is mounted there. Unmount it, then try again.`, { path: dir.shown })
      : undefined;
  // Boxed, so that whatever was thrown (even `undefined`) is told apart from nothing thrown.
  let first: { err: unknown } | undefined;
  const levels: { dir: Dir; name: string; entries: string[]; next: number }[] = [];
  let moved = 0;
  try {
    if (root.dev !== parent.dev) throw elsewhere(root)!;
    const entries = await calls.readdir(root.at('.'));
    // Judged on the directory the removal goes on through, so a directory renamed to this name
    // meanwhile is never what was judged and then removed.
    if (keep?.(entries) === true) return;
    if (entries.length > 0) {
      const mounted = elsewhere(root);
      if (mounted !== undefined) throw mounted;
    }
    levels.push({ dir: root, name, entries, next: 0 });
    while (levels.length > 0) {
      const level = levels[levels.length - 1];
      if (level.next >= level.entries.length) {
        levels.pop();
        level.dir.close();
        if (levels.length > 0) {
          try {
            await rmdirIf(levels[levels.length - 1].dir.at(level.name));
          } catch (err) {
            first ??= { err };
          }
        }
        continue;
      }
      const entry = level.entries[level.next++];
      try {
        const est = await lstatIf(level.dir.at(entry));
        if (est === undefined) continue;
        if (!est.isDirectory()) {
          await unlinkIf(level.dir.at(entry));
          continue;
        }
        if (levels.length >= REMOVE_DEPTH) {
          // Too deep to keep open: up to the top, where the walk meets it again (under a name
          // nothing there has: a rename onto a directory that is not empty fails).
          for (let tries = 0; ; tries++) {
            const up = `${META_DIR}.deep.${moved++}`;
            try {
              await calls.rename(level.dir.at(entry), root.at(up));
            } catch (err) {
              const code = errnoCode(err);
              if (tries < 100 && (code === 'ENOTEMPTY' || code === 'EEXIST')) continue;
              throw err;
            }
            levels[0].entries.push(up);
            break;
          }
          continue;
        }
        let child: Dir;
        try {
          child = await openBelow(level.dir, entry, calls.sync);
        } catch (err) {
          const code = errnoCode(err);
          if (code === 'ENOENT') continue;
          if (code !== 'ELOOP' && code !== 'ENOTDIR') throw err;
          // A link or file put there since the lstat: the entry goes, never what it leads to.
          await unlinkIf(level.dir.at(entry));
          continue;
        }
        try {
          const inside = elsewhere(child);
          if (inside !== undefined) throw inside;
        } catch (err) {
          // Another mount, or no way to tell (no descriptor left to read it with): not entered, not kept open.
          child.close();
          throw err;
        }
        try {
          levels.push({ dir: child, name: entry, entries: await calls.readdir(child.at('.')), next: 0 });
        } catch (err) {
          child.close();
          throw err;
        }
      } catch (err) {
        first ??= { err };
      }
    }
  } finally {
    for (const level of levels) level.dir.close();
    // Also when it was refused before the walk began: an open descriptor keeps a mount busy.
    root.close();
  }
  if (first !== undefined) throw first.err;
  await rmdirIf(at);
}

export interface RemoveOptions {
  /** Synchronous calls (a local filesystem, see io.ts). */
  sync?: boolean;
  /** Looks at the top directory's entries once it is opened: true keeps the whole tree, untouched. */
  keep?: (names: readonly string[]) => boolean;
}

/**
 * Deletes `name` inside `parent` and everything below it, through descriptors: never follows a
 * link (links are unlinked, not entered) and never crosses into another filesystem (a bind mount
 * inside is left alone, and the call fails with EXDEV naming it). Entries that vanish meanwhile
 * are fine. Throws the first other error after trying the rest. However deep the tree, at most
 * `REMOVE_DEPTH` directories are open at once, and the stack does not grow with it.
 */
export function removeTree(parent: Dir, name: string, options: RemoveOptions = {}): Promise<void> {
  return removal(parent, name, callsFor(options.sync === true), options.keep);
}
