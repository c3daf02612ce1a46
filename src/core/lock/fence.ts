/**
 * The fencing token: per area, a number that grows from one holder to the next, never handed out
 * twice, whatever the clients of a network filesystem cache.
 *
 * The counter is the directory `<area>/.devserver-staging.fence/` holding one entry whose NAME is
 * the number (an empty file named `42`). Its value is never taken from what a read returns: a
 * network client may answer a listing, a link's text or a file's bytes from its cache (sshfs for
 * 20 s, NFS for up to a minute), and two hosts would then both hand out the same next number. A
 * holder advances the counter by *consuming* the name: it renames `<counter>/42` into its own work
 * directory (`devserver.lock/work.<token>/fence.42`, named through the lock), and the file server
 * lets exactly one rename of a name succeed. So what a listing says is only a hint: a stale one
 * makes the rename fail, and the holder looks again. Then it publishes `43` (the same file renamed
 * out of its work directory) and 43 is its token. Both renames name the work directory through the
 * lock, so a holder whose lock was taken away can neither consume nor publish (the fence).
 *
 * A holder proposes its token in its owner record before its lock exists (the hint + 1); if the
 * counter turns out to be elsewhere once the lock is its own, it lets the lock go and tries again.
 * A holder that loses its lock between consuming and publishing leaves the number in its work
 * directory (`fence.42`); whoever removes that work directory (a takeover, a force-release, the
 * clearing of a dead holder's litter) puts the number back first (`restoreCarriers`).
 *
 * The counter only grows, even against one planted lower: a holder starts from the greatest
 * number the area still records where it is cheap to look (every name in the counter, the token
 * of the last staging, kept in `staged.timestamp`), and where there is no counter at all (a new
 * area, one destroyed and made again, one whose counter was removed) also from the area's history.
 * Earlier builds kept the counter in a symbolic link (or a regular file) of the same name; its
 * number is taken over the first time such an area is locked.
 */
import * as path from 'path';
import type { Dir } from '../fs/anchored';
import { randomHex } from '../base/crypto';
import { StagingError, asStagingError, errnoCode } from '../base/errors';
import type { Io } from '../fs/io';
import { FENCE_FILE, TIMESTAMP_FILE } from '../base/protocol';
import { step } from '../base/steps';
import { dropCachedListing } from '../fs/fresh';

/** Inside a work directory: the counter in flight, `fence.<n>`, between consuming and publishing. */
export const CARRIER_PREFIX = 'fence.';

/** The greatest token handed out: above it, the next could not be told from it. */
export const MAX_TOKEN = Number.MAX_SAFE_INTEGER - 1;

/** Made and removed at once in the counter, on a network filesystem, to drop a client's cached listing of it. */
const PROBE_PREFIX = 'probe.';

/** How often a holder looks again when the counter moves under it; more means something is wrong. */
const MAX_LOOKS = 20;

/** The number a counter's entry names, if it names one: decimal digits, no sign, no leading zero. */
export function parseCount(name: string): number | undefined {
  if (!/^(0|[1-9][0-9]{0,15})$/.test(name)) return undefined;
  const n = Number(name);
  return Number.isSafeInteger(n) ? n : undefined;
}

/** What a look at the counter found. Only a hint: see above. */
export interface CounterLook {
  /** 'dir': the counter as this version keeps it; 'legacy': an earlier build's link or file; 'absent': none. */
  kind: 'dir' | 'legacy' | 'absent';
  /** The greatest number found (the legacy counter's number), if any. */
  value?: number;
  /** Every number in the directory, for clearing those below the token. */
  names: number[];
}

function counterError(shown: string, what: string): StagingError {
  return new StagingError(
    'EIO',
    `The fencing counter ${shown} ${what}. Remove it (rm -r '${shown}'); the next holder starts a new count above every token the area still records.`,
    { path: shown },
  );
}

/** An earlier build's counter: the number in a symbolic link's text or in a small regular file. */
async function readLegacy(io: Io, p: string, shown: string, isLink: boolean): Promise<number> {
  let text: string;
  try {
    text = isLink ? await io.readlink(p) : await io.readRecord(p, shown, 64);
  } catch (err) {
    throw asStagingError(err, 'read the fencing counter', shown);
  }
  const n = parseCount(text.trim());
  // Not a number is no counter anyone can trust: count above it from what else the area records.
  return n ?? 0;
}

/**
 * Looks at the counter of `area`. `fresh`: on a network filesystem, first make and remove a probe
 * in it, which drops the client's cached listing, so the listing comes from the server.
 */
export async function lookAtCounter(io: Io, area: Dir, shownArea: string, fresh = false): Promise<CounterLook> {
  const p = area.at(FENCE_FILE);
  const shown = path.join(shownArea, FENCE_FILE);
  const st = await io.lstatOrNull(p);
  if (st === null) return { kind: 'absent', names: [] };
  if (st.isSymbolicLink()) return { kind: 'legacy', value: await readLegacy(io, p, shown, true), names: [] };
  if (st.isFile()) return { kind: 'legacy', value: await readLegacy(io, p, shown, false), names: [] };
  if (!st.isDirectory()) throw counterError(shown, 'is neither a directory nor a number this tool wrote');
  if (fresh && !io.sync) await dropCachedListing(p, `${PROBE_PREFIX}${process.pid}.${randomHex(4)}`);
  let entries: string[];
  try {
    entries = await io.readdir(p);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return { kind: 'absent', names: [] };
    throw asStagingError(err, 'read the fencing counter', shown);
  }
  const names: number[] = [];
  let value: number | undefined;
  for (const name of entries) {
    const n = parseCount(name);
    if (n === undefined) continue;
    names.push(n);
    if (value === undefined || n > value) value = n;
  }
  return value === undefined ? { kind: 'dir', names } : { kind: 'dir', value, names };
}

/**
 * The token of the area's last staging, as `staged.timestamp` records it (0 when it records none:
 * missing, empty as the Python devserver leaves it, or not a number).
 */
export async function stagedToken(io: Io, area: Dir, shownArea: string): Promise<number> {
  try {
    return parseCount((await io.readRecord(area.at(TIMESTAMP_FILE), path.join(shownArea, TIMESTAMP_FILE), 64)).trim()) ?? 0;
  } catch {
    return 0;
  }
}

/** Where the counter's entries and the carriers in a work directory are reached. */
export interface FenceContext {
  io: Io;
  /** The area, opened. */
  area: Dir;
  /** The area's path, for messages. */
  shownArea: string;
  /** The greatest token the area records elsewhere than in its counter (see `stagedToken`). */
  floor: number;
  /**
   * Further records, asked only when the area has no counter at all (what its destroys kept, its
   * history). `fresh`: read past what a network client cached, for the number a token is settled on.
   */
  recordedElsewhere?: (fresh: boolean) => Promise<number>;
}

/** The proposal a holder builds into its lock: one above everything it can see. */
export async function proposeToken(ctx: FenceContext): Promise<number> {
  const look = await lookAtCounter(ctx.io, ctx.area, ctx.shownArea);
  let base = Math.max(look.value ?? 0, ctx.floor);
  if (look.kind === 'absent' && ctx.recordedElsewhere !== undefined) base = Math.max(base, await ctx.recordedElsewhere(false));
  return base + 1;
}

function coded(code: string, message: string, extra: Record<string, unknown> = {}): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code }, extra);
}

/**
 * Makes the counter hand out `proposal` to the holder whose work directory is `work` (its name
 * below the area, through the lock: `devserver.lock/work.<token>`). Returns the token. Throws:
 * - ERETRY (with `hint`, the number the counter holds) when the proposal is not the next number:
 *   the holder lets its lock go and proposes `hint + 1`;
 * - ELOST when the work directory is gone: the lock was taken away;
 * - a StagingError for a counter that cannot be used (not a directory, at the top of its range).
 */
export async function settleToken(ctx: FenceContext, work: string, proposal: number): Promise<number> {
  const { io, area } = ctx;
  const shown = path.join(ctx.shownArea, FENCE_FILE);
  const lost = (): NodeJS.ErrnoException => coded('ELOST', `${path.join(ctx.shownArea, work)} is gone: the lock was taken away`);
  const workThere = async (): Promise<boolean> => (await io.lstatOrNull(area.at(work)).catch(() => null)) !== null;
  for (let looks = 0; looks < MAX_LOOKS; looks++) {
    // On a local filesystem every look is the filesystem's own answer; elsewhere the first may be
    // a client's cached one, and a failed rename sends the holder to look past the cache.
    const look = await lookAtCounter(io, area, ctx.shownArea, looks > 0);
    let carrier: number;
    try {
      if (look.kind === 'dir' && look.value !== undefined) {
        carrier = look.value;
        await io.rename(area.at(`${FENCE_FILE}/${carrier}`), area.at(`${work}/${CARRIER_PREFIX}${carrier}`));
      } else if (look.kind === 'legacy') {
        carrier = look.value ?? 0;
        await io.rename(area.at(FENCE_FILE), area.at(`${work}/${CARRIER_PREFIX}${carrier}`));
      } else {
        // No counter at all. Decided on a look the server answered: a listing a client cached may
        // miss a counter made meanwhile by another host, and the token kept by a destroy through
        // another host (the count starts above it).
        if (!io.sync && looks === 0) continue;
        carrier = Math.max(ctx.floor, (await ctx.recordedElsewhere?.(!io.sync)) ?? 0);
        await io.writeNewFile(area.at(`${work}/${CARRIER_PREFIX}${carrier}`), '', 0o644);
      }
    } catch (err) {
      const code = errnoCode(err);
      if (code === 'ENOENT' || code === 'ENOTDIR') {
        if (!(await workThere())) throw lost();
        continue; // the counter moved since the look: look again, past the cache
      }
      if (code === 'EEXIST' && !(await workThere())) throw lost();
      throw asStagingError(err, 'take the fencing counter', shown);
    }
    step('settle.consumed');
    if (look.kind !== 'dir') await makeCounterDir(io, area, shown);
    // The counter is ours now. Publish the next number, or put it back as it was.
    if (carrier >= proposal) {
      // Another holder got the proposed token (or a greater one) since the proposal was made.
      await publish(ctx, work, carrier, carrier);
      throw coded('ERETRY', `${shown}: the counter is at ${carrier}, not below the proposed token ${proposal}`, { hint: carrier });
    }
    if (proposal > MAX_TOKEN) {
      await publish(ctx, work, carrier, carrier);
      throw counterError(shown, `is at ${carrier}, the greatest token this tool can hand out`);
    }
    await publish(ctx, work, carrier, proposal);
    step('settle.published');
    // Numbers below ours are a co-user's or a killed holder's leftovers: they would only slow looks.
    for (const n of look.names) {
      if (n < proposal && n !== carrier) await io.unlink(area.at(`${FENCE_FILE}/${n}`)).catch(() => undefined);
    }
    return proposal;
  }
  throw new StagingError('EIO', `The fencing counter ${shown} kept changing while this process took its token; try again.`, { path: shown });
}

/**
 * Makes the counter's directory where there is none, with the area's write bits (and no sticky
 * bit: whoever holds the lock next renames the entry another user made), whatever the umask.
 */
async function makeCounterDir(io: Io, area: Dir, shown: string): Promise<void> {
  try {
    await io.mkdir(area.at(FENCE_FILE));
  } catch (err) {
    if (errnoCode(err) === 'EEXIST') return;
    throw asStagingError(err, 'make the fencing counter', shown);
  }
  await io.chmod(area.at(FENCE_FILE), 0o755 | (area.mode & 0o022)).catch(() => undefined);
}

/** Renames the carrier `fence.<from>` out of the work directory into the counter as `<to>`. */
async function publish(ctx: FenceContext, work: string, from: number, to: number): Promise<void> {
  try {
    await ctx.io.rename(ctx.area.at(`${work}/${CARRIER_PREFIX}${from}`), ctx.area.at(`${FENCE_FILE}/${to}`));
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') throw coded('ELOST', `${path.join(ctx.shownArea, work)} is gone: the lock was taken away`);
    throw asStagingError(err, 'write the fencing counter', path.join(ctx.shownArea, FENCE_FILE));
  }
}

/**
 * Puts back the counter a holder took into its work directory and never published: every
 * `fence.<n>` in the directory `dir` (named below the area) goes back into the counter as `<n>`.
 * (The holder's token was never handed out: it is only its own once published.) Each is one
 * rename of a name only that directory has, so of several processes doing this at once exactly
 * one moves it.
 */
export async function restoreCarriers(io: Io, area: Dir, dir: string): Promise<void> {
  let names: string[];
  try {
    names = await io.readdir(area.at(dir));
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith(CARRIER_PREFIX)) continue;
    const n = parseCount(name.slice(CARRIER_PREFIX.length));
    if (n === undefined) continue;
    await makeCounterDir(io, area, FENCE_FILE).catch(() => undefined);
    await io.rename(area.at(`${dir}/${name}`), area.at(`${FENCE_FILE}/${n}`)).catch(() => undefined);
  }
}

/**
 * Raises the counter to at least `token`, for one who removes a lock that is not its own: that
 * lock's token is never handed out again, even where its counter was set back meanwhile. Renames
 * the number found to `token`; a look a client cached makes the rename fail, and it looks again.
 */
export async function raiseCounter(io: Io, area: Dir, shownArea: string, token: number): Promise<void> {
  if (token <= 0 || token > MAX_TOKEN) return;
  for (let looks = 0; looks < MAX_LOOKS; looks++) {
    const look = await lookAtCounter(io, area, shownArea, looks > 0);
    if ((look.value ?? 0) >= token) return;
    try {
      if (look.kind === 'dir' && look.value !== undefined) await io.rename(area.at(`${FENCE_FILE}/${look.value}`), area.at(`${FENCE_FILE}/${token}`));
      else if (look.kind === 'dir') await io.writeNewFile(area.at(`${FENCE_FILE}/${token}`), '', 0o644);
      // No counter of this version: the next holder starts above what the area records, that lock's token among them.
      else return;
      return;
    } catch (err) {
      const code = errnoCode(err);
      if (code !== 'ENOENT' && code !== 'EEXIST') throw asStagingError(err, 'raise the fencing counter', path.join(shownArea, FENCE_FILE));
    }
  }
}
