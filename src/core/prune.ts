/**
 * Removing the least recently used staged builds of a static directory (`prune`), as `usage`
 * measures them, without ever touching one that someone holds.
 */
import * as fs from 'fs';
import * as path from 'path';
import { fsClockSkew } from './fs/clock';
import { freshStat } from './fs/fresh';
import { formatDuration, printable } from './base/format';
import { asStagingError, isStagingError } from './base/errors';
import { inspect } from './lock/inspect';
import type { HistoryOptions } from './log/history';
import { describeHolder } from './lock/refusals';
import { TIMESTAMP_FILE, clampTiming } from './base/protocol';
import { destroy } from './remove';
import { parseTag, resolveStaticDir } from './fs/tags';
import type { LockInfo, LockState, Timing } from './base/types';
import { tagOf, usage, type AreaUsage } from './usage';

/** Which rule selected an area for removal. */
export type PruneRule = 'keep' | 'older-than';

export interface PruneOptions extends Partial<Timing>, HistoryOptions {
  /** Keep this many most recently used areas; the rest are selected. */
  keep?: number;
  /** Select areas last used longer ago than this many milliseconds. */
  olderThan?: number;
  /** Decide and report, remove nothing. */
  dryRun?: boolean;
  /** Prune only below this directory of the static directory. */
  subpath?: string;
  clientId?: string;
  /** Directories read at once while measuring. */
  concurrency?: number;
  /**
   * There is no force: an area someone holds (or held, for a stale or legacy lock) is never
   * pruned. Use `destroy` with `force` for one area whose holder is known to be gone.
   */
  force?: never;
  /**
   * Remove only these areas, as a preview (a dry run) showed them to the user: each only while it
   * is still free and last used when it was then. An area chosen now that is not among them, or
   * that changed, is left in place (in `skipped`, saying why).
   */
  expect?: readonly Pick<PruneCandidate, 'tag' | 'lastUsedMs'>[];
}

export interface PruneCandidate extends AreaUsage {
  /** The rules that selected it (both when both did). */
  rules: PruneRule[];
  /** Why it was selected, for people: "last used 40 d ago (limit 30 d)". */
  reason: string;
}

export interface PruneSkipped extends PruneCandidate {
  /** Why it was left in place: who holds it, or that it was used while pruning. */
  skippedBecause: string;
  /** Left because `expect` did not name it as it is now (it was not shown, or was used since), not for a lock. */
  unshown?: true;
}

export interface PruneFailed extends PruneCandidate {
  error: { code: string; message: string };
}

export interface PruneResult {
  dryRun: boolean;
  /** Removed, least recently used first (with `dryRun`: what would be removed). */
  removed: PruneCandidate[];
  /** Selected but left in place: held, stale, legacy, or used meanwhile. */
  skipped: PruneSkipped[];
  /** Selected, free, but removing failed; the others were still tried. */
  failed: PruneFailed[];
  /** Bytes of the removed areas. */
  bytes: number;
}

/** A limit as given: "36 h", not a rounded "2 d". */
function exactly(ms: number): string {
  if (ms % 86_400_000 === 0) return `${ms / 86_400_000} d`;
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  return `${Math.round(ms / 1000)} s`;
}

function checkCount(name: string, value: number | undefined): void {
  if (value !== undefined && !(Number.isInteger(value) && value >= 0)) {
    throw new RangeError(`prune: ${name} must be a whole number of at least 0, not ${String(value)}.`);
  }
}

/**
 * Removes the least recently used staging areas: those beyond the `keep` most recently used, and
 * those last used more than `olderThan` ms ago. With both, an area goes when either rule selects
 * it (each rule is a limit the static directory must stay within); with neither, nothing is
 * selected. Areas whose lock is held, stale or legacy are never removed: a stale lock's holder
 * may be a machine that comes back, and a legacy lock's holder cannot be judged at all.
 * Each removal goes through `destroy`, which takes the area's lock (so an area taken meanwhile is
 * refused, not removed) and writes the audit log. A failed removal does not stop the others; it
 * is reported in `failed`.
 */
export async function prune(staticDir: string, options: PruneOptions = {}): Promise<PruneResult> {
  checkCount('keep', options.keep);
  if (options.olderThan !== undefined && !(Number.isFinite(options.olderThan) && options.olderThan >= 0)) {
    throw new RangeError(`prune: olderThan must be a number of milliseconds of at least 0, not ${String(options.olderThan)}.`);
  }
  const timing = clampTiming(options);
  const dryRun = options.dryRun === true;
  const areas = await usage(staticDir, {
    ...timing,
    ...(options.subpath !== undefined ? { subpath: options.subpath } : {}),
    ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
  });
  const { staticDir: root, realStaticDir, io } = await resolveStaticDir(staticDir);
  const nowFs = Date.now() + (await fsClockSkew(realStaticDir));

  // Most recently used first; ties by tag so the choice does not depend on the walk's order. The
  // areas come in tag order and the sort is stable, so the ties keep it.
  const ranked = [...areas].sort((a, b) => b.lastUsedMs - a.lastUsedMs);
  const selected: PruneCandidate[] = [];
  ranked.forEach((area, rank) => {
    const rules: PruneRule[] = [];
    const reasons: string[] = [];
    if (options.keep !== undefined && rank >= options.keep) {
      rules.push('keep');
      reasons.push(`not among the ${options.keep} most recently used (#${rank + 1})`);
    }
    if (options.olderThan !== undefined && area.lastUsedMs < nowFs - options.olderThan) {
      rules.push('older-than');
      reasons.push(`last used ${formatDuration(nowFs - area.lastUsedMs)} ago (limit ${exactly(options.olderThan)})`);
    }
    if (rules.length > 0) selected.push({ ...area, rules, reason: reasons.join('; ') });
  });
  selected.reverse(); // least recently used first

  const result: PruneResult = { dryRun, removed: [], skipped: [], failed: [], bytes: 0 };
  const skip = (c: PruneCandidate, because: string): void => void result.skipped.push({ ...c, skippedBecause: because });
  const shown = options.expect === undefined ? undefined : new Map(options.expect.map((e) => [e.tag, e.lastUsedMs]));
  for (const candidate of selected) {
    const unnamed = unlockable(candidate.tag);
    if (unnamed !== undefined) {
      skip(candidate, unnamed);
      continue;
    }
    if (candidate.state !== 'free') {
      skip(candidate, heldBecause(candidate.state, candidate.lock));
      continue;
    }
    if (shown !== undefined && (!shown.has(candidate.tag) || shown.get(candidate.tag) !== candidate.lastUsedMs)) {
      const because = shown.has(candidate.tag) ? 'it was used since it was shown to be removed' : 'it was not among the builds shown to be removed';
      result.skipped.push({ ...candidate, skippedBecause: because, unshown: true });
      continue;
    }
    if (dryRun) {
      result.removed.push(candidate);
      result.bytes += candidate.bytes;
      continue;
    }
    try {
      // Look again just before: the walk may be minutes old on a large static directory.
      const now = await inspect(root, candidate.tag, timing);
      if (!now.exists) continue; // removed by someone else meanwhile: nothing left to prune
      if (now.state !== 'free') {
        skip(candidate, heldBecause(now.state, now));
        continue;
      }
      // On a network filesystem, from the server: another host may have staged to it since this
      // client cached it.
      const stamp = io.sync ? await fs.promises.lstat(path.join(candidate.dir, TIMESTAMP_FILE)).catch(() => undefined) : await freshStat(candidate.dir, TIMESTAMP_FILE, realStaticDir);
      if (stamp !== undefined && stamp.mtimeMs > candidate.lastUsedMs) {
        skip(candidate, 'it was staged to again while pruning');
        continue;
      }
      await destroy(root, candidate.tag, {
        ...timing,
        onlyStaged: true,
        // Free when chosen: a lock found there now (a stale one too) is someone's, and kept.
        expect: { state: 'free' },
        ...(options.clientId !== undefined ? { clientId: options.clientId } : {}),
        ...(options.warn !== undefined ? { warn: options.warn } : {}),
      });
      result.removed.push(candidate);
      result.bytes += candidate.bytes;
    } catch (err) {
      if (isStagingError(err, 'ELOCKED')) {
        const lock = err.lock;
        if (lock === undefined) skip(candidate, err.facts);
        // destroy refuses an area with a lock held somewhere inside it, too.
        else if (lock.dir !== candidate.dir) skip(candidate, `${printable(tagOf(root, lock.dir))} inside it is held by ${describeHolder(lock)}`);
        else skip(candidate, heldBecause(lock.state, lock));
      } else if (isStagingError(err, 'ENOENT')) {
        continue;
      } else {
        const e = asStagingError(err, 'remove', candidate.dir);
        result.failed.push({ ...candidate, error: { code: e.code, message: e.message } });
      }
    }
  }
  return result;
}

/**
 * Why an area cannot be removed by its name (a control character, bytes that are not UTF-8: see
 * `parseTag`), or undefined when it can. Such an area is shown, and left for a person to remove.
 */
function unlockable(tag: string): string | undefined {
  try {
    parseTag(tag);
    return undefined;
  } catch (err) {
    return `its name cannot be locked by this tool (${isStagingError(err) ? err.message : String(err)})`;
  }
}

function heldBecause(state: LockState, lock: LockInfo | undefined): string {
  const who = lock !== undefined ? describeHolder(lock) : 'another process';
  if (state === 'stale') return `its lock by ${who} is stale; kept in case its holder comes back (destroy it by its tag if it will not)`;
  if (state === 'legacy') return `it is locked by ${who}`;
  return `it is held by ${who}`;
}
