/**
 * Reading a lock and deciding its state: free, held, stale or legacy.
 */
import * as fs from 'fs';
import * as path from 'path';
import { isWithin, openDir, readRecord, whereIs, type Dir } from '../fs/anchored';
import { randomHex } from '../base/crypto';
import { asStagingError, errnoCode } from '../base/errors';
import { printable, printableTime } from '../base/format';
import { isOnThisMachine, parseHolder } from '../base/holder';
import { cachesAttributes, lstatOf, statOf } from '../fs/io';
import { isLockAlive } from './lifetime';
import { judgeReservation } from './reservation';
import { probesAllowed } from '../base/probes';
import { LOCK_NAME, LOCK_PROBE_PREFIX, MAX_OWNER_BYTES, OWNER_FILE, WORK_PREFIX, thresholdOf } from '../base/protocol';
import { decodeName, fsPath } from '../base/rawNames';
import type { Area } from '../fs/tags';
import type { Holder, LegacyHolder, LockInfo, Timing } from '../base/types';

/** What identifies one lock instance, so a takeover removes the lock it judged and no later one. */
export interface LockIdentity {
  /** As this client numbers it: good for this process's own looks, never across hosts. */
  ino: number;
  mtimeMs: number;
  token?: string;
  isDirectory: boolean;
  /** Whether the lock holds its holder's work directory `work.<token>`: then it is taken apart by that name (unlock.ts). */
  hasWork?: boolean;
}

export interface Judged {
  info: LockInfo;
  /** Absent when the lock is free. */
  identity?: LockIdentity;
}

export function lockPathOf(dir: string): string {
  return path.join(dir, LOCK_NAME);
}

function baseInfo(area: Pick<Area, 'staticDir' | 'tag' | 'dir'>, exists: boolean): LockInfo {
  return { staticDir: area.staticDir, tag: area.tag, dir: area.dir, lockPath: lockPathOf(area.dir), exists, state: 'free' };
}

/**
 * Reads the lock of one area and judges it. `nowFsMs` is the current time by the filesystem's
 * clock. `st` may be passed when the caller already has the lock's lstat (list does).
 * `recheck`: before calling a lock stale for its heartbeat, look again past a network client's
 * attribute cache (see `lstatAnew`). `area.opened`: the area as the caller opened it; the lock
 * is then read there (the one the caller will act on), not through a path that can be re-pointed.
 */
export async function judgeLock(
  area: Pick<Area, 'staticDir' | 'tag' | 'dir'> & { opened?: Dir },
  timing: Timing,
  nowFsMs: number,
  st?: fs.Stats | null,
  recheck = true,
): Promise<Judged> {
  // For messages the lock's path; for reading it, where the caller's opened area has it.
  const shownLock = lockPathOf(area.dir);
  const lockPath = area.opened?.at(LOCK_NAME) ?? shownLock;
  const areaPath = area.opened?.at('.') ?? area.dir;
  const lookedAt = Date.now();
  if (st === undefined) {
    try {
      st = await lstatOf(lockPath);
    } catch (err) {
      const code = errnoCode(err);
      if (code === 'ENOENT') st = null;
      else if (code === 'ENOTDIR') return { info: baseInfo(area, false) };
      else throw asStagingError(err, 'read the lock', shownLock);
    }
  }
  if (st === null) {
    const exists = await statOf(areaPath).then(
      (s) => s.isDirectory(),
      () => false,
    );
    return { info: baseInfo(area, exists) };
  }
  const info = baseInfo(area, true);
  const heartbeatAgeMs = Math.max(0, nowFsMs - st.mtimeMs);
  info.heartbeatAgeMs = heartbeatAgeMs;
  info.lockId = lockIdOf(st);
  const identity: LockIdentity = { ino: st.ino, mtimeMs: st.mtimeMs, isDirectory: st.isDirectory() };

  if (!st.isDirectory()) {
    // The Python devserver's lockfile.FileLock: a hard link to a unique file. Never ours to judge stale.
    info.state = 'legacy';
    info.ageMs = heartbeatAgeMs;
    info.legacy = await readLegacyHolder(areaPath, st);
    return { info, identity };
  }

  const record = await readOwnerRecord(lockPath, shownLock);
  if (record.unreadable !== undefined) {
    // A record that is there but cannot be read (another user's umask, a FIFO, garbage) says
    // nothing about its holder: never steal on a guess.
    info.state = 'held';
    info.unreadable = record.unreadable;
    return { info, identity };
  }
  const holder = record.holder;
  if (record.workToken !== undefined) {
    // Being taken apart (unlock.ts): it is that work directory's instance, taken apart on by its name.
    identity.token = record.workToken;
    identity.hasWork = true;
  }
  if (holder !== undefined) {
    info.holder = holder;
    if (holder.token !== '' && record.workToken === undefined) {
      identity.token = holder.token;
      identity.hasWork = await lstatOf(`${lockPath}/${WORK_PREFIX}${holder.token}`).then(() => true, () => false);
    }
    const acquired = Date.parse(holder.acquiredAt);
    if (Number.isFinite(acquired)) info.ageMs = Math.max(0, nowFsMs - acquired);
  }
  // A reservation lasts until its end, whatever its (long gone) process or heartbeat say.
  const reservation = holder?.reservedUntil !== undefined ? await judgeReservation(lockPath, holder, nowFsMs) : undefined;
  if (reservation !== undefined) {
    info.reservation = reservation;
    info.state = reservation.ended ? 'stale' : 'held';
    if (reservation.ended) info.staleReason = `its reservation ended at ${printableTime(reservation.until)}`;
    return { info, identity };
  }
  // Honour the holder's own threshold when it is longer: it refreshes on its schedule, not ours.
  const threshold = thresholdOf(timing, holder?.staleMs);
  if (holder !== undefined && isOnThisMachine(holder)) {
    const { holderAlive: alive, command, commandAlive } = isLockAlive(holder, lockPath);
    info.holderAlive = alive;
    if (command !== undefined) {
      info.command = command;
      info.commandAlive = commandAlive === true;
    }
    // The command run under the lock outlives a killed holder: the lock lasts as long as it does,
    // whatever the heartbeat (which stopped with the holder).
    if (commandAlive === true) {
      info.state = 'held';
      return { info, identity };
    }
    if (!alive) {
      info.state = 'stale';
      info.staleReason =
        command === undefined
          ? `its holder (pid ${holder.pid} on ${printable(holder.hostname)}) is no longer running`
          : `its holder (pid ${holder.pid} on ${printable(holder.hostname)}) and the command it ran (pid ${command.pid}) are no longer running`;
      return { info, identity };
    }
  }
  if (heartbeatAgeMs > threshold) {
    const fresh = recheck ? await lstatAnew(area, lockPath, lookedAt) : undefined;
    if (fresh !== undefined && (fresh === null || fresh.ino !== st.ino || fresh.mtimeMs !== st.mtimeMs)) {
      return judgeLock(area, timing, nowFsMs + (Date.now() - lookedAt), fresh, false);
    }
    info.state = 'stale';
    info.staleReason = `no heartbeat for ${Math.round(heartbeatAgeMs / 1000)} s (stale after ${Math.round(threshold / 1000)} s)`;
  } else {
    info.state = 'held';
  }
  return { info, identity };
}

/**
 * A lock's owner record: the holder, nothing (no record: a bare lock of another tool, judged by
 * its heartbeat), or why a record that is there cannot be read.
 */
async function readOwnerRecord(lockPath: string, shownLock: string): Promise<OwnerRecord> {
  const file = path.join(shownLock, OWNER_FILE);
  let text: string;
  try {
    text = await readRecord(`${lockPath}/${OWNER_FILE}`, file, MAX_OWNER_BYTES);
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT' || code === 'ENOTDIR') return code === 'ENOENT' ? await readMovedRecord(lockPath, shownLock) : {};
    if (code === 'EACCES' || code === 'EPERM') return { unreadable: `its holder record ${file} cannot be read by this user (permission denied), so it is taken as held` };
    return { unreadable: `its holder record ${file} cannot be read (${err instanceof Error ? err.message : String(err)}), so it is taken as held` };
  }
  const holder = parseHolder(text);
  if (holder === undefined) return { unreadable: `its holder record ${file} is not a valid record, so it is taken as held` };
  return { holder };
}

interface OwnerRecord {
  holder?: Holder;
  /** Why a record that is there cannot be read. */
  unreadable?: string;
  /** The lock is being taken apart: the token its one work directory is named by. */
  workToken?: string;
}

/**
 * A lock without a record in its place may be one being taken apart (unlock.ts): its holder's
 * release, or a takeover, moved the record into the instance's work directory, or removed it, and
 * was cut off there. Then the lock is still that instance, known by its one work directory, judged
 * by its heartbeat; whoever takes it over goes on from where it stopped, by that directory's name.
 */
async function readMovedRecord(lockPath: string, shownLock: string): Promise<OwnerRecord> {
  const names = await fs.promises.readdir(fsPath(lockPath)).catch(() => [] as string[]);
  const works = names.filter((n) => n.startsWith(WORK_PREFIX));
  if (works.length !== 1) return {};
  const workToken = works[0].slice(WORK_PREFIX.length);
  const text = await readRecord(`${lockPath}/${works[0]}/${OWNER_FILE}`, path.join(shownLock, works[0], OWNER_FILE), MAX_OWNER_BYTES).catch(() => undefined);
  const holder = text === undefined ? undefined : parseHolder(text);
  return holder !== undefined && holder.token === workToken ? { holder, workToken } : { workToken };
}

/** FUSE keeps attributes for 1 s by default; a little more to be past it. */
export const ATTR_CACHE_MS = 1_100;

/**
 * The lock's lstat once more, as the server has it, on filesystems whose clients cache attributes:
 * sshfs keeps each path's attributes and each directory's entries for 20 s by default, so
 * a heartbeat made through another client can look older than the stale threshold while its
 * holder lives. Making and removing an entry in the area drops what the client cached of the
 * area; once the kernel's own attribute cache (filled by the first look, at `since`) has run out,
 * reading the area fetches every entry with its attributes, and lstat gets those.
 * Undefined where there is nothing to refresh, the area cannot be written, or this process may not
 * write probes (probes.ts): the first look stands.
 */
async function lstatAnew(area: Pick<Area, 'staticDir' | 'dir'>, lockPath: string, since: number): Promise<fs.Stats | null | undefined> {
  if (!probesAllowed() || !(await cachesAttributes(area.dir))) return undefined;
  // The probe is made in the area as the kernel places it now, and only if that is still inside
  // the static directory: a judge writes nowhere else, whatever was swapped meanwhile.
  let dir: Dir;
  try {
    dir = await openDir(area.dir, true);
  } catch {
    return undefined;
  }
  try {
    const realStatic = await fs.promises.realpath(area.staticDir).catch(() => undefined);
    if (realStatic === undefined || !isWithin(realStatic, whereIs(dir))) return undefined;
    const probe = `${LOCK_PROBE_PREFIX}${process.pid}.${randomHex(4)}`;
    try {
      await fs.promises.mkdir(dir.at(probe));
    } catch {
      return undefined;
    }
    await fs.promises.rmdir(dir.at(probe)).catch(() => undefined);
  } finally {
    dir.close();
  }
  const wait = since + ATTR_CACHE_MS - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  await fs.promises.readdir(fsPath(area.dir)).catch(() => undefined);
  return fs.promises.lstat(fsPath(lockPath)).catch((err: unknown) => (errnoCode(err) === 'ENOENT' ? null : undefined));
}

/**
 * Python's LinkLockFile names its unique file `<hostname>-<threadhex>.<pid><hash>` and hard-links
 * the lock to it; the hash may be negative, which is the only case where the pid can be split off.
 */
export function parseLegacyName(name: string): Omit<LegacyHolder, 'uniqueFile'> | undefined {
  const m = /^(.*?)(?:-[0-9a-f]+)?\.(\d+)(-?\d+)?$/.exec(name);
  if (m === null || m[1] === undefined || m[1] === '') return undefined;
  const digits = `${m[2]}${m[3] ?? ''}`;
  const split = /^(\d+)-\d+$/.exec(digits);
  const out: Omit<LegacyHolder, 'uniqueFile'> = { hostname: m[1], pidAndHash: digits };
  if (split !== null) out.pid = Number(split[1]);
  return out;
}

async function readLegacyHolder(dir: string, lockStat: fs.Stats): Promise<LegacyHolder> {
  let names: string[] = [];
  try {
    names = (await fs.promises.readdir(fsPath(dir), { encoding: 'buffer' })).map(decodeName);
  } catch {
    /* unreadable: report what we can */
  }
  for (const name of names) {
    if (name === LOCK_NAME) continue;
    const parsed = parseLegacyName(name);
    if (parsed === undefined) continue;
    const st = await fs.promises.lstat(fsPath(path.join(dir, name))).catch(() => undefined);
    if (st !== undefined && st.ino === lockStat.ino && st.dev === lockStat.dev) {
      return { ...parsed, uniqueFile: name };
    }
  }
  return { hostname: 'unknown', pidAndHash: '' };
}

/**
 * Tells one lock (directory or legacy file) from a later one in the same place by what a
 * heartbeat leaves alone: inode and birth time. Cheap enough to check on every watcher event.
 */
export function lockIdOf(st: Pick<fs.Stats, 'ino' | 'birthtimeMs'>): string {
  return `${st.ino}:${st.birthtimeMs}`;
}
