/**
 * Named steps of the protocol, for the tests that pause a process at each of them.
 *
 * A lease lock fails when its holder is paused (garbage collection, swap, SIGSTOP) longer than the
 * stale threshold at the wrong instant. To prove that no instant is wrong, the tests run a command
 * once with `DEVSERVER_STAGING_STEP_LOG=<file>` (every step it passes is appended to the file), then
 * once per step with `DEVSERVER_STAGING_PAUSE_AT=<step>` (or `<step>#<n>`, its n-th passage): there
 * the process stops itself with SIGSTOP, and the test continues it once others have acted.
 * Without either variable `step` does nothing.
 */
import * as fs from 'fs';

function makeStep(pauseAt: string | undefined, logTo: string | undefined): (name: string) => void {
  const [pauseName, nth] = (pauseAt ?? '').split('#');
  let seen = 0;
  return (name) => {
    if (logTo !== undefined && logTo !== '') {
      try {
        fs.appendFileSync(logTo, `${name}\n`);
      } catch {
        /* a test's log; never a reason to fail */
      }
    }
    if (name !== pauseName) return;
    seen++;
    if (nth !== undefined && Number(nth) !== seen) return;
    process.kill(process.pid, 'SIGSTOP');
  };
}

const pauseAt = process.env.DEVSERVER_STAGING_PAUSE_AT;
const logTo = process.env.DEVSERVER_STAGING_STEP_LOG;

/** Marks a named step of the protocol (see above). */
export const step: (name: string) => void = (pauseAt ?? '') !== '' || (logTo ?? '') !== '' ? makeStep(pauseAt, logTo) : () => undefined;
