/**
 * Waiting for a lock from the command line: Ctrl-C, SIGTERM or SIGHUP while waiting stops the
 * wait, and the tool then exits 128 + that signal (`Interrupted`).
 */
import { isStagingError } from '../core/base/errors';
import { Interrupted, STOPPING } from './output';

/** Runs `wait` with a signal that those signals abort; what it rejects with then is `Interrupted`. */
export async function stoppableWait<T>(wait: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const waitAbort = new AbortController();
  let stoppedBy: NodeJS.Signals | undefined;
  const stopWaiting = (signal: NodeJS.Signals): void => {
    stoppedBy ??= signal;
    waitAbort.abort(new Error(`interrupted by ${signal}`));
  };
  for (const s of STOPPING) process.on(s, stopWaiting);
  try {
    return await wait(waitAbort.signal);
  } catch (err) {
    if (isStagingError(err, 'ECANCELED') && stoppedBy !== undefined) throw new Interrupted(err, stoppedBy);
    throw err;
  } finally {
    for (const s of STOPPING) process.off(s, stopWaiting);
  }
}
