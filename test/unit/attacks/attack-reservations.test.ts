/**
 * Attacks on reservations, as a hostile co-user and as bad luck would make them: records planted
 * or edited (ends that are no time, far off, huge; `reservation.json` as a link, a FIFO, a hard
 * link to a file outside, a directory, a 100 MB file), an extender paused across its reservation's
 * end while another takes the build, `reserve` killed at each of its steps, reservations nested
 * with locks, hostile notes, and `release` aimed at a live process's plain lock. The kernel
 * referees: an `O_EXCL` marker in the new holder's command, the lock's inode and record bytes,
 * canaries outside the static directory hashed before and after.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { spawnSync } from 'child_process';
import { changes, cliTimed, describeRun, fingerprint, hasTool, plantCanaries, processState, statusJson, type Timed } from '../../attack';
import { type SshfsExport, startSshfs, whyNoSshfs } from '../../sshfs';
import { FAKETIME, type Host, cliOnHost } from '../../hosts';
import { cleanup, isRoot, report, tempDir, waitFor } from '../../helpers';
import { inspect } from '../../../src/core/lock/inspect';
import { reserve } from '../../../src/core/reserve';
import type { LockInfo } from '../../../src/core/base/types';

const DAY = 86_400_000;
const MAX_MS = 30 * DAY;

function spawnOk(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args);
  assert.equal(r.status, 0, `${cmd}: ${String(r.stderr)}`);
}

/** Starts the CLI stopped at `step` (DEVSERVER_STAGING_PAUSE_AT), and resolves once the kernel says it is stopped there. */
async function pausedAt(staticDir: string, args: readonly string[], stepName: string, host?: Host): Promise<{ pid: number; done: Promise<Timed> }> {
  let pid = 0;
  const onSpawn = (p: number): number => (pid = p);
  const pause = { DEVSERVER_STAGING_PAUSE_AT: stepName };
  const done = host !== undefined ? onHost(host, args, pause, onSpawn) : cliTimed(staticDir, args, { timeoutMs: 60_000, env: pause, onSpawn });
  let ended = false;
  void done.then(() => (ended = true));
  await waitFor(() => (ended || processState(pid) === 'T' ? true : undefined), 20_000, `${args.join(' ')} to stop at ${stepName}`);
  if (ended) assert.fail(`${args.join(' ')} ended before it reached ${stepName}: ${describeRun(args[0], await done)}`);
  return { pid, done };
}

/** `devserver-stage ARGS` on `host`. */
function onHost(host: Host, args: readonly string[], env: NodeJS.ProcessEnv = {}, onSpawn?: (pid: number) => void): Promise<Timed> {
  return cliOnHost(host, args, { env, ...(onSpawn !== undefined ? { onSpawn } : {}) });
}

describe('attacks on reservations', function () {
  this.timeout(120_000);
  let root = '';
  let staticDir = '';
  let outside = '';
  let canariesBefore = new Map<string, string>();
  const tag = 'eve/R1';
  let area = '';
  let lockDir = '';

  before(() => assert.ok(isRoot, 'these attacks run as root (to plant what a co-user could)'));

  beforeEach(() => {
    root = tempDir('dss-attack-res-');
    staticDir = path.join(root, 'static');
    outside = path.join(root, 'outside');
    area = path.join(staticDir, tag);
    lockDir = path.join(area, 'devserver.lock');
    fs.mkdirSync(area, { recursive: true });
    fs.writeFileSync(path.join(area, 'image.bin'), 'build');
    plantCanaries(outside);
    canariesBefore = fingerprint(outside);
  });
  afterEach(() => {
    if (root === '') return;
    const moved = changes(outside, canariesBefore, fingerprint(outside));
    cleanup(root);
    assert.deepEqual(moved, [], 'nothing outside the static directory changed');
  });

  it("an extender paused across its reservation's end, while another takes the build over: never are both told they hold it", async () => {
    // Stopped once it checked the reservation (before it writes), and once its new end is written under a temporary name.
    const STEPS = ['reservation.checked', 'reservation.written'];
    let rounds = 0;
    for (const [round, stepName] of STEPS.entries()) {
      const marker = path.join(root, `inside.${round}`);
      const old = await reserve(staticDir, tag, { forMs: 3_000, note: `round ${round}` });
      // The owner's extend stops once it has checked that the reservation is its own, before it ends.
      const ext = await pausedAt(staticDir, ['reserve', tag, '--extend', '--for', '1h'], stepName);
      const ended = await waitFor(async () => {
        const now = await inspect(staticDir, tag);
        return now.reservation?.ended === true ? now : undefined;
      }, 20_000, 'the reservation to end');
      assert.equal(ended.holder?.token, old.holder?.token);
      // A taker judges it ended and stops having checked the lock, just before it takes it apart.
      // Its command makes an O_EXCL marker: the kernel's word that it entered.
      const taker = await pausedAt(staticDir, ['lock', tag, '--', 'sh', '-c', 'set -C; : > "$0"', marker], 'takeover.checked');
      process.kill(ext.pid, 'SIGCONT');
      const extended = await ext.done;
      process.kill(taker.pid, 'SIGCONT');
      const took = await taker.done;
      const entered = fs.existsSync(marker);
      assert.equal(took.code === 0, entered, describeRun('the taker', took));
      assert.ok(!(extended.code === 0 && entered), `both were told they hold it: ${describeRun('the extend', extended)} and the taker ran its command`);
      assert.ok(extended.code === 0 || / ended at | had passed, when another could already have taken the build/.test(extended.stderr), describeRun('the extend', extended));
      assert.ok(entered, 'the taker took the ended reservation over');
      report(`extend stopped at ${stepName}: ${describeRun('extend', extended)}; the taker entered`);
      await cliTimed(staticDir, ['force-release', tag], { timeoutMs: 20_000 });
      rounds++;
    }
    assert.equal(rounds, STEPS.length);
  });

  it('an extend stopped while a force-release takes its reservation apart is never reported done, at each step of the take-apart', async () => {
    // The force-release stops at each step it passes once it has begun to take the lock apart.
    const STEPS = ['unlock.recordMoved', 'unlock.counterRestored'];
    let rounds = 0;
    for (const [round, stepName] of STEPS.entries()) {
      const marker = path.join(root, `inside.${round}`);
      await reserve(staticDir, tag, { forMs: 3_600_000, note: `round ${round}` });
      const ext = await pausedAt(staticDir, ['reserve', tag, '--extend', '--for', '2h'], 'reservation.written');
      const forced = await pausedAt(staticDir, ['force-release', tag], stepName);
      // The attack reached its moment: the record has gone into the work directory, which is still in the lock.
      const works = fs.readdirSync(lockDir).filter((n) => n.startsWith('work.'));
      assert.equal(works.length, 1, fs.readdirSync(lockDir).join(' '));
      assert.ok(fs.existsSync(path.join(lockDir, works[0], 'owner.json')), 'the owner record was moved into the work directory');
      process.kill(ext.pid, 'SIGCONT');
      const extended = await ext.done;
      process.kill(forced.pid, 'SIGCONT');
      const released = await forced.done;
      assert.equal(released.code, 0, describeRun('the force-release', released));
      const taken = await cliTimed(staticDir, ['lock', tag, '--', 'sh', '-c', 'set -C; : > "$0"', marker], { timeoutMs: 20_000 });
      assert.equal(taken.code, 0, describeRun('the next lock', taken));
      assert.ok(fs.existsSync(marker), 'the next holder entered');
      assert.notEqual(extended.code, 0, `the extend was reported done on a reservation being force-released: ${extended.stdout}`);
      assert.match(extended.stderr, /no longer there|force-released or taken over/, describeRun('the extend', extended));
      report(`force-release stopped at ${stepName}: ${describeRun('extend', extended)}`);
      rounds++;
    }
    assert.equal(rounds, STEPS.length);
  });

  it('planted ends in the owner record and in reservation.json (no time, far off, huge, below zero; a link, a FIFO, a hard link out, a directory, 100 MB) hang nothing, follow nothing, write nothing outside, and never hold past 30 days from the times recorded', async () => {
    // Reserved by a process that has exited: an end that is no time leaves a lock of a dead holder.
    const made = await cliTimed(staticDir, ['reserve', tag, '--for', '1h', '--note', 'planted'], { timeoutMs: 20_000 });
    assert.equal(made.code, 0, describeRun('reserve', made));
    const info = await statusJson(staticDir, tag);
    const token = info.holder!.token;
    const record = path.join(lockDir, 'owner.json');
    const original = fs.readFileSync(record, 'utf8');
    const acquired = Date.parse(info.holder!.acquiredAt);
    // Counted at most 30 days past the time recorded with the end: the owner record's acquiredAt, or a moved end's movedAt.
    const judged = async (what: string, from = acquired): Promise<LockInfo> => {
      const j = await statusJson(staticDir, tag);
      for (const args of [['list', 'eve'], ['status', tag], ['history', tag]]) {
        const r = await cliTimed(staticDir, args, { timeoutMs: 20_000 });
        assert.equal(r.code, 0, `${what}: ${describeRun(args.join(' '), r)}`);
      }
      if (j.reservation !== undefined) {
        const until = Date.parse(j.reservation.until);
        assert.ok(Number.isFinite(until), `${what}: ${j.reservation.until}`);
        assert.ok(until <= from + MAX_MS || j.reservation.ended, `${what}: held until ${j.reservation.until}, past 30 days from ${new Date(from).toISOString()}`);
      }
      return j;
    };
    const plantRecord = (fields: Record<string, unknown>): void => {
      fs.writeFileSync(`${record}.new`, JSON.stringify({ ...(JSON.parse(original) as Record<string, unknown>), ...fields }));
      fs.renameSync(`${record}.new`, record);
    };
    let cases = 0;
    for (const [what, end, expect] of [
      ['far off', '9999-12-31T00:00:00Z', 'held'],
      ['the largest time', '+275760-09-13T00:00:00.000Z', 'held'],
      ['below zero', '-271821-04-20T00:00:00.000Z', 'stale'],
      ['the epoch', '1970-01-01T00:00:00.000Z', 'stale'],
      ['no time', 'NaN', 'stale'],
      ['a number', 1e300, 'stale'],
      ['an object', { valueOf: 1 }, 'stale'],
    ] as const) {
      plantRecord({ reservedUntil: end });
      const j = await judged(what);
      // Not a time: an ordinary lock, whose holder (the reserving process) has exited.
      assert.equal(j.state, expect, `${what}: ${JSON.stringify(j)}`);
      cases++;
    }
    fs.writeFileSync(record, original);
    assert.equal((await judged('as made')).reservation?.until, info.reservation!.until);

    // What its owner (or a co-user who may write there) puts in place of the moved end.
    const work = path.join(lockDir, `work.${token}`);
    const moved = path.join(work, 'reservation.json');
    const far = JSON.stringify({ token, reservedUntil: '9999-01-01T00:00:00Z', movedAt: '9998-12-31T00:00:00Z' });
    const outsideRecord = path.join(outside, 'record.json');
    fs.writeFileSync(outsideRecord, far);
    canariesBefore = fingerprint(outside);
    const plants: [string, () => void, (j: LockInfo) => void][] = [
      ['a link to a record outside', () => fs.symlinkSync(outsideRecord, moved), (j) => assert.equal(j.reservation?.until, info.reservation!.until, 'the link was not followed')],
      ['a FIFO', () => spawnOk('mkfifo', [moved]), (j) => assert.equal(j.reservation?.until, info.reservation!.until)],
      ['a directory', () => fs.mkdirSync(path.join(moved, 'x'), { recursive: true }), (j) => assert.equal(j.reservation?.until, info.reservation!.until)],
      ['100 MB', () => fs.writeFileSync(moved, Buffer.alloc(100 * 1024 * 1024, '{')), (j) => assert.equal(j.reservation?.until, info.reservation!.until)],
      [
        'a hard link to a record outside, moved a century on',
        () => fs.linkSync(outsideRecord, moved),
        // Read, as its owner's own file (only its owner and root may write there); its movedAt is text too.
        (j) => assert.equal(j.reservation!.until, '9999-01-01T00:00:00.000Z'),
      ],
    ];
    for (const [what, plant, check] of plants) {
      plant();
      check(await judged(what, what.startsWith('a hard link') ? Date.parse('9998-12-31T00:00:00Z') : acquired));
      // Its owner extends: the planted name is replaced, never written through, and nothing outside changes.
      const ext = await cliTimed(staticDir, ['reserve', tag, '--extend', '--for', '2h'], { timeoutMs: 20_000 });
      const after = await statusJson(staticDir, tag);
      if (what === 'a directory') {
        assert.notEqual(ext.code, 0, describeRun(`extend over ${what}`, ext));
        assert.match(ext.stderr, /reservation\.json|directory/, describeRun(`extend over ${what}`, ext));
        assert.equal(after.reservation?.until, info.reservation!.until);
        fs.rmSync(moved, { recursive: true });
      } else {
        assert.equal(ext.code, 0, describeRun(`extend over ${what}`, ext));
        assert.ok(fs.lstatSync(moved).isFile() && fs.lstatSync(moved).nlink === 1, `${what}: replaced by a file of its own`);
        assert.ok(Math.abs(Date.parse(after.reservation!.until) - (Date.now() + 2 * 3_600_000)) < 600_000, `${what}: ${after.reservation?.until}`);
        fs.rmSync(moved);
      }
      assert.equal(fs.readFileSync(outsideRecord, 'utf8'), far, `${what}: the file outside is unchanged`);
      cases++;
    }
    assert.deepEqual(fs.readdirSync(work).filter((n) => n.startsWith('reservation.json.')), [], 'no temporary record was left');
    assert.equal(cases, 7 + plants.length);

    // An end at the epoch is a time: ended, even while the process that reserved lives (a library caller, an editor).
    assert.equal((await cliTimed(staticDir, ['release', tag], { timeoutMs: 20_000 })).code, 0);
    const live = await reserve(staticDir, tag, { forMs: 3_600_000 });
    assert.equal(live.holder?.pid, process.pid);
    const liveRecord = JSON.parse(fs.readFileSync(record, 'utf8')) as Record<string, unknown>;
    fs.writeFileSync(record, JSON.stringify({ ...liveRecord, reservedUntil: '1970-01-01T00:00:00.000Z' }));
    const epoch = await inspect(staticDir, tag);
    assert.equal(epoch.state, 'stale', JSON.stringify(epoch));
    assert.equal(epoch.reservation?.ended, true);
  });

  it("a co-user's end planted in a work directory others may write (a reservation made under umask 000) moves nothing", async () => {
    fs.chmodSync(root, 0o755);
    fs.chmodSync(staticDir, 0o1777);
    for (const d of [path.dirname(area), area]) fs.chmodSync(d, 0o777);
    const made = await cliTimed(staticDir, ['reserve', tag, '--for', '1h'], { timeoutMs: 20_000, umask: '000' });
    assert.equal(made.code, 0, describeRun('reserve under umask 000', made));
    const info = await statusJson(staticDir, tag);
    const work = path.join(lockDir, `work.${info.holder!.token}`);
    assert.equal(fs.statSync(work).mode & 0o777, 0o777, 'the work directory is writable by all');
    const planted = JSON.stringify({ token: info.holder!.token, reservedUntil: '2099-01-01T00:00:00Z', movedAt: '2099-01-01T00:00:00Z' });
    const w = spawnSync('runuser', ['-u', 'nobody', '--', 'sh', '-c', 'printf %s "$1" > "$0"', path.join(work, 'reservation.json'), planted]);
    assert.equal(w.status, 0, String(w.stderr));
    assert.notEqual(fs.statSync(path.join(work, 'reservation.json')).uid, 0, "the planted file is nobody's");
    const after = await statusJson(staticDir, tag);
    assert.equal(after.reservation?.until, info.reservation?.until, "the co-user's end is not the reservation's");
    assert.equal((await statusJson(staticDir, tag)).state, 'held');
    // Its owner still moves it, over the planted file.
    const ext = await cliTimed(staticDir, ['reserve', tag, '--extend', '--for', '2h'], { timeoutMs: 20_000 });
    assert.equal(ext.code, 0, describeRun('extend by the owner', ext));
    assert.ok(Date.parse((await statusJson(staticDir, tag)).reservation!.until) > Date.parse(info.reservation!.until) + 30 * 60_000);
  });

  it('release aimed at a live plain lock of the same user, and a reservation of a nested area, refuse and touch nothing', async () => {
    fs.mkdirSync(path.join(staticDir, 'board', 'b2'), { recursive: true });
    // A plain lock held by a live process of this user: not a reservation, so release refuses and says what to do.
    const started = path.join(root, 'started');
    const holder = cliTimed(staticDir, ['lock', tag, '--', 'sh', '-c', 'touch "$0"; exec sleep 60', started], { timeoutMs: 90_000 });
    let holderPid = 0;
    await waitFor(() => (fs.existsSync(started) ? true : undefined), 20_000, 'the holder to run its command');
    const before = await statusJson(staticDir, tag);
    holderPid = before.holder!.pid;
    const recordBytes = fs.readFileSync(path.join(lockDir, 'owner.json'));
    const ino = fs.statSync(lockDir).ino;
    for (const args of [['release', tag], ['reserve', tag, '--extend', '--for', '1h']]) {
      const r = await cliTimed(staticDir, args, { timeoutMs: 20_000 });
      assert.notEqual(r.code, 0, describeRun(args.join(' '), r));
      assert.match(r.stderr, /is not reserved: it is locked by .*force-release/s, describeRun(args.join(' '), r));
    }
    assert.equal(fs.statSync(lockDir).ino, ino, 'the same lock');
    assert.deepEqual(fs.readFileSync(path.join(lockDir, 'owner.json')), recordBytes, 'its record as it was');
    assert.equal((await statusJson(staticDir, tag)).state, 'held');
    process.kill(holderPid, 'SIGTERM');
    await holder;

    // Holding an area covers everything below it, a reservation too, both ways.
    const board = await reserve(staticDir, 'board', { forMs: 3_600_000, note: 'whole board' });
    const below = await cliTimed(staticDir, ['lock', 'board/b2', '--', 'touch', path.join(root, 'below')], { timeoutMs: 20_000 });
    assert.equal(below.code, 3, describeRun('lock board/b2 under a reservation of board', below));
    const belowRes = await cliTimed(staticDir, ['reserve', 'board/b2', '--for', '1h'], { timeoutMs: 20_000 });
    assert.equal(belowRes.code, 3, describeRun('reserve board/b2 under a reservation of board', belowRes));
    assert.equal(fs.existsSync(path.join(root, 'below')), false);
    assert.equal((await statusJson(staticDir, 'board')).holder?.token, board.holder?.token);
    assert.equal(fs.existsSync(path.join(staticDir, 'board', 'b2', 'devserver.lock')), false, 'no lock left below');
    assert.equal((await cliTimed(staticDir, ['release', 'board'], { timeoutMs: 20_000 })).code, 0);

    const b2 = await reserve(staticDir, 'board/b2', { forMs: 3_600_000 });
    const above = await cliTimed(staticDir, ['reserve', 'board', '--for', '1h'], { timeoutMs: 20_000 });
    assert.equal(above.code, 3, describeRun('reserve board over a reservation of board/b2', above));
    assert.equal(fs.existsSync(path.join(staticDir, 'board', 'devserver.lock')), false, 'no lock left above');
    assert.equal((await statusJson(staticDir, 'board/b2')).holder?.token, b2.holder?.token);
    assert.equal((await cliTimed(staticDir, ['release', 'board/b2'], { timeoutMs: 20_000 })).code, 0);

    // A reservation of board that has ended is taken over by a reserver of board/b2, never stepped past.
    await reserve(staticDir, 'board', { forMs: 1_000 });
    await waitFor(async () => ((await inspect(staticDir, 'board')).state === 'stale' ? true : undefined), 20_000, "board's reservation to end");
    const nested = await cliTimed(staticDir, ['reserve', 'board/b2', '--for', '1h'], { timeoutMs: 20_000 });
    assert.equal(nested.code, 0, describeRun('reserve board/b2 below an ended reservation', nested));
    assert.equal(fs.existsSync(path.join(staticDir, 'board', 'devserver.lock')), false, "board's ended reservation was taken over");
    const kinds = (await cliTimed(staticDir, ['--json', 'history', 'board'], { timeoutMs: 20_000 })).stdout;
    assert.match(kinds, /"kind":"taken-over"/);
  });

  it('reserve SIGKILLed at each of its steps leaves the build free, or reserved with an end its owner can release', async () => {
    const log = path.join(root, 'steps');
    const r = await cliTimed(staticDir, ['reserve', tag, '--for', '1h'], { timeoutMs: 20_000, env: { DEVSERVER_STAGING_STEP_LOG: log } });
    assert.equal(r.code, 0, describeRun('reserve', r));
    assert.equal((await cliTimed(staticDir, ['release', tag], { timeoutMs: 20_000 })).code, 0);
    const steps = [...new Set(fs.readFileSync(log, 'utf8').trim().split('\n'))];
    assert.ok(steps.length >= 4, steps.join(' '));
    for (const stepName of steps) {
      const p = await pausedAt(staticDir, ['reserve', tag, '--for', '1h'], stepName);
      process.kill(p.pid, 'SIGKILL');
      const killed = await p.done;
      assert.equal(killed.signal, 'SIGKILL');
      const j = await statusJson(staticDir, tag);
      if (j.state === 'held') {
        assert.ok(j.reservation !== undefined && !j.reservation.ended, `killed at ${stepName}: held, and not as a reservation: ${JSON.stringify(j)}`);
        assert.ok(Date.parse(j.reservation.until) <= Date.parse(j.holder!.acquiredAt) + 3_600_000, `killed at ${stepName}: ${j.reservation.until}`);
        const rel = await cliTimed(staticDir, ['release', tag], { timeoutMs: 20_000 });
        assert.equal(rel.code, 0, describeRun(`release after a kill at ${stepName}`, rel));
      }
      const next = await cliTimed(staticDir, ['lock', tag, '--', 'true'], { timeoutMs: 20_000 });
      assert.equal(next.code, 0, `killed at ${stepName} (${j.state}): ${describeRun('the next lock', next)}`);
      report(`reserve killed at ${stepName}: ${j.state}${j.reservation !== undefined ? ' (a reservation, released by its owner)' : ''}, then locked`);
    }
  });

  it('a hostile note is inert on every surface', async () => {
    const note = `x\u001b]0;pwned\u0007\u202eevil\u200b [run](command:workbench.action.terminal.sendSequence) ${'y'.repeat(5000)}`;
    const r = await cliTimed(staticDir, ['reserve', tag, '--for', '1h', '--note', note], { timeoutMs: 20_000 });
    assert.equal(r.code, 0, describeRun('reserve', r));
    const outs: [string, string][] = [];
    for (const args of [['status', tag], ['list', 'eve'], ['history', tag], ['--json', 'status', tag], ['--json', 'history', tag], ['--json', 'list', 'eve']]) {
      const o = await cliTimed(staticDir, args, { timeoutMs: 20_000 });
      assert.equal(o.code, 0, describeRun(args.join(' '), o));
      outs.push([args.join(' '), o.stdout]);
    }
    const watched = await cliTimed(staticDir, ['watch', 'eve'], { timeoutMs: 20_000, termAfterMs: 3_000 });
    outs.push(['watch', watched.stdout]);
    assert.ok(watched.stdout.includes('eve/R1'), watched.stdout);
    for (const [what, out] of outs) {
      assert.doesNotMatch(out, /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069]/, what);
      assert.ok(!out.includes('y'.repeat(300)), `${what}: the note is cut`);
    }
    assert.equal((await statusJson(staticDir, tag)).holder?.purpose?.length, 200);
  });
});

describe('attacks on reservations across two sshfs clients, their clocks hours apart', function () {
  this.timeout(180_000);
  let share: SshfsExport | undefined;
  const tag = 'eve/R1';

  before(async () => {
    // This machine can run it: fail rather than skip where a tool is missing.
    assert.equal(await whyNoSshfs(), undefined);
    assert.ok(FAKETIME !== undefined && hasTool('unshare'), 'libfaketime and unshare are needed');
    share = await startSshfs('dss-attack-res-sshfs-');
    fs.mkdirSync(path.join(share.exportDir, tag), { recursive: true });
  });
  after(async () => share?.stop());

  it("an extend on one client while the other releases or force-releases: never reported done on a reservation taken apart, and ends judged by the filesystem's clock", async () => {
    // A's clock two hours behind, B's two hours ahead: by its own clock B would call an hour's reservation long over.
    const a: Host = { name: 'hosta', mount: share!.mountA, offsetS: -7_200 };
    const b: Host = { name: 'hostb', mount: share!.mountB, offsetS: 7_200 };
    const r = await onHost(a, ['reserve', tag, '--for', '1h']);
    assert.equal(r.code, 0, describeRun('reserve on A', r));
    const moved = await onHost(b, ['--json', 'reserve', tag, '--extend', '--for', '3h']);
    assert.equal(moved.code, 0, describeRun('extend on B, whose own clock is past the end', moved));
    const status = JSON.parse((await onHost(a, ['--json', 'status', tag])).stdout) as LockInfo;
    assert.ok(status.reservation!.leftMs > 170 * 60_000 && status.reservation!.leftMs <= 3 * 3_600_000 + 2_000, `about three hours left, by the filesystem's clock: ${status.reservation!.leftMs}`);
    assert.equal((await onHost(a, ['release', tag])).code, 0);

    let rounds = 0;
    for (const [verb, stepName] of [
      ['release', 'unlock.recordMoved'],
      ['force-release', 'unlock.counterRestored'],
    ] as const) {
      assert.equal((await onHost(a, ['reserve', tag, '--for', '1h'])).code, 0);
      const ext = await pausedAt('', ['reserve', tag, '--extend', '--for', '2h'], 'reservation.written', b);
      const taker = await pausedAt('', [verb, tag], stepName, a);
      process.kill(ext.pid, 'SIGCONT');
      const extended = await ext.done;
      process.kill(taker.pid, 'SIGCONT');
      const took = await taker.done;
      assert.equal(took.code, 0, describeRun(verb, took));
      const marker = path.join(share!.exportDir, `inside.${verb}`);
      const next = await onHost(a, ['lock', tag, '--', 'sh', '-c', 'set -C; : > "$0"', path.join(share!.mountA, `inside.${verb}`)]);
      assert.equal(next.code, 0, describeRun('the next lock on A', next));
      assert.ok(fs.existsSync(marker), 'the next holder entered');
      assert.notEqual(extended.code, 0, `the extend on B was reported done on a reservation A took apart: ${extended.stdout}`);
      assert.match(extended.stderr, /no longer there/, describeRun('the extend on B', extended));
      report(`${verb} on A stopped at ${stepName}, extend on B stopped after writing: ${describeRun('extend', extended)}`);
      rounds++;
    }
    assert.equal(rounds, 2);
  });
});
