/**
 * Reservations: a build's lock held for a person until an end, by real processes that have exited
 * by the time it is judged. It excludes `lock -- CMD`, `stage`, the core and the Python devserver
 * while it lasts; it is stale after its end, judged by the filesystem's clock (played here by a
 * judge whose clock libfaketime moves past the end: on a local filesystem the filesystem's clock is
 * the machine's); only the user the kernel says owns it (its work directory's owner) moves or
 * releases it, whatever its record says; and one force-released meanwhile is never acted on,
 * even by a release paused after it checked.
 */
import { strict as assert } from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { type Timed, areaJunk, cliTimed, describeRun, hasTool, pidAlive, statusJson } from '../../attack';
import { type SshfsExport, startSshfs, whyNoSshfs } from '../../sshfs';
import { FAKETIME, clockOff, cliOnHost } from '../../hosts';
import { CLI, CLI_HINT, WORKERS, cleanup, isRoot, rejectsWith, report, run, tempDir, waitFor } from '../../helpers';
import { acquire } from '../../../src/core/lock/lock';
import { inspect } from '../../../src/core/lock/inspect';
import { history } from '../../../src/core/log/history';
import { extendReservation, releaseReservation, reserve } from '../../../src/core/reserve';
import { reservationDuration } from '../../../src/core/lock/reservation';
import { nextStepWords } from '../../../src/core/base/errors';
import type { LockInfo } from '../../../src/core/base/types';

const PYTHON = '/usr/bin/python3';
const TRY_ACQUIRE = `
import json, sys, lockfile
lock = lockfile.FileLock(sys.argv[1])
try:
    lock.acquire(timeout=0)
except lockfile.AlreadyLocked:
    print('AlreadyLocked')
else:
    lock.release()
    print('acquired')
`;

/** A process whose clock is `offsetS` seconds ahead: on a local filesystem, a judge for whom the filesystem's clock is that far on. */
const ahead = (offsetS: number): NodeJS.ProcessEnv => clockOff(offsetS);

const statusOf = (staticDir: string, tag: string, env: NodeJS.ProcessEnv = {}, user?: string): Promise<LockInfo> => statusJson(staticDir, tag, { env, ...(user !== undefined ? { user } : {}) });

describe('reservations', function () {
  this.timeout(120_000);
  let root = '';
  let staticDir = '';
  const tag = 'eve/R1';
  let area = '';

  before(function () {
    // This machine can run them all: fail rather than skip where a tool is missing.
    assert.ok(isRoot && hasTool('runuser'), 'these tests need root and runuser (to act as the users nobody and daemon)');
    assert.ok(FAKETIME !== undefined, "libfaketime is missing: install Debian's faketime");
    assert.ok(fs.existsSync(PYTHON), `${PYTHON} with python3-lockfile is needed`);
  });

  beforeEach(() => {
    root = tempDir('dss-reserve-');
    fs.chmodSync(root, 0o755);
    staticDir = path.join(root, 'static');
    area = path.join(staticDir, tag);
    fs.mkdirSync(area, { recursive: true });
    // Shared by several users, as a static directory is; the build writable by all, as a group-shared one is.
    fs.chmodSync(staticDir, 0o1777);
    fs.chmodSync(path.dirname(area), 0o777);
    fs.chmodSync(area, 0o777);
    fs.writeFileSync(path.join(area, 'image.bin'), 'build');
  });
  afterEach(() => root && cleanup(root));

  it('holds the lock until its end after its process has gone: lock, stage, the core and the Python devserver are refused; after the end it is stale and taken over', async () => {
    const r = await cliTimed(staticDir, ['reserve', tag, '--for', '1h', '--note', 'flashing DUT-3'], { timeoutMs: 20_000 });
    assert.equal(r.code, 0, describeRun('reserve', r));
    assert.match(r.stdout, /^Reserved eve\/R1: root until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: flashing DUT-3 \(fencing token 1\)\.\n$/);
    const info = await statusOf(staticDir, tag);
    assert.equal(info.state, 'held');
    assert.equal(info.holder?.purpose, 'flashing DUT-3');
    assert.equal(info.reservation?.mine, true);
    assert.equal(info.reservation?.ended, false);
    // Its process has exited: nothing but the reservation keeps it held.
    assert.equal(pidAlive(info.holder.pid), false, 'the reserving process has exited');

    // watch says it too, its end included: its first line, then it ends with its reader.
    const watched = await run('sh', ['-c', `"$0" "$1" --json watch eve | head -1`, process.execPath, CLI], { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir } });
    const line = JSON.parse(watched.stdout) as { tag: string; state: string; purpose: string; reservedUntil: string };
    assert.deepEqual([line.tag, line.state, line.purpose, line.reservedUntil], [tag, 'held', 'flashing DUT-3', info.reservation.until]);

    const marker = path.join(root, 'ran');
    const locked = await cliTimed(staticDir, ['lock', tag, '--', 'touch', marker], { timeoutMs: 20_000 });
    assert.equal(locked.code, 3, describeRun('lock', locked));
    assert.match(locked.stderr, /held: a reservation by root@\S+ \(reserved until .*, flashing DUT-3\)\. Wait for it to be released \(--wait\), or ask its owner to release it \(devserver-stage release eve\/R1\), or force-release it/);
    const waited = await cliTimed(staticDir, ['lock', '--wait', '1', tag, '--', 'touch', marker], { timeoutMs: 20_000 });
    assert.equal(waited.code, 3, describeRun('lock --wait 1', waited));
    fs.writeFileSync(path.join(root, 'more.bin'), 'more');
    const staged = await cliTimed(staticDir, ['stage', '--add', tag, path.join(root, 'more.bin')], { timeoutMs: 20_000 });
    assert.equal(staged.code, 3, describeRun('stage --add', staged));
    const again = await cliTimed(staticDir, ['reserve', tag, '--for', '1h'], { timeoutMs: 20_000, user: 'nobody' });
    assert.equal(again.code, 3, describeRun('reserve by nobody', again));
    await rejectsWith(acquire(staticDir, tag, { createOnce: false }), 'ELOCKED');
    const py = await run(PYTHON, ['-c', TRY_ACQUIRE, path.join(area, 'devserver')]);
    assert.equal(py.stdout.trim(), 'AlreadyLocked', py.stderr);
    assert.equal(fs.existsSync(marker), false, 'no command ran under the reservation');
    assert.equal(fs.existsSync(path.join(area, 'more.bin')), false, 'nothing was staged under the reservation');

    // Judged when the filesystem's clock reads a minute before the end: held; a minute after: stale.
    const before = await statusOf(staticDir, tag, ahead(59 * 60));
    assert.equal(before.state, 'held', JSON.stringify(before));
    const after = await statusOf(staticDir, tag, ahead(61 * 60));
    assert.equal(after.state, 'stale', JSON.stringify(after));
    assert.match(after.staleReason ?? '', /^its reservation ended at /);
    assert.equal(after.reservation?.ended, true);
    const list = await cliTimed(staticDir, ['list', 'eve'], { timeoutMs: 20_000 });
    assert.match(list.stdout, /^reserved +eve\/R1 +root@\S+ +until \S+ +flashing DUT-3$/m);

    // Then anyone takes it over, as a dead holder's lock, and the history says whose reservation ended.
    const took = await cliTimed(staticDir, ['lock', tag, '--', 'touch', marker], { timeoutMs: 20_000, env: ahead(61 * 60) });
    assert.equal(took.code, 0, describeRun('lock after the end', took));
    assert.equal(fs.existsSync(marker), true);
    const events = await history(staticDir, { tag });
    const kinds = events.map((e) => e.kind);
    assert.deepEqual(kinds.slice(0, 3), ['acquired', 'reserved', 'taken-over'], kinds.join(' '));
    const reserved = events[1];
    assert.equal(reserved.holder.purpose, 'flashing DUT-3');
    assert.equal(reserved.reservedUntil, info.reservation.until);
    assert.match(events[2].reason ?? '', /^a reservation that ended /);
    const shown = await cliTimed(staticDir, ['history', tag], { timeoutMs: 20_000 });
    assert.match(shown.stdout, / reserved +eve\/R1 +root@\S+ +fence 1, until \S+, for flashing DUT-3\n/);
  });

  it('a short reservation turns stale by itself, and nobody moves it once it has ended', async () => {
    const info = await reserve(staticDir, tag, { forMs: 1_500, note: 'short' });
    assert.equal(info.reservation?.ended, false);
    const ended = await waitFor(async () => {
      const now = await inspect(staticDir, tag);
      return now.state === 'stale' ? now : undefined;
    }, 20_000, 'the reservation to end');
    assert.equal(ended.reservation?.ended, true);
    await rejectsWith(extendReservation(staticDir, tag, { forMs: 3_600_000 }), 'ENOTHELD', 'ended at');
    // Releasing an ended one is tidying up, and is allowed to its owner.
    await releaseReservation(staticDir, tag);
    assert.equal((await inspect(staticDir, tag)).state, 'free');
  });

  it('only the user owning it extends or releases it: not root, not another user, not one who copies its record', async () => {
    const mine = await cliTimed(staticDir, ['reserve', tag, '--for', '1h', '--note', 'nobody flashing'], { timeoutMs: 20_000, user: 'nobody' });
    assert.equal(mine.code, 0, describeRun('reserve as nobody', mine));
    const first = await statusOf(staticDir, tag);
    assert.equal(first.reservation?.mine, false, 'not root\'s');
    assert.equal((await statusOf(staticDir, tag, {}, 'nobody')).reservation?.mine, true, "nobody's");

    for (const [user, cmd] of [
      [undefined, ['reserve', tag, '--extend', '--for', '2h']],
      [undefined, ['release', tag]],
      ['daemon', ['reserve', tag, '--extend', '--for', '2h']],
      ['daemon', ['release', tag]],
    ] as const) {
      const r = await cliTimed(staticDir, ['--json', ...cmd], { timeoutMs: 20_000, ...(user !== undefined ? { user } : {}) });
      assert.equal(r.code, 3, describeRun(`${cmd.join(' ')} as ${user ?? 'root'}`, r));
      const body = (JSON.parse(r.stderr) as { error: { code: string; next: { kind: string }[] } }).error;
      assert.equal(body.code, 'ENOTOWNER');
      assert.deepEqual(body.next.map((s) => s.kind), ['ask-owner']);
    }
    const unchanged = await statusOf(staticDir, tag);
    assert.equal(unchanged.reservation?.until, first.reservation?.until, 'nothing moved the end');

    // Its owner moves the end, then releases it.
    const moved = await cliTimed(staticDir, ['reserve', tag, '--extend', '--for', '3h'], { timeoutMs: 20_000, user: 'nobody' });
    assert.equal(moved.code, 0, describeRun('extend as nobody', moved));
    const later = await statusOf(staticDir, tag);
    assert.ok(Date.parse(later.reservation!.until) > Date.parse(first.reservation.until) + 90 * 60_000, `${later.reservation!.until} is about two hours past ${first.reservation.until}`);
    assert.equal((await statusOf(staticDir, tag, ahead(2 * 3600))).state, 'held', 'held past the first end');
    const released = await cliTimed(staticDir, ['release', tag], { timeoutMs: 20_000, user: 'nobody' });
    assert.equal(released.code, 0, describeRun('release as nobody', released));
    assert.equal((await statusOf(staticDir, tag)).state, 'free');

    // daemon reserves, and makes its record say nobody's in every field: still daemon's.
    const d = await cliTimed(staticDir, ['reserve', tag, '--for', '1h'], { timeoutMs: 20_000, user: 'daemon' });
    assert.equal(d.code, 0, describeRun('reserve as daemon', d));
    const record = path.join(area, 'devserver.lock', 'owner.json');
    const forged = { ...(JSON.parse(fs.readFileSync(record, 'utf8')) as Record<string, unknown>), user: 'nobody', clientId: first.holder!.clientId, pid: first.holder!.pid, hostname: first.holder!.hostname };
    const text = JSON.stringify(forged);
    const w = spawnSync('runuser', ['-u', 'daemon', '--', 'sh', '-c', 'cat > "$0.new" && mv "$0.new" "$0"', record], { input: text });
    assert.equal(w.status, 0, String(w.stderr));
    assert.equal(fs.statSync(record).uid, fs.statSync(path.dirname(record)).uid, "the forged record is daemon's own file");
    assert.equal((await statusOf(staticDir, tag)).holder?.user, 'nobody', 'the record now says nobody');
    const spoofed = await cliTimed(staticDir, ['release', tag], { timeoutMs: 20_000, user: 'nobody' });
    assert.equal(spoofed.code, 3, describeRun('release of the forged reservation as nobody', spoofed));
    assert.match(spoofed.stderr, /reserved by another user \(uid \d+/);
    assert.equal((await statusOf(staticDir, tag)).state, 'held', "daemon's reservation stands");
    // Root breaks it only with force-release, which the audit log records.
    const forced = await cliTimed(staticDir, ['force-release', tag], { timeoutMs: 20_000 });
    assert.equal(forced.code, 0, describeRun('force-release as root', forced));
    const audit = fs.readFileSync(path.join(staticDir, '.devserver-staging', 'audit.log'), 'utf8');
    assert.match(audit, /"action":"force-release","tag":"eve\/R1"/);
  });

  it("a force-released reservation is never extended or released by its old owner, and the new holder's lock stays, even for one paused after its check", async () => {
    const old = await reserve(staticDir, tag, { forMs: 3_600_000, note: 'old' });
    const oldToken = old.holder!.token;
    for (const [verb, args] of [
      ['release', ['release', tag]],
      ['extend', ['reserve', tag, '--extend', '--for', '2h']],
    ] as const) {
      // The old owner's command stops itself once it has checked that the reservation is its own.
      let pid = 0;
      const paused = cliTimed(staticDir, args, { timeoutMs: 60_000, env: { DEVSERVER_STAGING_PAUSE_AT: 'reservation.checked' }, onSpawn: (p) => (pid = p) });
      await waitFor(() => (fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.startsWith('T') === true ? true : undefined), 20_000, `${verb} to pause after its check`);
      const current = await inspect(staticDir, tag);
      const forced = await cliTimed(staticDir, ['force-release', tag], { timeoutMs: 20_000 });
      assert.equal(forced.code, 0, describeRun('force-release', forced));
      // The build is reserved anew by the same user: only the instance named tells them apart.
      const fresh = await reserve(staticDir, tag, { forMs: 3_600_000, note: 'new' });
      assert.notEqual(fresh.holder!.token, current.holder!.token);
      process.kill(pid, 'SIGCONT');
      const r = await paused;
      assert.equal(r.code, 1, describeRun(`the paused ${verb}`, r));
      assert.match(r.stderr, /no longer there: it was released, force-released or taken over since\. The lock there now was not touched\./);
      const now = await inspect(staticDir, tag);
      assert.equal(now.state, 'held');
      assert.equal(now.holder?.token, fresh.holder!.token, "the new reservation is in place");
      assert.equal(now.reservation?.until, fresh.reservation!.until, 'and its end is its own');
      report(`${verb} paused after its check, then ${current.holder!.token.slice(0, 6)} force-released and ${fresh.holder!.token.slice(0, 6)} reserved: refused, new lock intact`);
    }
    // A caller that names the instance it was shown is refused once another is there.
    const errors = [
      await rejectsWith(releaseReservation(staticDir, tag, { token: oldToken }), 'ENOTHELD', 'no longer there'),
      await rejectsWith(extendReservation(staticDir, tag, { token: oldToken, forMs: 60_000 }), 'ENOTHELD', 'no longer there'),
      await rejectsWith(acquire(staticDir, tag, { createOnce: false }), 'ELOCKED', 'a reservation by'),
    ];
    // In the core's words: no flag or command, and the next steps as data.
    for (const e of errors) {
      assert.doesNotMatch(e.message, CLI_HINT, e.message);
      assert.ok(e.next !== undefined && e.next.length > 0, e.message);
      assert.equal(e.message, `${e.facts} ${nextStepWords(e.next)}`);
    }
    assert.deepEqual(errors[0].next, [{ kind: 'reserve-again', staticDir, tag }]);
    assert.deepEqual(errors[2].next, [{ kind: 'wait', staticDir, tag }, { kind: 'ask-owner', staticDir, tag }]);
    assert.equal((await inspect(staticDir, tag)).state, 'held');
  });

  it('of 4 owners releasing one reservation at once while another waits to reserve it, exactly one releases it, and the new reservation stands, 10 times', async () => {
    const ROUNDS = 10;
    const RELEASERS = 4;
    let rounds = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const old = await reserve(staticDir, tag, { forMs: 3_600_000, note: `round ${round}` });
      const racers = [
        run(process.execPath, [path.join(WORKERS, 'reservation-racer.js'), staticDir, tag, 'reserve']),
        ...Array.from({ length: RELEASERS }, () => run(process.execPath, [path.join(WORKERS, 'reservation-racer.js'), staticDir, tag, 'release', old.holder!.token])),
      ];
      const outcomes = (await Promise.all(racers)).map((r) => JSON.parse(r.stdout) as { what: string; ok: boolean; code?: string; token?: string });
      const released = outcomes.filter((o) => o.what === 'release' && o.ok);
      const refused = outcomes.filter((o) => o.what === 'release' && !o.ok);
      assert.equal(released.length, 1, `round ${round}: ${JSON.stringify(outcomes)}`);
      assert.deepEqual(refused.map((o) => o.code), Array(RELEASERS - 1).fill('ENOTHELD'), `round ${round}`);
      const waiter = outcomes[0];
      assert.ok(waiter.ok && waiter.token !== undefined && waiter.token !== old.holder!.token, `round ${round}: the waiter reserved anew: ${JSON.stringify(waiter)}`);
      // The kernel's word: the lock in place is the waiter's, whole, and nothing was left about.
      const now = await inspect(staticDir, tag);
      assert.equal(now.holder?.token, waiter.token, `round ${round}`);
      assert.equal(now.reservation?.ended, false);
      assert.deepEqual(areaJunk(area), [], `round ${round}`);
      await releaseReservation(staticDir, tag);
      rounds++;
    }
    assert.equal(rounds, ROUNDS);
  });

  it('refuses lengths of zero, below zero, without a unit and over 30 days, naming the input and what to do', async () => {
    for (const text of ['0m', '-1h', '4', '31d', 'soon']) {
      const r = await cliTimed(staticDir, ['--json', 'reserve', tag, '--for', text], { timeoutMs: 20_000 });
      assert.equal(r.code, 2, describeRun(`--for ${text}`, r));
      const body = (JSON.parse(r.stderr) as { error: { code: string; message: string; next: unknown } }).error;
      assert.equal(body.code, 'EBADDURATION');
      assert.ok(body.message.includes(JSON.stringify(text)), body.message);
      assert.deepEqual(body.next, [{ kind: 'give-duration', maxDays: 30 }]);
    }
    assert.equal(reservationDuration('1d12h'), 36 * 3_600_000);
    assert.equal(reservationDuration('30d'), 30 * 86_400_000);
    // The core's words name no flag or command.
    for (const text of ['0s', '31d', 'x']) {
      try {
        reservationDuration(text);
        assert.fail(text);
      } catch (err) {
        const e = err as { message: string; facts: string; next: Parameters<typeof nextStepWords>[0] };
        assert.doesNotMatch(e.message, CLI_HINT);
        assert.equal(e.message, `${e.facts} ${nextStepWords(e.next)}`);
      }
    }
    assert.equal(fs.existsSync(path.join(area, 'devserver.lock')), false, 'nothing was locked');
    // A note is a co-user's text: shown escaped, on one line.
    const r = await cliTimed(staticDir, ['reserve', tag, '--for', '1h', '--note', 'x\u001b[2J\nfree eve/R9'], { timeoutMs: 20_000 });
    assert.equal(r.code, 0, describeRun('reserve with a hostile note', r));
    const status = await cliTimed(staticDir, ['status', tag], { timeoutMs: 20_000 });
    assert.doesNotMatch(status.stdout, /\u001b/);
    assert.match(status.stdout, /reserved until \S+, "x\\u001b\[2J\\nfree eve\/R9"\)/);

    // A record planted with a hostile user and an end whose text hides a line (Date.parse skips the comment).
    const record = path.join(area, 'devserver.lock', 'owner.json');
    const planted = { ...(JSON.parse(fs.readFileSync(record, 'utf8')) as Record<string, unknown>), user: 'mallory\u001b[2J', reservedUntil: 'Jan 1 2099 (\nfree  eve/FORGED)' };
    fs.writeFileSync(record, JSON.stringify(planted));
    for (const args of [['status', tag], ['list', 'eve'], ['history', tag]]) {
      const out = await cliTimed(staticDir, args, { timeoutMs: 20_000 });
      assert.equal(out.code, 0, describeRun(args.join(' '), out));
      assert.doesNotMatch(out.stdout, /\u001b|^free {2}eve\/FORGED/m, `${args[0]}: ${out.stdout}`);
    }
    const json = await statusOf(staticDir, tag);
    // Held until at most 30 days past when it was taken, its end written anew.
    assert.equal(json.state, 'held');
    assert.ok(Date.parse(json.reservation!.until) <= Date.parse(json.holder!.acquiredAt) + 30 * 86_400_000, json.reservation!.until);
    assert.match(json.reservation!.until, /^\d{4}-\d\d-\d\dT[\d:.]+Z$/);
  });
});

describe('reservations on two hosts sharing a static directory (sshfs), their clocks hours apart', function () {
  this.timeout(180_000);
  let share: SshfsExport | undefined;
  const tag = 'eve/R1';

  before(async () => {
    // This machine can run it: fail rather than skip where a tool is missing.
    assert.equal(await whyNoSshfs(), undefined);
    assert.ok(FAKETIME !== undefined && hasTool('unshare'), 'libfaketime and unshare are needed');
    share = await startSshfs('dss-reserve-sshfs-');
    fs.mkdirSync(path.join(share.exportDir, tag), { recursive: true });
  });
  after(async () => share?.stop());

  /** The tool on host `name` through its own sshfs client, its clock `offsetS` seconds off. */
  function onHost(name: string, mount: string, offsetS: number, args: readonly string[]): Promise<Timed> {
    return cliOnHost({ name, mount, offsetS }, args, { timeoutMs: 30_000 });
  }

  async function judged(name: string, mount: string, offsetS: number): Promise<LockInfo> {
    const r = await onHost(name, mount, offsetS, ['--json', 'status', tag]);
    assert.equal(r.code, 0, describeRun(`status on ${name}`, r));
    return JSON.parse(r.stdout) as LockInfo;
  }

  it('both call it held until its end and stale after it, by the filesystem\'s clock, whatever their own', async () => {
    const { mountA, mountB } = share!;
    // Host A's clock is two hours behind, host B's two hours ahead: by its own clock, B would call an hour's reservation long over.
    const r = await onHost('hosta', mountA, -7_200, ['reserve', tag, '--for', '1h', '--note', 'across hosts']);
    assert.equal(r.code, 0, describeRun('reserve on host A', r));
    const onA = await judged('hosta', mountA, -7_200);
    const onB = await judged('hostb', mountB, 7_200);
    for (const [host, info] of [['A', onA], ['B', onB]] as const) {
      assert.equal(info.state, 'held', `host ${host}: ${JSON.stringify(info)}`);
      assert.equal(info.reservation?.ended, false, `host ${host}`);
      // About an hour: each process measures the filesystem's clock to the whole second (clock.ts).
      assert.ok(info.reservation.leftMs > 50 * 60_000 && info.reservation.leftMs <= 3_602_000, `host ${host} sees about an hour left: ${info.reservation.leftMs} ms`);
    }
    assert.equal(onA.reservation?.until, onB.reservation?.until, 'one end, as the record says');
    const blocked = await onHost('hostb', mountB, 7_200, ['lock', tag, '--', 'true']);
    assert.equal(blocked.code, 3, describeRun('lock on host B', blocked));
    const released = await onHost('hosta', mountA, -7_200, ['release', tag]);
    assert.equal(released.code, 0, describeRun('release on host A', released));

    // A short one: once the filesystem's clock passes its end, both hosts call it stale.
    const short = await onHost('hosta', mountA, -7_200, ['reserve', tag, '--for', '4s']);
    assert.equal(short.code, 0, describeRun('short reserve on host A', short));
    const until = Date.parse((await judged('hostb', mountB, 7_200)).reservation!.until);
    // The file server here is this machine, so its clock is ours: wait past the end by the
    // precision each host measures the filesystem's clock to (whole seconds, each rounding its own way).
    await waitFor(() => (Date.now() > until + 2_500 ? true : undefined), 30_000, 'the end to pass', 100);
    for (const [host, mount, offset] of [['hosta', mountA, -7_200], ['hostb', mountB, 7_200]] as const) {
      const info = await judged(host, mount, offset);
      assert.equal(info.state, 'stale', `${host}: ${JSON.stringify(info)}`);
      assert.match(info.staleReason ?? '', /reservation ended/);
    }
    const took = await onHost('hostb', mountB, 7_200, ['lock', tag, '--', 'true']);
    assert.equal(took.code, 0, describeRun('lock on host B after the end', took));
  });
});
