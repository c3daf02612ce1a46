/**
 * Who we are, as written into a lock's owner record, and whether a recorded holder still lives.
 */
import * as fs from 'fs';
import * as os from 'os';
import { randomHex } from './crypto';
import type { Holder } from './types';

declare const __VERSION__: string | undefined;
const TOOL = `devserver-staging/${typeof __VERSION__ === 'string' ? __VERSION__ : 'dev'}`;

function readProc(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/**
 * From /proc/<pid>/stat: the state (field 3), the process group (field 5) and the start time in
 * clock ticks since boot (field 22), which tells a pid from its reuse. Undefined off Linux or
 * when the pid is gone.
 */
export function procStat(pid: number): { state: string; pgrp: number; start: string } | undefined {
  const stat = readProc(`/proc/${pid}/stat`);
  if (stat === undefined) return undefined;
  // The command name (field 2) may contain spaces and parentheses; fields after it follow the last ')'.
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return rest.length > 19 ? { state: rest[0], pgrp: Number(rest[2]), start: rest[19] } : undefined;
}

export function processStartOf(pid: number): string | undefined {
  return procStat(pid)?.start;
}

interface Machine {
  hostname: string;
  bootId?: string;
  pidNamespace?: string;
}

let machine: Machine | undefined;

/** This machine's identity, read once per process. */
export function thisMachine(): Machine {
  machine ??= {
    hostname: os.hostname(),
    ...optional('bootId', readProc('/proc/sys/kernel/random/boot_id')),
    ...optional('pidNamespace', readLink('/proc/self/ns/pid')),
  };
  return machine;
}

function readLink(p: string): string | undefined {
  try {
    return fs.readlinkSync(p);
  } catch {
    return undefined;
  }
}

function optional<K extends string>(key: K, value: string | undefined): { [P in K]?: string } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: string };
}

/** This process's pid: `process.pid` asks the kernel each time it is read. */
const PID = process.pid;

/**
 * A name for a temporary thing of ours beside a lock or record: the host and pid in it tell others
 * when it is litter of a process that died (see litter.ts).
 */
export function sideName(prefix: string): string {
  return `${prefix}${thisMachine().hostname}.${PID}.${randomHex(6)}`;
}

/** Parses a `sideName`: undefined when the name is not one. */
export function parseSideName(name: string, prefix: string): { hostname: string; pid: number } | undefined {
  if (!name.startsWith(prefix)) return undefined;
  const m = /^(.+)\.(\d+)\.[0-9a-f]{12}$/.exec(name.slice(prefix.length));
  return m === null ? undefined : { hostname: m[1], pid: Number(m[2]) };
}

/** The user name, looked up again only if the uid changes: the lookup reads the password database. */
let userCache: { uid: number | undefined; name: string } | undefined;

function currentUser(): string {
  const uid = process.getuid?.();
  if (userCache !== undefined && userCache.uid === uid) return userCache.name;
  let name: string;
  try {
    name = os.userInfo().username;
  } catch {
    name = process.env.USER ?? String(uid ?? 'unknown');
  }
  userCache = { uid, name };
  return name;
}

/** This process's start time never changes: read /proc once, not on every lock. */
let ownStart: { value: string | undefined } | undefined;

export interface HolderOptions {
  clientId?: string;
  fence?: number;
  purpose?: string;
  staleMs: number;
  refreshMs: number;
  acquiredAtMs: number;
  /** A reservation: it ends this long after `acquiredAtMs`. */
  reserveForMs?: number;
}

/** This process as the author of a record (a lock's owner record, the audit log, the history). */
export function thisProcess(clientId?: string): Pick<Holder, 'user' | 'hostname' | 'pid' | 'clientId'> {
  const hostname = thisMachine().hostname;
  return { user: currentUser(), hostname, pid: PID, clientId: clientId ?? process.env.DEVSERVER_STAGING_CLIENT_ID ?? `${hostname}:${PID}` };
}

/** The owner record this process writes when it takes a lock. */
export function makeHolder(o: HolderOptions): Holder {
  const m = thisMachine();
  const me = thisProcess(o.clientId);
  const holder: Holder = {
    pid: me.pid,
    hostname: me.hostname,
    user: me.user,
    clientId: me.clientId,
    acquiredAt: new Date(o.acquiredAtMs).toISOString(),
    token: randomHex(12),
    ...(o.fence !== undefined ? { fence: o.fence } : {}),
    staleMs: o.staleMs,
    refreshMs: o.refreshMs,
    tool: TOOL,
  };
  if (o.purpose !== undefined && o.purpose !== '') holder.purpose = o.purpose;
  if (o.reserveForMs !== undefined) holder.reservedUntil = new Date(o.acquiredAtMs + o.reserveForMs).toISOString();
  if (m.bootId !== undefined) holder.bootId = m.bootId;
  if (m.pidNamespace !== undefined) holder.pidNamespace = m.pidNamespace;
  ownStart ??= { value: processStartOf(PID) };
  if (ownStart.value !== undefined) holder.processStart = ownStart.value;
  return holder;
}

/** A record's JSON object; undefined when the text is not one (a record of another tool, garbage). */
export function parseObject(text: string): Record<string, unknown> | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return undefined;
  }
  return typeof raw === 'object' && raw !== null && !Array.isArray(raw) ? (raw as Record<string, unknown>) : undefined;
}

/** Parses an owner record, tolerating records from other tools; undefined when unusable. */
export function parseHolder(text: string): Holder | undefined {
  const r = parseObject(text);
  if (r === undefined) return undefined;
  if (typeof r.pid !== 'number' || typeof r.hostname !== 'string') return undefined;
  const str = (k: string): string | undefined => (typeof r[k] === 'string' ? (r[k]) : undefined);
  const num = (k: string): number | undefined => (typeof r[k] === 'number' && Number.isFinite(r[k]) ? (r[k]) : undefined);
  const h: Holder = {
    pid: r.pid,
    hostname: r.hostname,
    user: str('user') ?? 'unknown',
    clientId: str('clientId') ?? `${r.hostname}:${r.pid}`,
    acquiredAt: str('acquiredAt') ?? '',
    token: str('token') ?? '',
    staleMs: num('staleMs') ?? 0,
    refreshMs: num('refreshMs') ?? 0,
  };
  const fence = num('fence');
  if (fence !== undefined && Number.isSafeInteger(fence) && fence > 0) h.fence = fence;
  for (const k of ['purpose', 'bootId', 'pidNamespace', 'processStart', 'tool', 'reservedUntil'] as const) {
    const v = str(k);
    if (v !== undefined) h[k] = v;
  }
  return h;
}

/**
 * Whether a holder is a process on this machine (same hostname, boot and pid namespace), so that
 * its pid can be checked. A holder on another machine can only be judged by its heartbeat.
 */
export function isOnThisMachine(h: Pick<Holder, 'hostname' | 'bootId' | 'pidNamespace'>): boolean {
  const m = thisMachine();
  if (h.hostname !== m.hostname) return false;
  if (h.pidNamespace !== undefined && m.pidNamespace !== undefined && h.pidNamespace !== m.pidNamespace) return false;
  return true;
}

/**
 * For a holder on this machine: is its process still running? A different boot id means the
 * machine restarted since; a different start time means the pid was reused.
 */
export function isHolderAlive(h: Pick<Holder, 'pid' | 'bootId' | 'processStart'>): boolean {
  const m = thisMachine();
  if (h.bootId !== undefined && m.bootId !== undefined && h.bootId !== m.bootId) return false;
  if (!isPidAlive(h.pid)) return false;
  const stat = procStat(h.pid);
  // A zombie has exited; only its parent has not collected it yet.
  if (stat?.state === 'Z' || stat?.state === 'X') return false;
  if (h.processStart !== undefined && stat !== undefined && stat.start !== h.processStart) return false;
  return true;
}

export function isPidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
