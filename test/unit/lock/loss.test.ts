/**
 * A lost lock said in words: a holder in its own process whose lock another process force-releases,
 * takes over (the holder stopped past the threshold), destroys with its build, or removes by hand,
 * learns who did it and when from the history (`explainLoss`), and what it reports never names the
 * errno or the path through a descriptor its heartbeat met. `lock -- COMMAND` says the same. An
 * errno Node has no name for (NFS's ESTALE) is told by the system's name.
 */
import { strict as assert } from 'assert';
import { spawn, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import * as util from 'util';
import { inspect, type LockLoss } from '../../../src/core';
import { asStagingError, errnoCode } from '../../../src/core/base/errors';
import { UNREACHED_ERRNOS } from '../../../src/core/lock/lease';
import { CLI, cleanup, exitOf, expectMessage, killAll, startWorker, stderrOf, tempDir, track, waitFor, type Msg } from '../../helpers';

const TAG = 'eve/R1';
const who = `${os.userInfo().username}@${os.hostname()}`;
/** What a heartbeat meets and no user should read. */
const LEAKS = /ENOENT|ESTALE|EIO|\/proc\/self\/fd|errno|stat '|utime/;

interface Explained extends Msg {
  loss: LockLoss;
  sentence: string;
}

/** A holder in its own process; resolves once it holds the lock. */
async function holder(staticDir: string, timing: { staleMs: number; refreshMs: number }): Promise<ChildProcess> {
  const child = track(startWorker('holder', [JSON.stringify({ staticDir, tag: TAG, createOnce: false, ...timing })]));
  await expectMessage(child, (m) => m.type === 'acquired', 10_000, 'the lock');
  return child;
}

/** Runs the CLI in the background; its pid is the process the history names. */
function cliChild(staticDir: string, args: string[]): ChildProcess {
  return track(spawn(process.execPath, [CLI, '--static-dir', staticDir, ...args], { stdio: ['ignore', 'pipe', 'pipe'] }));
}

async function lossOf(child: ChildProcess): Promise<{ lost: Msg; explained: Explained }> {
  const lostP = expectMessage(child, (m) => m.type === 'lost', 15_000, 'the loss');
  const explainedP = expectMessage<Explained>(child, (m) => m.type === 'explained', 20_000, 'who broke it');
  return { lost: await lostP, explained: await explainedP };
}

describe('a lost lock said in words', function () {
  this.timeout(60_000);
  let staticDir: string;

  beforeEach(() => {
    staticDir = tempDir('dss-loss-');
    fs.mkdirSync(path.join(staticDir, TAG), { recursive: true });
  });
  afterEach(async () => {
    await killAll();
    cleanup(staticDir);
  });

  it('force-released: by whom (the process that did it) and when, and no errno or descriptor path', async () => {
    const h = await holder(staticDir, { staleMs: 4_000, refreshMs: 1_000 });
    const losing = lossOf(h);
    const fr = cliChild(staticDir, ['force-release', TAG]);
    assert.equal((await exitOf(fr)).code, 0, stderrOf(fr));
    const { lost, explained } = await losing;
    assert.doesNotMatch(String(lost.message), LEAKS);
    assert.match(String(lost.message), /removed or replaced by another process/);
    assert.equal(explained.loss.kind, 'force-released');
    assert.equal(explained.loss.by?.pid, fr.pid, 'the history names the process that force-released it');
    assert.ok(explained.loss.recorded);
    assert.match(explained.sentence, new RegExp(`^Lost the lock on .*: it was force-released by ${who} \\(pid ${fr.pid}\\) at \\d{4}-\\d\\d-\\d\\dT`));
    assert.doesNotMatch(explained.sentence, LEAKS);
  });

  it('taken over: its holder stopped past the threshold, and the taker is named', async () => {
    const h = await holder(staticDir, { staleMs: 2_000, refreshMs: 1_000 });
    const losing = lossOf(h);
    process.kill(h.pid!, 'SIGSTOP');
    try {
      // Until the lock is judged stale as a taker judges it, however slow the machine is.
      await waitFor(async () => ((await inspect(staticDir, TAG, { staleMs: 2_000 })).state === 'stale' ? true : undefined), 60_000, 'the stopped holder\'s lock judged stale');
      const taker = cliChild(staticDir, ['--stale', '2', 'lock', TAG, '--', 'true']);
      assert.equal((await exitOf(taker)).code, 0, stderrOf(taker));
      process.kill(h.pid!, 'SIGCONT');
      const { lost, explained } = await losing;
      assert.doesNotMatch(String(lost.message), LEAKS);
      assert.equal(explained.loss.kind, 'taken-over');
      assert.equal(explained.loss.by?.pid, taker.pid);
      assert.match(explained.sentence, /it was taken over by .* who found it stale/);
    } finally {
      process.kill(h.pid!, 'SIGCONT');
    }
  });

  it('destroyed with its build by destroy --force', async () => {
    const h = await holder(staticDir, { staleMs: 4_000, refreshMs: 1_000 });
    const losing = lossOf(h);
    const d = cliChild(staticDir, ['destroy', '--force', TAG]);
    assert.equal((await exitOf(d)).code, 0, stderrOf(d));
    assert.ok(!fs.existsSync(path.join(staticDir, TAG)), 'the build was destroyed');
    const { explained } = await losing;
    assert.equal(explained.loss.kind, 'destroyed');
    assert.equal(explained.loss.by?.pid, d.pid);
    assert.match(explained.sentence, /force-released by .* who destroyed the build/);
  });

  it('removed by hand, which nobody recorded: said so, with when it was found', async () => {
    const h = await holder(staticDir, { staleMs: 4_000, refreshMs: 1_000 });
    const losing = lossOf(h);
    fs.rmSync(path.join(staticDir, TAG, 'devserver.lock'), { recursive: true });
    const { lost, explained } = await losing;
    assert.doesNotMatch(String(lost.message), LEAKS);
    assert.equal(explained.loss.kind, 'removed');
    assert.equal(explained.loss.recorded, false);
    assert.match(explained.sentence, /removed by another process, which recorded nothing \(found at /);
  });

  it('lock -- COMMAND: stops the command and says who force-released the lock, without an errno', async () => {
    const holderCli = cliChild(staticDir, ['--stale', '4', 'lock', TAG, '--', 'sleep', '30']);
    await waitFor(() => (fs.existsSync(path.join(staticDir, TAG, 'devserver.lock', 'owner.json')) ? true : undefined), 10_000, 'the CLI to hold the lock');
    // Its command runs once it is recorded beside the lock.
    await waitFor(() => (fs.readdirSync(path.join(staticDir, TAG, 'devserver.lock')).some((n) => n.startsWith('work.') && fs.existsSync(path.join(staticDir, TAG, 'devserver.lock', n, 'command.json'))) ? true : undefined), 10_000, 'the command to start');
    const fr = cliChild(staticDir, ['force-release', TAG]);
    assert.equal((await exitOf(fr)).code, 0, stderrOf(fr));
    const { code } = await exitOf(holderCli);
    assert.equal(code, 1);
    const said = stderrOf(holderCli);
    assert.match(said, new RegExp(`Lost the lock on .*: it was force-released by ${who} \\(pid ${fr.pid}\\) at .*\\. Stopped sleep \\(pid \\d+\\)\\.`));
    assert.doesNotMatch(said, LEAKS);
  });
});

describe('an errno that Node does not name', () => {
  it("NFS's ESTALE is told by its name: what another host removed, never a static directory not reached", () => {
    const n = os.constants.errno.ESTALE;
    // Node hands such an error over with the code it makes for an errno its I/O library lacks.
    const code = util.getSystemErrorName(-n);
    assert.match(code, /^Unknown system error/, 'this Node names ESTALE itself: the mapping is not needed here');
    const err = Object.assign(new Error(`${code}: ${code}, open '/proc/self/fd/21/devserver.lock'`), { code, errno: -n, syscall: 'open' });
    assert.equal(errnoCode(err), 'ESTALE');
    assert.equal(UNREACHED_ERRNOS.has(errnoCode(err)!), false, 'a lock another host removed went; the directory was reached');
    assert.match(asStagingError(err, 'read', '/static/eve/R1').message, /another host removed or replaced it .* try again/i);
    assert.equal(errnoCode(Object.assign(new Error('x'), { code: 'ENOENT', errno: -2 })), 'ENOENT');
  });
});
