/**
 * Two real users on one static directory (mode 1777). One holds an area with `umask 077` and
 * `--stale 60 --refresh 25` (a legal lock whose heartbeat is older than the default 10 s between
 * refreshes, and whose owner record the other user cannot read: made mode 0600, as an earlier
 * build under that umask left it); the other user tries to take the
 * same area again and again with the defaults. It must never run its command while the holder's
 * command runs, and must leave no `devserver.lock.trash.*` or `devserver.lock.claim.*` behind.
 * Both directions: nobody holds and daemon contends, then daemon holds and nobody contends. The
 * area directory is writable by both (mode 777, as a group-shared build directory is).
 */
import { strict as assert } from 'assert';
import { spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { areaJunk, cliTimed, hasTool } from '../../attack';
import { CLI, cleanup, isRoot, report, sleep, tempDir, waitFor } from '../../helpers';

/**
 * How long the holder holds: well past the contender's own 10 s threshold, so that a judge that
 * cannot read the holder's record and applies its own threshold would call the lock stale.
 */
const HOLD_S = 18;

describe('attack: two real users, a holder with umask 077 and --stale 60', function () {
  this.timeout(120_000);
  let root = '';
  let staticDir = '';
  /** Where both users' commands leave their marks (mode 1777). */
  let marks = '';

  before(function () {
    if (!isRoot || !hasTool('runuser')) {
      console.log('      skipped: needs root and runuser to act as the users nobody and daemon');
      this.skip();
    }
    root = tempDir('dss-attack-users-');
    fs.chmodSync(root, 0o755);
    staticDir = path.join(root, 'static');
    fs.mkdirSync(staticDir);
    fs.chmodSync(staticDir, 0o1777);
    marks = path.join(root, 'marks');
    fs.mkdirSync(marks);
    fs.chmodSync(marks, 0o1777);
  });
  after(() => root && cleanup(root));

  // In a sticky directory only an entry's owner (or the directory's, or root) may remove it: another
  // user could take the lock's insides apart but not the lock, which was left empty, the holder cut
  // off and the force-release reported as failed.
  it('in a sticky area, another user\'s force-release is refused whole and the lock stays as it was; root\'s goes through', async () => {
    const tag = 'sticky/R1';
    const area = path.join(staticDir, tag);
    fs.mkdirSync(area, { recursive: true });
    fs.chmodSync(path.dirname(area), 0o777);
    fs.chmodSync(area, 0o1777);
    const running = path.join(marks, 'sticky-holder-running');
    const held = spawn('runuser', ['-u', 'daemon', '--', process.execPath, CLI, 'lock', tag, '--', 'sh', '-c', `touch ${running}; exec sleep 60`], {
      env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const heldExit = new Promise<number | null>((r) => held.once('exit', (code) => r(code)));
    try {
      await waitFor(() => (fs.existsSync(running) ? true : undefined), 15_000, 'daemon\'s command to start');
      const lockDir = path.join(area, 'devserver.lock');
      const snapshot = (): string => JSON.stringify([fs.statSync(lockDir).ino, fs.readdirSync(lockDir).sort(), fs.readFileSync(path.join(lockDir, 'owner.json'), 'utf8'), fs.readdirSync(area).sort()]);
      const before = snapshot();
      const refused = await cliTimed(staticDir, ['force-release', tag], { timeoutMs: 20_000, user: 'nobody' });
      assert.equal(refused.code, 3, `nobody's force-release: exit ${refused.code}: ${refused.stderr}`);
      assert.match(refused.stderr, /sticky/);
      assert.equal(snapshot(), before, 'the lock, its record and the area are as they were');
      assert.deepEqual(areaJunk(area), []);
      assert.equal(held.exitCode, null, 'daemon still holds it and its command runs');
      const byRoot = await cliTimed(staticDir, ['force-release', tag], { timeoutMs: 20_000 });
      assert.equal(byRoot.code, 0, byRoot.stderr);
      assert.ok(!fs.existsSync(lockDir), 'root removed the lock');
      report(`sticky area: nobody's force-release refused (exit 3), the lock untouched; root's went through; daemon's lock -- exited ${await heldExit}`);
    } finally {
      if (held.exitCode === null) held.kill('SIGKILL');
    }
  });

  for (const [holder, contender] of [
    ['nobody', 'daemon'],
    ['daemon', 'nobody'],
  ] as const) {
    it(`${contender} never steals ${holder}'s live lock and leaves nothing behind`, async () => {
      const tag = `board-${holder}/R1`;
      const area = path.join(staticDir, tag);
      const running = path.join(marks, `holder-${holder}-running`);
      // A shared area, writable by both (as a group-writable build directory is): the lock inside it is the holder's own.
      fs.mkdirSync(area, { recursive: true });
      fs.chmodSync(path.dirname(area), 0o777);
      fs.chmodSync(area, 0o777);
      // The holder's command marks its whole run with a file only it removes at the end.
      const script = `umask 077; exec "$0" "${CLI}" --stale 60 --refresh 25 lock ${tag} -- sh -c 'touch ${running}; sleep ${HOLD_S}; rm -f ${running}'`;
      const held = spawn('runuser', ['-u', holder, '--', 'sh', '-c', script, process.execPath], {
        env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let heldErr = '';
      held.stderr.on('data', (d: Buffer) => (heldErr += d.toString()));
      const heldExit = new Promise<number | null>((r) => held.once('exit', (code) => r(code)));
      try {
        await waitFor(() => (fs.existsSync(running) ? true : undefined), 15_000, `${holder}'s command to start`);
        // This tool writes its record readable by all whatever the umask; an earlier build under
        // umask 077 left it readable by its holder alone, as it is made now.
        const record = path.join(area, 'devserver.lock', 'owner.json');
        fs.chmodSync(record, 0o600);
        const peek = spawnSync('runuser', ['-u', contender, '--', 'cat', record], { encoding: 'utf8' });
        assert.notEqual(peek.status, 0, `${contender} can still read ${holder}'s record`);
        const steals: string[] = [];
        const leftovers = new Set<string>();
        let attempts = 0;
        /** Attempts that were not refused in the tool's words for a lock held by another (exit 3, ELOCKED). */
        const unrefused: string[] = [];
        const contenderRan = path.join(marks, `contender-${contender}-ran`);
        fs.rmSync(contenderRan, { force: true });
        const until = Date.now() + HOLD_S * 1000;
        // Until the holder's command ends (a holder told it lost the lock stops it before it can remove its mark).
        while (fs.existsSync(running) && held.exitCode === null && Date.now() < until) {
          attempts++;
          // The contender's command records only what it saw inside the lock: the holder's mark still there.
          const r = await cliTimed(staticDir, ['lock', tag, '--', 'sh', '-c', `if [ -e ${running} ]; then touch ${contenderRan}; fi`], { timeoutMs: 20_000, user: contender });
          const stillRunning = fs.existsSync(running);
          if (fs.existsSync(contenderRan)) {
            steals.push(`attempt ${attempts}: ${contender}'s lock ${tag} ran its command (exit ${r.code}) while ${holder}'s command still ran (its mark was there${stillRunning ? '' : ', gone just after'}); stderr: ${r.stderr.trim().slice(0, 200)}`);
            fs.rmSync(contenderRan, { force: true });
          }
          // It ran, and was refused because the lock is held: not for want of a way to run at all.
          else if (stillRunning && !(r.code === 3 && r.stderr.includes(`${area} is held`))) unrefused.push(`attempt ${attempts}: exit ${r.code ?? r.signal}: ${r.stderr.trim().slice(0, 200)}`);
          for (const j of areaJunk(area)) leftovers.add(j);
          await sleep(500);
        }
        const code = await heldExit;
        // Once the holder is gone, the contender takes the lock and runs its command: it could all along.
        const contenderAfter = path.join(marks, `contender-${contender}-after`);
        const after = await cliTimed(staticDir, ['lock', tag, '--', 'touch', contenderAfter], { timeoutMs: 20_000, user: contender });
        report(
          `${holder} held ${HOLD_S} s; ${contender} tried ${attempts} times: ${attempts - unrefused.length - steals.length} refused as held, ${steals.length} steals, ${leftovers.size} leftovers; ` +
            `holder exit ${code}; then ${contender} took it (exit ${after.code})`,
        );
        assert.ok(steals.length === 0 && leftovers.size === 0, [
          `${steals.length} of ${attempts} attempts by ${contender} entered ${holder}'s live lock (umask 077, --stale 60 --refresh 25):`,
          ...steals.slice(0, 5),
          `left behind in ${area}: ${[...leftovers].join(', ') || 'nothing'}`,
          `holder exited ${code}; holder stderr: ${heldErr.trim().slice(0, 300)}`,
        ].join('\n  '));
        assert.equal(code, 0, `${holder}'s lock -- cmd exited ${code}: ${heldErr}`);
        assert.ok(attempts >= 5, `${contender} tried only ${attempts} times`);
        assert.deepEqual(unrefused.slice(0, 5), [], `every attempt by ${contender} ran and was refused as held`);
        assert.equal(after.code, 0, `${contender} could not take the free lock: ${after.stderr}`);
        assert.ok(fs.existsSync(contenderAfter), `${contender}'s command did not run once the lock was free`);
      } finally {
        if (held.exitCode === null) held.kill('SIGKILL');
      }
    });
  }
});
