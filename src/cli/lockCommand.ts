/**
 * `devserver-stage lock TAG -- COMMAND`: run a command while holding the lock, like flock(1),
 * and stop it if the lock is lost.
 */
import { spawn } from 'child_process';
import * as os from 'os';
import { acquire, type AcquireOptions } from '../core/lock/lock';
import { explainLoss, lossSentence } from '../core/loss';
import { flushHistory } from '../core/log/history';
import { processStartOf } from '../core/base/holder';
import { CommandRecordFile, isGroupAlive } from '../core/lock/lifetime';
import { commandMain } from './context';
import { queueNotice } from './format';
import { messageLine, printable, stderr } from './output';
import { stoppableWait } from './stopWait';

/** Time a command gets to exit after SIGTERM before it is killed. */
const KILL_GRACE_MS = 5_000;
/** How often to look whether processes the command left in its group have ended. */
const GROUP_POLL_MS = 200;
/**
 * Passed on to the command's process group. The command runs in its own session and group (so
 * that the lock can follow the group, and outlive this tool if it is killed), which the terminal's
 * Ctrl-C, Ctrl-\ and window-size changes no longer reach: this tool receives them and passes each
 * on once, as it does SIGTERM and SIGHUP (kill, systemd, a closed SSH session).
 */
const FORWARDED: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGWINCH'];
/**
 * The command waits at this gate (a read on fd 3) until its record is written beside the lock's:
 * a tool killed before that closes the pipe, and the command never starts unrecorded.
 */
const GATE = 'IFS= read -r _ <&3 || exit 125; exec 3<&-; exec "$@"';

function signalGroup(pgid: number | undefined, signal: NodeJS.Signals): void {
  if (pgid === undefined) return;
  try {
    process.kill(-pgid, signal);
  } catch {
    /* the group has ended */
  }
}

export interface LockCommandOptions extends AcquireOptions {
  destroyOnFailure: boolean;
}

export const main = commandMain(
  async (ctx, [typed, command]: readonly [string, readonly string[]], o: { createOnce?: boolean; wait: number; purpose?: string; destroyOnFailure?: boolean }) => {
    const tag = ctx.tagArg(typed);
    const onQueue = queueNotice(tag, stderr);
    try {
      return await runLocked(
        ctx.staticDir(),
        tag,
        command,
        {
          ...ctx.coreOptions(),
          createOnce: o.createOnce === true,
          waitMs: o.wait * 1000,
          purpose: o.purpose ?? command.join(' ').slice(0, 200),
          destroyOnFailure: o.destroyOnFailure === true,
          ...(onQueue !== undefined ? { onQueue } : {}),
        },
        (m) => stderr.write(messageLine(m)),
      );
    } finally {
      // Records queued for a network filesystem are written before the process exits.
      await flushHistory();
    }
  },
);

/** Resolves to the exit code the tool should end with; a signal while waiting for the lock rejects with `Interrupted`. */
export async function runLocked(
  staticDir: string,
  tag: string,
  argv: readonly string[],
  options: LockCommandOptions,
  say: (message: string) => void,
): Promise<number> {
  // Ctrl-C, SIGTERM or SIGHUP while waiting for the lock stops the wait; the tool then exits 128 + that signal.
  const lease = await stoppableWait((signal) => acquire(staticDir, tag, { ...options, signal }));

  const [command, ...args] = argv;
  const env: NodeJS.ProcessEnv = { ...process.env, DEVSERVER_STAGING_DIR: lease.dir, DEVSERVER_STAGING_TAG: lease.tag };
  // Scripts can fence their own writes with the lock's fencing token.
  env.DEVSERVER_STAGING_FENCE = String(lease.fence);
  // detached: a new session and process group led by the command (pgid = its pid).
  const child = spawn('/bin/sh', ['-c', GATE, 'devserver-stage', command, ...args], {
    stdio: ['inherit', 'inherit', 'inherit', 'pipe'],
    detached: true,
    env,
  });
  const pgid = child.pid;
  const gate = child.stdio[3] as NodeJS.WritableStream | null;
  gate?.on('error', () => undefined);
  const forward = (signal: NodeJS.Signals): void => signalGroup(pgid, signal);
  // Listening also keeps this process alive until the command has ended and the lock is released.
  for (const s of FORWARDED) process.on(s, forward);

  let lost: Promise<void> | undefined;
  let killTimer: NodeJS.Timeout | undefined;
  const stopCommand = (): void => {
    signalGroup(pgid, 'SIGTERM');
    killTimer = setTimeout(() => signalGroup(pgid, 'SIGKILL'), KILL_GRACE_MS);
    killTimer.unref();
  };
  lease.on('lost', () => {
    // Stopped at once; who broke the lock, from the history, is said as soon as it is known.
    stopCommand();
    lost = explainLoss(lease, lease.timing).then((loss) => say(`${lossSentence(loss)} Stopped ${command} (pid ${child.pid}).`));
  });

  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null; spawnError?: Error }>((resolve) => {
    child.once('error', (err) => resolve({ code: null, signal: null, spawnError: err }));
    child.once('exit', (c, s) => resolve({ code: c, signal: s }));
  });
  // Record the command beside the lock, then let it start: from here on the lock lasts as long
  // as its process group, even if this tool is killed.
  let record: CommandRecordFile | undefined;
  let recordError: unknown;
  if (pgid !== undefined && lease.state === 'held') {
    try {
      record = CommandRecordFile.forWorkDir(lease.workDir);
      const processStart = processStartOf(pgid);
      record?.write({ pid: pgid, pgid, token: lease.holder.token, ...(processStart !== undefined ? { processStart } : {}) });
    } catch (err) {
      recordError = err;
    }
  }
  const started = record !== undefined && recordError === undefined;
  if (started) gate?.end('\n');
  else gate?.end(); // the command never starts
  const { code, signal, spawnError } = await exit;
  // Processes the command left behind in its group still work under the lock, as with flock(1).
  if (pgid !== undefined && spawnError === undefined && isGroupAlive(pgid)) {
    say(`${command} exited; waiting for the processes it left in its process group (${pgid}) before releasing the lock.`);
    while (isGroupAlive(pgid)) await new Promise((r) => setTimeout(r, GROUP_POLL_MS));
  }
  for (const s of FORWARDED) process.off(s, forward);
  if (killTimer !== undefined) clearTimeout(killTimer);
  record?.close();

  if (!started && spawnError === undefined && lost === undefined) {
    const why = recordError instanceof Error ? recordError.message : 'the lock was no longer ours';
    if (lease.state === 'held') await lease.release();
    say(`Did not run ${command}: could not record it beside the lock on ${printable(lease.dir)} (${why}).`);
    return 1;
  }
  const failed = spawnError !== undefined || code !== 0;
  if (lease.state === 'held') {
    const destroy = failed && options.destroyOnFailure && lease.created;
    await lease.release({ destroy });
    if (destroy) say(`Removed ${printable(lease.dir)}: the command failed and this run had created it.`);
  }
  if (spawnError !== undefined) {
    say(`Could not run ${command}: ${spawnError.message}`);
    return (spawnError as NodeJS.ErrnoException).code === 'ENOENT' ? 127 : 126;
  }
  if (lost !== undefined) {
    await lost;
    return 1;
  }
  if (signal !== null) return 128 + (os.constants.signals[signal] ?? 0);
  return code ?? 1;
}
