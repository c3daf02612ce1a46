/**
 * Removing things: a whole staging area (destroy) and another holder's lock (force-release).
 * Both are recorded in the static directory's audit log before they act, and do not act when
 * that record cannot be written.
 */
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { type AuditEntry, recordFailure, recordIntent } from './audit';
import { fsClockSkew } from './clock';
import { StagingError, asStagingError, errnoCode } from './errors';
import { judgeLock, lockPathOf } from './judge';
import { acquire } from './lock';
import { META_DIR, TRASH_DIR, clampTiming, isProtocolName } from './protocol';
import { claimInstance, dropClaim, removeInstance } from './takeover';
import { isInside, resolveArea, resolveStaticDir } from './tags';
import type { LockInfo, Timing } from './types';

/**
 * The start of a name, at most 100 UTF-8 bytes and never cut inside a character: the area's own
 * name may already use all 255 bytes a name can have, so the id cannot just be prepended to it.
 */
function nameHint(name: string): string {
  let out = '';
  for (const ch of name) {
    if (Buffer.byteLength(out + ch) > 100) break;
    out += ch;
  }
  return out;
}

/**
 * Moves the area out of sight in one rename (observers see it whole or not at all), then deletes
 * it. The trash is inside the static directory, on the same filesystem; if the area lives on
 * another mount, it is renamed to a hidden sibling instead. Never follows a symlink: the rename
 * moves the entry itself, and the recursive delete unlinks links without entering them.
 */
export async function destroyArea(staticDir: string, dir: string): Promise<void> {
  const { realStaticDir } = await resolveStaticDir(staticDir);
  const realDir = await fs.promises.realpath(dir);
  if (!isInside(realStaticDir, realDir)) {
    throw new StagingError('EBADTAG', `Refusing to destroy ${dir}: it resolves to ${realDir}, outside the static directory ${staticDir}.`, { path: dir });
  }
  const id = `${Date.now().toString(36)}-${crypto.randomBytes(4).toString('hex')}`;
  const trash = path.join(staticDir, META_DIR, TRASH_DIR);
  let moved = path.join(trash, `${id}-${nameHint(path.basename(dir))}`);
  await fs.promises.mkdir(trash, { recursive: true });
  try {
    await fs.promises.rename(dir, moved);
  } catch (err) {
    if (errnoCode(err) !== 'EXDEV') throw err;
    moved = path.join(path.dirname(dir), `${META_DIR}.trash.${id}`);
    await fs.promises.rename(dir, moved);
  }
  await fs.promises.rm(moved, { recursive: true, force: true, maxRetries: 3 });
}

/** The first lock held (or legacy) by someone else below `dir`, not counting `dir`'s own lock. */
export async function findHeldInside(dir: string, timing: Timing): Promise<LockInfo | undefined> {
  const stack = [dir];
  while (stack.length > 0) {
    const current = stack.pop()!;
    let entries: fs.Dirent[];
    try {
      entries = await fs.promises.readdir(current, { withFileTypes: true });
    } catch {
      continue;
    }
    for (const e of entries) {
      if (!e.isDirectory() || isProtocolName(e.name)) continue;
      const child = path.join(current, e.name);
      const { info } = await judgeLock({ staticDir: dir, tag: path.relative(dir, child), dir: child }, timing, Date.now());
      if (info.state === 'held' || info.state === 'legacy') return info;
      stack.push(child);
    }
  }
  return undefined;
}

function previousOf(info: LockInfo): NonNullable<AuditEntry['previous']> {
  const p: NonNullable<AuditEntry['previous']> = { state: info.state };
  if (info.holder !== undefined) p.holder = info.holder;
  if (info.legacy !== undefined) p.legacy = info.legacy;
  if (info.heartbeatAgeMs !== undefined) p.heartbeatAgeMs = Math.round(info.heartbeatAgeMs);
  if (info.ageMs !== undefined) p.ageMs = Math.round(info.ageMs);
  return p;
}

export interface ForceReleaseOptions extends Partial<Timing> {
  clientId?: string;
}

/**
 * Removes whoever's lock is on the area (ours, another process's, or the Python devserver's) and
 * records it in the audit log. Returns what the lock was. ENOTHELD when there is no lock.
 * A holder of ours learns of it within one refresh interval: its signal aborts.
 */
export async function forceRelease(staticDir: string, tag: string, options: ForceReleaseOptions = {}): Promise<LockInfo> {
  const timing = clampTiming(options);
  const area = await resolveArea(staticDir, tag);
  for (let attempt = 0; attempt < 50; attempt++) {
    const skew = await fsClockSkew(area.realStaticDir);
    const nowFs = Date.now() + skew;
    const { info, identity } = await judgeLock(area, timing, nowFs);
    if (identity === undefined) {
      if (!info.exists) throw new StagingError('ENOENT', `There is no staging area ${area.dir}.`, { path: area.dir });
      throw new StagingError('ENOTHELD', `${area.dir} is not locked; nothing to release.`, { path: info.lockPath });
    }
    const claim = await claimInstance(area.dir, identity, timing.staleMs, nowFs);
    if (claim === undefined) {
      // Someone is taking this instance over right now; look again once they are done.
      await new Promise((r) => setTimeout(r, 20));
      continue;
    }
    // Recorded before it happens: a removal that cannot be recorded does not happen.
    const entry = { action: 'force-release', tag: area.tag, previous: previousOf(info) } as const;
    try {
      await recordIntent(area.staticDir, entry, options.clientId);
    } catch (err) {
      await dropClaim(claim);
      throw err;
    }
    let removed: boolean;
    try {
      removed = await removeInstance(info.lockPath, identity, false);
      if (removed && info.legacy?.uniqueFile !== undefined) {
        // The Python holder's unique file: with the lock gone it only litters the area.
        await fs.promises.unlink(path.join(area.dir, info.legacy.uniqueFile)).catch(() => undefined);
      }
    } catch (err) {
      const e = asStagingError(err, 'remove the lock', info.lockPath);
      await recordFailure(area.staticDir, entry, e, options.clientId);
      throw e;
    } finally {
      await dropClaim(claim);
    }
    if (!removed) {
      // It changed under us (released, or taken anew): judge again.
      await recordFailure(area.staticDir, entry, 'the lock changed before it was removed; looking again', options.clientId);
      continue;
    }
    return info;
  }
  throw new StagingError('ELOCKED', `Could not force-release ${lockPathOf(area.dir)}: it kept changing. Try again.`, { path: lockPathOf(area.dir) });
}

export interface DestroyOptions extends Partial<Timing> {
  /** Force-release a lock held by someone else first (recorded in the audit log). */
  force?: boolean;
  clientId?: string;
}

/**
 * Removes a staging area: takes its lock, then releases it with destroy. Refused (ELOCKED) while
 * someone else holds it or a lock below it, unless `force`.
 */
export async function destroy(staticDir: string, tag: string, options: DestroyOptions = {}): Promise<void> {
  const timing = clampTiming(options);
  const area = await resolveArea(staticDir, tag);
  if (!area.exists) throw new StagingError('ENOENT', `There is no staging area ${area.dir}.`, { path: area.dir });
  const lst = await fs.promises.lstat(area.dir);
  if (lst.isSymbolicLink()) {
    throw new StagingError('EBADTAG', `${area.dir} is a symbolic link; destroy the area it points to instead.`, { path: area.dir });
  }
  if (options.force === true) {
    const { info } = await judgeLock(area, timing, Date.now() + (await fsClockSkew(area.realStaticDir)));
    if (info.state === 'held' || info.state === 'legacy') await forceRelease(staticDir, tag, options);
  }
  const lease = await acquire(staticDir, tag, { ...timing, createOnce: false, purpose: 'destroy', ...(options.clientId !== undefined ? { clientId: options.clientId } : {}) });
  // Recorded before it happens, under the lock: a destroy that cannot be recorded does not happen.
  const entry = { action: 'destroy', tag: area.tag } as const;
  try {
    await recordIntent(area.staticDir, entry, options.clientId);
  } catch (err) {
    await lease.release().catch(() => undefined);
    throw err;
  }
  try {
    // With force, clear locks below it too, so release-with-destroy does not refuse.
    for (let n = 0; options.force === true && n < 1_000; n++) {
      const nested = await findHeldInside(area.dir, timing);
      if (nested === undefined) break;
      await forceRelease(staticDir, path.relative(area.staticDir, nested.dir), options).catch(() => undefined);
    }
    await lease.release({ destroy: true });
  } catch (err) {
    await recordFailure(area.staticDir, entry, err, options.clientId);
    throw err;
  }
}
