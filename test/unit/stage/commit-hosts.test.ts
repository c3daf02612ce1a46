/**
 * A commit cut off on one host is undone by the next holder on another: two sshfs clients of one
 * export (default mount options, so each numbers files its own way and caches what it saw), each
 * used by processes with their own hostname (`unshare --uts`). A stager on client A is stopped at
 * every named step of its commit and SIGKILLed there; the next holder on client B takes the lock
 * once it is stale and undoes what A left. Then `verify` passes and the area holds exactly the old
 * build (killed before the commit point) or the new one (after it), compared byte for byte on the
 * server. And B's undo, killed at each of its own steps, is finished by a third holder on client A.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { verify } from '../../../src/core/verify';
import { LOCK_NAME } from '../../../src/core/base/protocol';
import { areaJunk, pool } from '../../attack';
import { type Builds, instantsOf, killStopped, makeBuilds, runCli, startCli, stopped, whichBuild } from '../../commit';
import { cleanup, killAll, report, tempDir } from '../../helpers';
import { type SshfsExport, startSshfs, whyNoSshfs } from '../../sshfs';

/** Short lease times, so that B takes A's dead lock soon: seconds, as the CLI reads them. */
const TIMING = ['--stale', '2', '--refresh', '1'];
/** Trials run side by side: each waits most of its time for a dead lock to turn stale. */
const AT_ONCE = 6;

describe('commit: cut off on one host, undone on another (two sshfs clients)', function () {
  this.timeout(600_000);
  let share: SshfsExport | undefined;
  let local = '';
  let builds: Builds;
  /** The static directory as the server, client A and client B see it. */
  let onServer = '';
  let viaA = '';
  let viaB = '';
  let serial = 0;

  before(async function () {
    const why = await whyNoSshfs();
    if (why !== undefined) {
      console.log(`      skipped: ${why}`);
      this.skip();
    }
    share = await startSshfs('dss-commit-hosts-');
    onServer = path.join(share.exportDir, 'static');
    fs.mkdirSync(onServer);
    viaA = path.join(share.mountA, 'static');
    viaB = path.join(share.mountB, 'static');
    local = tempDir('dss-commit-hosts-src-');
    builds = makeBuilds(local);
  });
  after(async () => {
    await killAll();
    await share?.stop();
    if (local !== '') cleanup(local);
  });

  const onA = { hostname: 'host-a' };
  const onB = { hostname: 'host-b' };
  const onC = { hostname: 'host-c' };

  /** A fresh area holding the old build, staged through client A. */
  async function oldBuild(): Promise<string> {
    const tag = `b/t${serial++}`;
    const r = await runCli([...TIMING, 'stage', tag, builds.old], { staticDir: viaA, ...onA });
    assert.equal(r.code, 0, r.stderr);
    return tag;
  }

  /** A's stager stopped at `at` and killed there. */
  async function cutOff(at: string): Promise<string> {
    const tag = await oldBuild();
    const stager = startCli([...TIMING, 'stage', tag, builds.addition, '--add', '--overwrite'], { staticDir: viaA, pauseAt: at, ...onA });
    await stopped(stager, `A at ${at}`);
    await killStopped(stager, `A at ${at}`);
    return tag;
  }

  /** The next holder through `staticDir` on `host` takes the lock once it is stale (undoing first), and lets it go. */
  async function nextHolder(tag: string, staticDir: string, host: { hostname: string }, what: string): Promise<void> {
    const next = await runCli([...TIMING, 'lock', tag, '--wait', '120', '--', 'true'], { staticDir, ...host });
    assert.equal(next.code, 0, `${what}: ${next.stderr}`);
  }

  /** What the area holds, byte for byte on the server: exactly the old or the new build, which verifies through B and on the server, with no lock or litter. */
  async function holds(tag: string, what: string): Promise<'old' | 'new'> {
    const area = path.join(onServer, tag);
    const which = whichBuild(area, builds);
    assert.ok(which === 'old' || which === 'new', `${what}: ${which}`);
    const checked = await runCli(['verify', tag], { staticDir: viaB, ...onB });
    assert.equal(checked.code, 0, `${what}: verify through B: ${checked.stdout}${checked.stderr}`);
    const onDisk = await verify(onServer, tag);
    assert.ok(onDisk.ok, `${what}: verify on the server: ${JSON.stringify(onDisk.problems)}`);
    assert.deepEqual(areaJunk(area), [], `${what}: litter left`);
    assert.equal(fs.existsSync(path.join(area, LOCK_NAME)), false, `${what}: a lock left`);
    return which;
  }

  /** The instants with `prefix` that `run` passes, logged by the process it starts. */
  async function instantsOfRun(prefix: string, run: (log: string) => Promise<void>): Promise<string[]> {
    const log = path.join(local, `steps.${serial++}.log`);
    await run(log);
    return instantsOf(log, prefix);
  }

  it('A killed at each of the 25 steps of its commit: after B, the old build before the commit point, the new one after it', async () => {
    const instants = (
      await instantsOfRun('commit.', async (stepLog) => {
        const r = await runCli([...TIMING, 'stage', await oldBuild(), builds.addition, '--add', '--overwrite'], { staticDir: viaA, stepLog, ...onA });
        assert.equal(r.code, 0, r.stderr);
      })
    ).filter((i) => !i.startsWith('commit.undo.'));
    assert.equal(instants.length, 25, instants.join(' '));
    const outcomes = new Map<string, 'old' | 'new'>();
    await pool(instants, AT_ONCE, async (at) => {
      const tag = await cutOff(at);
      await nextHolder(tag, viaB, onB, `B after A was killed at ${at}`);
      outcomes.set(at, await holds(tag, `A killed at ${at}, then B`));
    });
    assert.equal(outcomes.size, 25, 'every trial ran');
    for (const [at, which] of outcomes) assert.equal(which, at.startsWith('commit.committed') ? 'new' : 'old', `A killed at ${at}`);
    const count = (w: string): number => [...outcomes.values()].filter((o) => o === w).length;
    report(`A killed at ${instants.length} steps of its commit, B undid: ${count('old')} old builds, ${count('new')} new, none mixed`);
  });

  it('B killed at each step of its undo of what A left: a holder on A finishes it', async () => {
    // Everything placed and checked, not committed: the undo has every kind of step to do.
    const cut = 'commit.checked#1';
    const instants = await instantsOfRun('commit.undo.', async (stepLog) => {
      const tag = await cutOff(cut);
      const r = await runCli([...TIMING, 'lock', tag, '--wait', '120', '--', 'true'], { staticDir: viaB, stepLog, ...onB });
      assert.equal(r.code, 0, r.stderr);
      assert.equal(await holds(tag, 'B undid without a kill'), 'old');
    });
    assert.equal(instants.length, 3 + 2 * 7 + 2 * 4, instants.join(' '));
    const ran: string[] = [];
    await pool(instants, AT_ONCE, async (at) => {
      const tag = await cutOff(cut);
      const undoer = startCli([...TIMING, 'lock', tag, '--wait', '120', '--', 'true'], { staticDir: viaB, pauseAt: at, ...onB });
      await stopped(undoer, `B at ${at}`);
      await killStopped(undoer, `B at ${at}`);
      await nextHolder(tag, viaA, onC, `C on client A after B was killed at ${at}`);
      assert.equal(await holds(tag, `B's undo killed at ${at}, then C`), 'old');
      ran.push(at);
    });
    assert.equal(ran.length, instants.length, 'every trial ran');
    report(`B's undo killed at each of its ${instants.length} steps, a holder on client A finished it every time`);
  });
});
