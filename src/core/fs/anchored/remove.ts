/**
 * Removing a tree through descriptors, without recursion and without crossing into a mount: one
 * walk, driven synchronously or asynchronously.
 */
import * as fs from 'fs';
import { StagingError, errnoCode } from '../../base/errors';
import { META_DIR } from '../../base/protocol';
import { type Dir, checkName, openBelow, openBelowSync, whereIs } from './dir';
import { mountPoints } from './mounts';

/** One call of a removal, made synchronously (`now`) or through the thread pool (`later`), as its driver says. */
interface Step<T> {
  now(): T;
  later(): Promise<T>;
}

const step = <T>(now: () => T, later: () => Promise<T>): Step<T> => ({ now, later });
const ifThere = (err: unknown): undefined => {
  if (errnoCode(err) === 'ENOENT') return undefined;
  throw err;
};
/** A step whose ENOENT means done already (the entry went meanwhile). */
const gone = <T>(now: () => T, later: () => Promise<T>): Step<T | undefined> =>
  step(
    () => {
      try {
        return now();
      } catch (err) {
        return ifThere(err);
      }
    },
    () => later().catch(ifThere),
  );
const lstatStep = (p: string): Step<fs.Stats | undefined> => gone(() => fs.lstatSync(p), () => fs.promises.lstat(p));
const unlinkStep = (p: string): Step<void> => gone(() => fs.unlinkSync(p), () => fs.promises.unlink(p));
const rmdirStep = (p: string): Step<void> => gone(() => fs.rmdirSync(p), () => fs.promises.rmdir(p));
const openStep = (dir: Dir, entry: string): Step<Dir> => step(() => openBelowSync(dir, entry), () => openBelow(dir, entry));
const listStep = (dir: Dir): Step<string[]> => step(() => fs.readdirSync(dir.at('.')), () => fs.promises.readdir(dir.at('.')));

/** The mount points a removal must not cross into, or how to read them when it needs them. */
type Mounts = ReadonlySet<string> | (() => ReadonlySet<string>);

/** How deep a removal keeps directories open; what lies deeper is moved up to the top of the tree first. */
const REMOVE_DEPTH = 64;

/**
 * The calls of `removeTree`, in order, each as a `Step` its driver makes and answers: one code
 * path for the synchronous and the asynchronous removal. It walks with a stack of its own, never
 * by recursion (a co-user decides how deep a tree is), and keeps at most `REMOVE_DEPTH` directories
 * open: a directory found deeper is renamed, through the descriptors, to the top of the tree being
 * removed (the same filesystem, inside the same tree), and removed from there.
 */
function* removal(parent: Dir, name: string, mountsOf: Mounts): Generator<Step<unknown>, void, unknown> {
  checkName(name);
  const at = parent.at(name);
  const st = (yield lstatStep(at)) as fs.Stats | undefined;
  if (st === undefined) return;
  if (!st.isDirectory()) {
    yield unlinkStep(at);
    return;
  }
  let root: Dir;
  try {
    root = (yield openStep(parent, name)) as Dir;
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT') return;
    // Swapped for a link or a file since the lstat: remove that entry itself, never what it leads to.
    if (code === 'ELOOP' || code === 'ENOTDIR') yield* removal(parent, name, mountsOf);
    else throw err;
    return;
  }
  // The system's mount table, read once and only when there is something inside to remove: an
  // empty directory is removed by one rmdir, which never crosses into a mount (EBUSY).
  let mounts: ReadonlySet<string> | undefined = typeof mountsOf === 'function' ? undefined : mountsOf;
  const elsewhere = (dir: Dir): StagingError | undefined =>
    dir.dev !== parent.dev || (mounts ??= (mountsOf as () => ReadonlySet<string>)()).has(whereIs(dir))
      ? new StagingError('EIO', `Did not remove ${dir.shown}: another filesystem is mounted there. Unmount it, then try again.`, { path: dir.shown })
      : undefined;
  // Boxed, so that whatever was thrown (even `undefined`) is told apart from nothing thrown.
  let first: { err: unknown } | undefined;
  const levels: { dir: Dir; name: string; entries: string[]; next: number }[] = [];
  let moved = 0;
  try {
    if (root.dev !== parent.dev) throw elsewhere(root)!;
    const entries = (yield listStep(root)) as string[];
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
            yield rmdirStep(levels[levels.length - 1].dir.at(level.name));
          } catch (err) {
            first ??= { err };
          }
        }
        continue;
      }
      const entry = level.entries[level.next++];
      try {
        const est = (yield lstatStep(level.dir.at(entry))) as fs.Stats | undefined;
        if (est === undefined) continue;
        if (!est.isDirectory()) {
          yield unlinkStep(level.dir.at(entry));
          continue;
        }
        if (levels.length >= REMOVE_DEPTH) {
          // Too deep to keep open: up to the top, where the walk meets it again (under a name
          // nothing there has: a rename onto a directory that is not empty fails).
          for (let tries = 0; ; tries++) {
            const up = `${META_DIR}.deep.${moved++}`;
            try {
              yield step(
                () => fs.renameSync(level.dir.at(entry), root.at(up)),
                () => fs.promises.rename(level.dir.at(entry), root.at(up)),
              );
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
          child = (yield openStep(level.dir, entry)) as Dir;
        } catch (err) {
          const code = errnoCode(err);
          if (code === 'ENOENT') continue;
          if (code !== 'ELOOP' && code !== 'ENOTDIR') throw err;
          // A link or file put there since the lstat: the entry goes, never what it leads to.
          yield unlinkStep(level.dir.at(entry));
          continue;
        }
        const inside = elsewhere(child);
        if (inside !== undefined) {
          child.close();
          throw inside;
        }
        try {
          levels.push({ dir: child, name: entry, entries: (yield listStep(child)) as string[], next: 0 });
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
  }
  if (first !== undefined) throw first.err;
  yield rmdirStep(at);
}

function removeNow(steps: Generator<Step<unknown>, void, unknown>): void {
  let r = steps.next();
  while (r.done !== true) {
    let value: unknown;
    let failed: { err: unknown } | undefined;
    try {
      value = r.value.now();
    } catch (err) {
      failed = { err };
    }
    r = failed === undefined ? steps.next(value) : steps.throw(failed.err);
  }
}

async function removeLater(steps: Generator<Step<unknown>, void, unknown>): Promise<void> {
  let r = steps.next();
  while (r.done !== true) {
    let value: unknown;
    let failed: { err: unknown } | undefined;
    try {
      value = await r.value.later();
    } catch (err) {
      failed = { err };
    }
    r = failed === undefined ? steps.next(value) : steps.throw(failed.err);
  }
}

/**
 * Deletes `name` inside `parent` and everything below it, through descriptors: never follows a
 * link (links are unlinked, not entered) and never crosses into another filesystem (a bind mount
 * inside is left alone, and the call fails with EXDEV naming it). Entries that vanish meanwhile
 * are fine. Throws the first other error after trying the rest. However deep the tree, at most
 * `REMOVE_DEPTH` directories are open at once, and the stack does not grow with it.
 */
export function removeTree(parent: Dir, name: string, mounts: Mounts = mountPoints): Promise<void> {
  return removeLater(removal(parent, name, mounts));
}

/** `removeTree`, synchronously: for a local filesystem and a small tree (a lock being removed). */
export function removeTreeSync(parent: Dir, name: string, mounts: Mounts = mountPoints): void {
  removeNow(removal(parent, name, mounts));
}
