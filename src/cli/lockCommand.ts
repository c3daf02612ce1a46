/**
 * `devserver-stage lock TAG -- COMMAND`: run a command while holding the lock, like flock(1),
 * and stop it if the lock is lost.
 */
import { spawn } from 'child_process';
import * as os from 'os';
import { acquire, type AcquireOptions } from '../core/lock';
import { isStagingError, type StagingError } from '../core/errors';
import { Interrupted } from './output';

/** Time a command gets to exit after SIGTERM before it is killed. */
const KILL_GRACE_MS = 5_000;
/**
 * Passed on to the command: these are usually sent to one process (kill, systemd, a closed SSH
 * session). SIGINT is not: Ctrl-C in a terminal reaches the whole foreground process group, the
 * command included, and a second one would make many programs skip their clean-up.
 */
const FORWARDED: NodeJS.Signals[] = ['SIGTERM', 'SIGHUP'];
const STOPPING: NodeJS.Signals[] = ['SIGINT', ...FORWARDED];

export interface LockCommandOptions extends AcquireOptions {
  destroyOnFailure: boolean;
}

/** Resolves to the exit code the tool should end with; a signal while waiting for the lock rejects with `Interrupted`. */
export async function runLocked(
  staticDir: string,
  tag: string,
  argv: readonly string[],
  options: LockCommandOptions,
  say: (message: string) => void,
): Promise<number> {
  // Ctrl-C, SIGTERM or SIGHUP while waiting for the lock stops the wait; the tool then exits 128 + that signal.
  const waitAbort = new AbortController();
  let stoppedBy: NodeJS.Signals | undefined;
  const stopWaiting = (signal: NodeJS.Signals): void => {
    stoppedBy ??= signal;
    waitAbort.abort(new Error(`interrupted by ${signal}`));
  };
  for (const s of STOPPING) process.on(s, stopWaiting);
  let lease;
  try {
    lease = await acquire(staticDir, tag, { ...options, signal: waitAbort.signal });
  } catch (err) {
    if (isStagingError(err, 'ECANCELED') && stoppedBy !== undefined) throw new Interrupted(err, stoppedBy);
    throw err;
  } finally {
    for (const s of STOPPING) process.off(s, stopWaiting);
  }

  const [command, ...args] = argv;
  const child = spawn(command!, args, {
    stdio: 'inherit',
    env: { ...process.env, DEVSERVER_STAGING_DIR: lease.dir, DEVSERVER_STAGING_TAG: lease.tag },
  });
  const forward = (signal: NodeJS.Signals): void => {
    child.kill(signal);
  };
  // Listening for SIGINT keeps this process alive until the command has exited and the lock is released.
  const ignore = (): void => undefined;
  process.on('SIGINT', ignore);
  for (const s of FORWARDED) process.on(s, forward);

  let lost: StagingError | undefined;
  let killTimer: NodeJS.Timeout | undefined;
  lease.on('lost', (reason) => {
    lost = reason;
    say(`${reason.message} Stopping ${command} (pid ${child.pid}).`);
    child.kill('SIGTERM');
    killTimer = setTimeout(() => child.kill('SIGKILL'), KILL_GRACE_MS);
    killTimer.unref();
  });

  const { code, signal, spawnError } = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; spawnError?: Error }>((resolve) => {
    child.once('error', (err) => resolve({ code: null, signal: null, spawnError: err }));
    child.once('exit', (c, s) => resolve({ code: c, signal: s }));
  });
  for (const s of FORWARDED) process.off(s, forward);
  process.off('SIGINT', ignore);
  if (killTimer !== undefined) clearTimeout(killTimer);

  const failed = spawnError !== undefined || code !== 0;
  if (lease.state === 'held') {
    const destroy = failed && options.destroyOnFailure && lease.created;
    await lease.release({ destroy });
    if (destroy) say(`Removed ${lease.dir}: the command failed and this run had created it.`);
  }
  if (spawnError !== undefined) {
    say(`Could not run ${command}: ${spawnError.message}`);
    return (spawnError as NodeJS.ErrnoException).code === 'ENOENT' ? 127 : 126;
  }
  if (lost !== undefined) return 1;
  if (signal !== null) return 128 + (os.constants.signals[signal] ?? 0);
  return code ?? 1;
}
