/**
 * A lock that lasts as long as the command run under it (`lock TAG -- COMMAND`), even when the
 * process holding it is killed: flock(1)'s lock is an open file that the command inherits, so it
 * lives as long as the command does; ours is a directory, so the command's pid, process group and
 * start time are recorded beside the holder record, and a judge on this machine counts the lock
 * as held while either the holder or the command's process group runs.
 *
 * The record is a file of its own rather than a field of `owner.json`: the holder tells its own
 * lock from a replacement by comparing `owner.json` byte for byte, so that file is never rewritten.
 * It lives in the holder's work directory, made with the lock, because creating or removing a file
 * in the lock directory itself would move the lock's mtime, its heartbeat, and the holder would
 * take that for someone else touching its lock.
 */
import * as fs from 'fs';
import * as path from 'path';
import { errnoCode } from '../base/errors';
import { isHolderAlive, isPidAlive, parseObject, procStat, thisMachine } from '../base/holder';
import { createRecordSync, readRecordSync } from '../fs/anchored';
import { COMMAND_FILE, WORK_PREFIX } from '../base/protocol';
import type { CommandRecord, Holder } from '../base/types';

/** A command record is a few dozen bytes; anything larger is not one. */
const MAX_RECORD_BYTES = 4_096;

/** Reads a small record without following a link or blocking on a FIFO; undefined if it cannot. */
function readSmallFile(p: string): string | undefined {
  try {
    return readRecordSync(p, p, MAX_RECORD_BYTES);
  } catch {
    return undefined;
  }
}

export function parseCommandRecord(text: string): CommandRecord | undefined {
  const r = parseObject(text);
  if (r === undefined) return undefined;
  const isPid = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v > 0;
  if (!isPid(r.pid) || typeof r.token !== 'string') return undefined;
  const rec: CommandRecord = { pid: r.pid, token: r.token };
  if (isPid(r.pgid)) rec.pgid = r.pgid;
  if (typeof r.processStart === 'string') rec.processStart = r.processStart;
  return rec;
}

/** The command record of the lock at `lockPath`, if it belongs to `holder`'s lock instance. */
export function readCommandRecord(lockPath: string, holder: Pick<Holder, 'token'>): CommandRecord | undefined {
  if (holder.token === '') return undefined;
  const text = readSmallFile(path.join(lockPath, `${WORK_PREFIX}${holder.token}`, COMMAND_FILE));
  const rec = text === undefined ? undefined : parseCommandRecord(text);
  return rec !== undefined && rec.token !== '' && rec.token === holder.token ? rec : undefined;
}

/**
 * Whether any process of group `pgid` runs. Zombies do not count: where the init process does not
 * reap orphans (some containers), a command that exited stays a zombie in its group for good.
 */
export function isGroupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (err) {
    // EPERM: the group exists but belongs to another user; its members cannot be looked at closer.
    return errnoCode(err) === 'EPERM';
  }
  let names: string[];
  try {
    names = fs.readdirSync('/proc');
  } catch {
    return true; // no /proc: the signal's answer stands
  }
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const st = procStat(Number(name));
    if (st !== undefined && st.pgrp === pgid && st.state !== 'Z' && st.state !== 'X') return true;
  }
  return false;
}

/**
 * For a command of a holder on this machine: does it, or its process group, still run?
 * A pid alive with another start time was reused, which the kernel does only once the group it
 * led is empty.
 */
export function isCommandAlive(rec: CommandRecord, holder: Pick<Holder, 'bootId'>): boolean {
  const m = thisMachine();
  if (holder.bootId !== undefined && m.bootId !== undefined && holder.bootId !== m.bootId) return false;
  const stat = procStat(rec.pid);
  if (stat !== undefined && rec.processStart !== undefined && stat.start !== rec.processStart) return false;
  if (stat === undefined ? isPidAlive(rec.pid) && rec.processStart === undefined : stat.state !== 'Z' && stat.state !== 'X') return true;
  return rec.pgid !== undefined && isGroupAlive(rec.pgid);
}

/** The lock is held on this machine while its holder or the command it runs is alive. */
export function isLockAlive(holder: Holder, lockPath: string): { holderAlive: boolean; command?: CommandRecord; commandAlive?: boolean } {
  if (isHolderAlive(holder)) return { holderAlive: true };
  const command = readCommandRecord(lockPath, holder);
  if (command === undefined) return { holderAlive: false };
  return { holderAlive: false, command, commandAlive: isCommandAlive(command, holder) };
}

/**
 * The command record of a lock this process holds, in the holder's work directory named through
 * the lock (`devserver.lock/work.<token>/command.json`): if the lock is lost and another takes the
 * place, that name leads nowhere and nothing done here reaches the new lock.
 */
export class CommandRecordFile {
  private constructor(private readonly file: string) {}

  static forWorkDir(workDir: string): CommandRecordFile {
    return new CommandRecordFile(`${workDir}/${COMMAND_FILE}`);
  }

  /** Creates the record, readable by every judge whatever our umask; never through a link, never over a file. */
  write(rec: CommandRecord): void {
    createRecordSync(this.file, `${JSON.stringify(rec)}\n`, 0o644);
  }

  /** Removes the record (the command has ended). */
  close(): void {
    try {
      fs.unlinkSync(this.file);
    } catch {
      /* never written, or the lock was taken over and its work directory deleted */
    }
  }
}
