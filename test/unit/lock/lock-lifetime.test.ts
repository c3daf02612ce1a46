/**
 * `devserver-stage lock TAG -- COMMAND` holds the lock for as long as COMMAND and its process
 * group run, even when the tool itself is killed with SIGKILL. The referee is the kernel: each
 * command makes the same directory with mkdir, which fails if another command is inside, and
 * checks that the first command's "done" file exists before it does anything.
 */
import { strict as assert } from 'assert';
import { spawn, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { procStat } from '../../../src/core/base/holder';
import { FENCE_FILE, COMMAND_FILE, LOCK_NAME, OWNER_FILE, WORK_PREFIX } from '../../../src/core/base/protocol';
import type { LockInfo } from '../../../src/core/base/types';
import { CLI, cleanup, cli, exitOf, killAll, report, tempDir, track, waitFor } from '../../helpers';

const TRIALS = 10;

/** Exit codes of a second command that entered while the first still ran. */
const ENTERED_EARLY = 98;
const COLLIDED = 99;

function isGone(pid: number): boolean {
  const st = procStat(pid);
  return st === undefined || st.state === 'Z' || st.state === 'X';
}

describe('lock -- COMMAND lasts as long as the command', function () {
  this.timeout(120_000);
  let root: string;
  let staticDir: string;
  let env: NodeJS.ProcessEnv;

  beforeEach(() => {
    root = tempDir('dss-lifetime-');
    staticDir = path.join(root, 'static');
    fs.mkdirSync(staticDir);
    env = { ...process.env, DEVSERVER_STATIC_DIR: staticDir };
  });
  afterEach(async () => {
    await killAll();
    cleanup(root);
  });

  /** Starts `lock TAG -- sh -c SCRIPT` in the background. */
  function startLock(tag: string, script: string): ChildProcess {
    return track(spawn(process.execPath, [CLI, 'lock', tag, '--', 'sh', '-c', script], { env, stdio: ['ignore', 'ignore', 'pipe'] }));
  }

  /** The pid recorded for the command running under `tag`'s lock. */
  function recordedPid(tag: string): number {
    const lock = path.join(staticDir, tag, LOCK_NAME);
    const { token } = JSON.parse(fs.readFileSync(path.join(lock, OWNER_FILE), 'utf8')) as { token: string };
    const rec = JSON.parse(fs.readFileSync(path.join(lock, `${WORK_PREFIX}${token}`, COMMAND_FILE), 'utf8')) as { pid: number; pgid: number };
    assert.equal(rec.pgid, rec.pid, 'the command leads its own process group');
    return rec.pid;
  }

  it(`SIGKILL of the tool: no second lock enters while its command runs (${TRIALS} trials), and the area is free at once after`, async () => {
    const inside = path.join(root, 'inside');
    let refused = 0;
    let early = 0;
    const freeAfterMs: number[] = [];
    for (let trial = 0; trial < TRIALS; trial++) {
      const tag = `b/t${trial}`;
      const done = path.join(root, `done${trial}`);
      const first = startLock(tag, `mkdir "${inside}" || exit ${COLLIDED}; sleep 2; rmdir "${inside}"; touch "${done}"`);
      await waitFor(() => (fs.existsSync(inside) ? true : undefined), 20_000, 'the first command to start');
      const pid = recordedPid(tag);
      first.kill('SIGKILL');
      await exitOf(first);

      const second = `test -e "${done}" || exit ${ENTERED_EARLY}; mkdir "${inside}" || exit ${COLLIDED}; rmdir "${inside}"`;
      const noWait = await cli(staticDir, ['lock', tag, '--', 'sh', '-c', second]);
      if (noWait.code === ENTERED_EARLY || noWait.code === COLLIDED) early++;
      else if (noWait.code === 3) refused++;
      else assert.equal(noWait.code, 0, `trial ${trial}: ${noWait.stderr}`);

      if (trial === 0) {
        const status = JSON.parse((await cli(staticDir, ['--json', 'status', tag])).stdout) as LockInfo;
        if (!fs.existsSync(done)) {
          assert.equal(status.state, 'held', 'held while the command runs');
          assert.equal(status.holderAlive, false);
          assert.equal(status.commandAlive, true);
          assert.equal(status.command?.pid, pid);
        }
      }
      if (trial % 2 === 0) {
        const waited = await cli(staticDir, ['lock', '--wait', '30', tag, '--', 'sh', '-c', second]);
        assert.notEqual(waited.code, ENTERED_EARLY, `trial ${trial}: entered while the first command ran`);
        assert.equal(waited.code, 0, `trial ${trial}: ${waited.stderr}`);
      } else {
        // Free as soon as the command has ended: no stale threshold involved.
        await waitFor(() => (isGone(pid) ? true : undefined), 20_000, 'the orphaned command to end', 5);
        const t0 = Date.now();
        const next = await cli(staticDir, ['lock', tag, '--', 'sh', '-c', second]);
        assert.equal(next.code, 0, `trial ${trial}: not free once the command had ended: ${next.stderr}`);
        freeAfterMs.push(Date.now() - t0);
      }
    }
    report(`${TRIALS} SIGKILLed holders: ${early} entries while the command ran; ${refused} refused (exit 3) without --wait`);
    report(`free after the command ended: a lock without --wait entered in ${freeAfterMs.join(', ')} ms (the CLI's whole run)`);
    assert.equal(early, 0);
  });

  it('SIGKILL of the tool: processes its command left in the group keep the lock', async () => {
    const inside = path.join(root, 'inside');
    const done = path.join(root, 'done');
    // The command itself exits at once; its background subshell goes on in the same group.
    const first = startLock('g', `(mkdir "${inside}" || exit ${COLLIDED}; sleep 2; rmdir "${inside}"; touch "${done}") & exit 0`);
    await waitFor(() => (fs.existsSync(inside) ? true : undefined), 20_000, 'the background work to start');
    const pid = recordedPid('g');
    first.kill('SIGKILL');
    await exitOf(first);
    await waitFor(() => (isGone(pid) ? true : undefined), 10_000, 'the command itself to exit', 5);
    const second = `test -e "${done}" || exit ${ENTERED_EARLY}; mkdir "${inside}" || exit ${COLLIDED}; rmdir "${inside}"`;
    const noWait = await cli(staticDir, ['lock', 'g', '--', 'sh', '-c', second]);
    if (!fs.existsSync(done)) assert.equal(noWait.code, 3, noWait.stderr);
    const waited = await cli(staticDir, ['lock', '--wait', '30', 'g', '--', 'sh', '-c', second]);
    assert.equal(waited.code, 0, waited.stderr);
  });

  it('a tool that lives on waits for what its command left in the group before releasing', async () => {
    const bg = path.join(root, 'background-done');
    const r = await cli(staticDir, ['lock', 'w', '--', 'sh', '-c', `(sleep 1; touch "${bg}") & exit 0`]);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(fs.existsSync(bg), 'released only after the background process ended');
    assert.match(r.stderr, /waiting for the processes it left in its process group/);
    assert.deepEqual(fs.readdirSync(path.join(staticDir, 'w')).filter((n) => n !== FENCE_FILE), [], 'nothing of the lock is left');
  });
});
