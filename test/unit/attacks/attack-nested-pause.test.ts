/**
 * The takeover of a stale lock above or inside the area being locked (takeStale.ts
 * `takeOverNested`), stopped at each of its steps for longer than the stale threshold. The taker
 * `T` holds its own lock (on `board/b2`, or on `board`) and meets the dead lock `X` of the other
 * (`board`, or `board/b2`): a lock of this version, whose holder was killed, or a foreign one
 * (a record naming a process that is gone, no work directory: an older client's, another tool's).
 * While `T` is stopped, `P` locks the other area: it takes `X` over, and the stopped `T`'s lock
 * too (stale by now), and holds. Then `T` is continued. The kernel referees:
 * - inotify on `P`'s area: nothing moves, removes or replaces `P`'s `devserver.lock` while it
 *   holds it, not for an instant;
 * - `P` never loses its lease, and its lock is the same directory before and after;
 * - an `O_EXCL` marker (mkdir) held for `P`'s critical section never clashes with `T`'s.
 * Each trial checks that `T` was really stopped there, past the threshold, and that `P` got in.
 */
import { strict as assert } from 'assert';
import { spawn, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { forceRelease } from '../../../src/core/remove';
import { LOCK_NAME } from '../../../src/core/base/protocol';
import { pauserResult, pool, processState, runPauser, watchName } from '../../attack';
import { cleanup, exitOf, expectMessage, killAll, report, sleep, startWorker, tempDir, track, waitFor, type Msg } from '../../helpers';

// The shortest the core allows (clampTiming).
const timing = { staleMs: 2_000, refreshMs: 1_000 };
// Trials at once, each in a static directory of its own: a trial spends nearly all its time
// waiting out the pause, so several overlap without making any pause shorter.
const AT_ONCE = 6;

interface Scenario {
  /** The area `T` locks, and the one above or inside it whose dead lock it meets (then `P` locks that). */
  taker: string;
  other: string;
  kind: 'ours' | 'foreign';
  /** Steps of the nested takeover `T` must pass (and is stopped at, each in a trial). */
  steps: string[];
}

const OURS = ['takeover.judged', 'takeover.checked', 'unlock.recordMoved', 'unlock.counterRestored', 'unlock.workMoved', 'takeover.removed'];
const FOREIGN = ['takeover.judged', 'takeover.foreignChecked'];
const scenarios: Scenario[] = [
  { taker: 'board/b2', other: 'board', kind: 'ours', steps: OURS },
  { taker: 'board', other: 'board/b2', kind: 'ours', steps: OURS },
  { taker: 'board/b2', other: 'board', kind: 'foreign', steps: FOREIGN },
  { taker: 'board', other: 'board/b2', kind: 'foreign', steps: FOREIGN },
];

describe('attack: the takeover of a stale lock above or inside, stopped at each step', function () {
  this.timeout(120_000);
  let root: string;

  beforeEach(() => {
    root = tempDir('dss-nest-pause-');
  });
  afterEach(async () => {
    await killAll();
    cleanup(root);
  });

  function placeFor(name: string): string {
    const staticDir = path.join(root, name, 'static');
    fs.mkdirSync(path.join(staticDir, 'board', 'b2'), { recursive: true });
    return staticDir;
  }

  /** Leaves a dead holder's lock on `tag`: one of this version (its holder SIGKILLed), or a foreign one. */
  async function leaveDeadLock(staticDir: string, tag: string, kind: Scenario['kind']): Promise<void> {
    if (kind === 'ours') {
      const h = track(startWorker('holder', [JSON.stringify({ staticDir, tag, createOnce: false, ...timing })]));
      await expectMessage(h, (m) => m.type === 'acquired', 20_000, `the holder of ${tag}`);
      h.kill('SIGKILL');
      await exitOf(h);
      return;
    }
    const dead = spawn('true');
    await new Promise((r) => dead.once('exit', r));
    const lock = path.join(staticDir, tag, LOCK_NAME);
    fs.mkdirSync(lock);
    const record = { pid: dead.pid, hostname: os.hostname(), token: 'foreign', acquiredAt: new Date().toISOString(), ...timing };
    fs.writeFileSync(path.join(lock, 'owner.json'), JSON.stringify(record));
  }

  const runTaker = (staticDir: string, tag: string, env: NodeJS.ProcessEnv): ChildProcess => runPauser({ staticDir, tag, op: 'cycle', ...timing }, env);

  /** One trial: `T` stopped at `point`, `P` taking the other area meanwhile, then `T` continued. What went wrong. */
  async function trial(sc: Scenario, point: string, staticDir: string): Promise<string[]> {
    const failures: string[] = [];
    await leaveDeadLock(staticDir, sc.other, sc.kind);
    const t = runTaker(staticDir, sc.taker, { DEVSERVER_STAGING_PAUSE_AT: point });
    const tResult = pauserResult(t);
    await waitFor(() => (processState(t.pid!) === 'T' ? true : undefined), 20_000, `the taker to stop at ${point}`, 5);
    await sleep(timing.staleMs + 200);
    assert.equal(processState(t.pid!), 'T', `the taker is still stopped at ${point}`);
    const p = track(startWorker('holder', [JSON.stringify({ staticDir, tag: sc.other, createOnce: false, waitMs: 15_000, ...timing })]));
    const got = await expectMessage<Msg & { token?: string; code?: string; message?: string }>(p, (m) => m.type === 'acquired' || m.type === 'error', 30_000, `the other holder at ${point}`);
    if (got.type !== 'acquired') {
      process.kill(t.pid!, 'SIGCONT');
      await tResult;
      return [`${point}: the other holder could not lock ${sc.other}: ${String(got.code)} ${String(got.message)}`];
    }
    let lost = false;
    p.on('message', (m: Msg) => {
      if (m.type === 'lost') lost = true;
    });
    const area = path.join(staticDir, sc.other);
    // The other holder's critical section, marked as the taker marks its own.
    const marker = path.join(staticDir, 'inside');
    fs.mkdirSync(marker);
    const ino = fs.lstatSync(path.join(area, LOCK_NAME)).ino;
    const watcher = await watchName(area, LOCK_NAME);
    process.kill(t.pid!, 'SIGCONT');
    const out = await tResult;
    if (out.clash === true) failures.push(`${point}: the stopped taker entered its section while the other held ${sc.other}`);
    // Long enough for the other holder's heartbeat to notice a lock taken from it.
    await sleep(timing.refreshMs * 3);
    const events = await watcher.stop();
    if (events.length > 0) failures.push(`${point}: the other holder's lock on ${sc.other} was moved while it held it (${events.join(', ')})`);
    if (lost) failures.push(`${point}: the other holder lost its lock on ${sc.other}`);
    if (fs.lstatSync(path.join(area, LOCK_NAME), { throwIfNoEntry: false })?.ino !== ino) failures.push(`${point}: the lock on ${sc.other} is no longer the other holder's`);
    fs.rmdirSync(marker);
    const released = expectMessage(p, (m) => m.type === 'released' || m.type === 'release-error', 20_000, 'release');
    p.send('release');
    const r = await released;
    if (r.type !== 'released') failures.push(`${point}: the other holder's release failed: ${String(r.code)} ${String(r.message)}`);
    return failures;
  }

  // The same takeover path, for a lock that is a file (the Python devserver's), which only a force-release removes.
  it('a force-release of a legacy lock file stopped after its check, while another removes it and locks: never moves the new lock', async () => {
    const staticDir = placeFor('legacy');
    const area = path.join(staticDir, 'board');
    fs.writeFileSync(path.join(area, LOCK_NAME), 'a legacy lock\n');
    const t = runPauser({ staticDir, tag: 'board', op: 'force-release', ...timing }, { DEVSERVER_STAGING_PAUSE_AT: 'takeover.foreignChecked#1' });
    const tResult = pauserResult(t);
    await waitFor(() => (processState(t.pid!) === 'T' ? true : undefined), 20_000, 'the force-release to stop after its check', 5);
    await sleep(timing.staleMs + 200);
    // Its claim is stale now: another force-release takes the legacy lock away, and a holder locks.
    await forceRelease(staticDir, 'board', timing);
    const p = track(startWorker('holder', [JSON.stringify({ staticDir, tag: 'board', createOnce: false, ...timing })]));
    await expectMessage(p, (m) => m.type === 'acquired', 20_000, 'the new holder');
    let lost = false;
    p.on('message', (m: Msg) => {
      if (m.type === 'lost') lost = true;
    });
    const ino = fs.lstatSync(path.join(area, LOCK_NAME)).ino;
    const watcher = await watchName(area, LOCK_NAME);
    assert.equal(processState(t.pid!), 'T', 'the first force-release was stopped all along');
    process.kill(t.pid!, 'SIGCONT');
    const out = await tResult;
    await sleep(timing.refreshMs * 3);
    const events = await watcher.stop();
    report(`legacy lock force-released by another while the first force-release was stopped after its check: it ended ${out.ok ? 'ok' : String(out.code)}; the new lock saw ${events.length} moves`);
    assert.deepEqual(events, [], 'the new holder’s lock is never moved');
    assert.equal(lost, false, 'the new holder keeps its lock');
    assert.equal(fs.lstatSync(path.join(area, LOCK_NAME)).ino, ino);
    assert.equal(out.ok, false, 'the stopped force-release does not remove the new lock it never judged');
    assert.deepEqual(fs.readdirSync(area).filter((n) => n.startsWith(`${LOCK_NAME}.`)), [], 'nothing set aside is left behind');
  });

  for (const sc of scenarios) {
    it(`locking ${sc.taker} over a dead ${sc.kind === 'ours' ? '' : 'foreign '}lock on ${sc.other}: stopped at each step of that takeover while another locks ${sc.other}, it never moves the other's lock`, async () => {
      // Learn the steps: the nested takeover comes after the taker's own lock is settled.
      const learnDir = placeFor('learn');
      await leaveDeadLock(learnDir, sc.other, sc.kind);
      const log = path.join(root, 'steps.log');
      const learned = await pauserResult(runTaker(learnDir, sc.taker, { DEVSERVER_STAGING_STEP_LOG: log }));
      assert.equal(learned.ok, true, `the lock itself must work: ${JSON.stringify(learned)}`);
      const passed = fs.readFileSync(log, 'utf8').trim().split('\n');
      const settled = passed.indexOf('settle.published');
      for (const s of sc.steps) assert.ok(passed.indexOf(s) > settled && settled >= 0, `the nested takeover passes ${s} once its own lock is settled (it passed: ${passed.join(' ')})`);
      assert.equal(fs.existsSync(path.join(learnDir, sc.other, LOCK_NAME)), false, `the dead lock on ${sc.other} was taken over`);

      const failures: string[] = [];
      let ran = 0;
      await pool(sc.steps, AT_ONCE, async (s, i) => {
        failures.push(...(await trial(sc, `${s}#1`, placeFor(`trial${i}`))));
        ran++;
      });
      report(`${sc.taker} over a dead ${sc.kind} lock on ${sc.other}: stopped at ${ran} steps of the nested takeover while another took ${sc.other}; ${failures.length} failures`);
      assert.equal(ran, sc.steps.length, 'every step was reached and stopped at');
      assert.deepEqual(failures, []);
    });
  }
});
