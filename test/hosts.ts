/**
 * Other hosts, played on this one: a process with a clock of its own (libfaketime) and, for the
 * command-line tool, a hostname of its own (`unshare --uts`, which needs root), reaching the
 * static directory through its own network filesystem client.
 */
import * as fs from 'fs';
import { type Timed, runTimed } from './attack';
import { CLI } from './helpers';

/** libfaketime, where Debian puts it; undefined when it is not installed. */
export const FAKETIME = ['x86_64-linux-gnu', 'aarch64-linux-gnu', 'i386-linux-gnu', 'arm-linux-gnueabihf']
  .map((triplet) => `/usr/lib/${triplet}/faketime/libfaketime.so.1`)
  .find((p) => fs.existsSync(p));

/**
 * A clock `offsetS` seconds off for one process. The kernel still stamps files with the real
 * time, as a file server with a right clock would. Monotonic time is left alone: timers keep their
 * pace, and a negative offset cannot take it below zero on a machine just booted.
 */
export function clockOff(offsetS: number, lib = FAKETIME): NodeJS.ProcessEnv {
  if (lib === undefined) throw new Error('libfaketime is not installed');
  return { LD_PRELOAD: lib, FAKETIME: `${offsetS >= 0 ? '+' : ''}${offsetS}s`, FAKETIME_DONT_FAKE_MONOTONIC: '1', DONT_FAKE_MONOTONIC: '1' };
}

/** A host sharing the static directory through its own client (`mount`), its clock `offsetS` seconds off. */
export interface Host {
  name: string;
  mount: string;
  offsetS: number;
}

/** `devserver-stage ARGS` run as `host` would run it: its hostname, its clock, its mount. */
export function cliOnHost(host: Host, args: readonly string[], options: { env?: NodeJS.ProcessEnv; onSpawn?: (pid: number) => void; timeoutMs?: number } = {}): Promise<Timed> {
  // exec keeps one process through unshare and sh, so the pid reported is the tool's own.
  return runTimed('unshare', ['--uts', 'sh', '-c', `hostname ${host.name} && exec "$0" "$@"`, process.execPath, CLI, ...args], {
    timeoutMs: options.timeoutMs ?? 60_000,
    env: { ...process.env, DEVSERVER_STATIC_DIR: host.mount, ...clockOff(host.offsetS), ...options.env },
    ...(options.onSpawn !== undefined ? { onSpawn: options.onSpawn } : {}),
  });
}
