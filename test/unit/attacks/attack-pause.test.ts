/**
 * A lease lock fails where its holder is paused (a garbage collection, swap, SIGSTOP) for longer than
 * the stale threshold at the wrong instant, and then acts on what it saw before the pause. So each
 * operation of the protocol (a lock cycle, one that takes over a dead holder's lock, a
 * force-release, a destroy, a `stage --add`) is run once to learn the steps it passes
 * (src/core/base/steps.ts), then once per step with the process stopping itself there (SIGSTOP). While it
 * is stopped for longer than the threshold, another process takes the lock and holds it; then the
 * stopped one is continued and finishes. The kernel referees:
 * - inotify on the area: nothing moves, removes or replaces the new holder's `devserver.lock`
 *   while it holds it, not for an instant;
 * - the new holder's lease is never lost, and its lock is the same directory before and after;
 * - an `O_EXCL` marker made inside the critical section never clashes;
 * - no fencing token is handed out twice, and tokens grow in the order the sections began;
 * - the build is whole: the files before, or (for a staging) the files after, hashed.
 */
import { strict as assert } from 'assert';
import type { ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { stage } from '../../../src/core/stage/stage';
import { verify } from '../../../src/core/verify';
import { LOCK_NAME } from '../../../src/core/base/protocol';
import { pauserResult, pool, runPauser, watchName } from '../../attack';
import { cleanup, exitOf, expectMessage, killAll, report, sleep, startWorker, tempDir, track, waitFor, type Msg } from '../../helpers';

// The shortest the core allows (clampTiming).
const timing = { staleMs: 2_000, refreshMs: 1_000 };
// Trials at once, each in a static directory of its own (its area, lock, fencing counter and
// marker are its own): a trial spends nearly all its time waiting out the pause and the second
// holder's heartbeats, so several overlap without making any pause shorter than the threshold.
const AT_ONCE = 4;
type Op = 'cycle' | 'force-release' | 'destroy' | 'stage-add';

interface Scenario {
  name: string;
  op: Op;
  /** A holder killed with SIGKILL leaves its lock behind first. */
  deadHolder: boolean;
  /** Steps every run of it must pass (the discovery must find them). */
  mustPass: string[];
}

const scenarios: Scenario[] = [
  { name: 'a lock cycle', op: 'cycle', deadHolder: false, mustPass: ['acquire.placed', 'settle.consumed', 'settle.published', 'unlock.recordMoved', 'unlock.workMoved', 'release.removed'] },
  { name: 'a lock cycle taking over a dead holder', op: 'cycle', deadHolder: true, mustPass: ['takeover.judged', 'takeover.checked', 'unlock.recordMoved', 'takeover.removed', 'settle.published'] },
  { name: 'a force-release', op: 'force-release', deadHolder: true, mustPass: ['forceRelease.recorded', 'unlock.recordMoved', 'unlock.workMoved', 'takeover.removed'] },
  { name: 'a destroy', op: 'destroy', deadHolder: false, mustPass: ['acquire.placed', 'destroy.recorded', 'destroy.moved', 'destroy.committed'] },
  { name: 'a stage --add', op: 'stage-add', deadHolder: false, mustPass: ['acquire.placed', 'settle.published', 'unlock.workMoved'] },
];

/** The state letter of a process (R, S, T, Z…), from /proc. */
function stateOf(pid: number): string | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return undefined;
  }
}

describe('attack: a process paused at every step of the protocol', function () {
  this.timeout(600_000);
  let root: string;
  const tag = 'board/R1';

  /** One trial's own static directory, its old build's files and the source a staging adds. */
  interface Place {
    staticDir: string;
    source: string;
    old: string;
    area: string;
  }

  beforeEach(() => {
    root = tempDir('dss-pause-');
  });
  afterEach(async () => {
    await killAll();
    cleanup(root);
  });

  function placeFor(name: string): Place {
    const dir = path.join(root, name);
    const p = { staticDir: path.join(dir, 'static'), source: path.join(dir, 'new'), old: path.join(dir, 'old'), area: path.join(dir, 'static', 'board', 'R1') };
    fs.mkdirSync(p.staticDir, { recursive: true });
    fs.mkdirSync(p.source);
    fs.mkdirSync(p.old);
    for (let i = 0; i < 4; i++) fs.writeFileSync(path.join(p.source, `f${i}.bin`), `new ${i}\n`.repeat(100));
    for (let i = 0; i < 4; i++) fs.writeFileSync(path.join(p.old, `f${i}.bin`), `old ${i}\n`.repeat(100));
    return p;
  }

  /** A fresh build at `tag`. */
  async function freshBuild(p: Place): Promise<void> {
    await stage(p.staticDir, tag, [p.old], timing);
  }

  /** What the build looks like once `source` was staged into it whole (its files only). */
  function filesOf(dir: string): string {
    return fs
      .readdirSync(dir)
      .filter((n) => n.endsWith('.bin'))
      .sort()
      .map((n) => `${n}:${fs.readFileSync(path.join(dir, n), 'utf8')}`)
      .join('|');
  }

  /** Leaves the lock of a holder killed with SIGKILL in the area. */
  async function leaveDeadLock(p: Place): Promise<void> {
    const h = track(startWorker('holder', [JSON.stringify({ staticDir: p.staticDir, tag, createOnce: false, ...timing })]));
    await expectMessage(h, (m) => m.type === 'acquired', 20_000, 'the holder to lock');
    h.kill('SIGKILL');
    await exitOf(h);
  }

  function runPauserIn(p: Place, op: Op, env: NodeJS.ProcessEnv): ChildProcess {
    return runPauser({ staticDir: p.staticDir, tag, op, source: p.source, ...timing }, env);
  }

  /**
   * One trial: the operation stopped at `point` for longer than the threshold, another holder
   * taking the lock meanwhile, then the operation continued. Returns what went wrong, whether it
   * stopped and whether the second holder got the lock.
   */
  async function trial(sc: Scenario, point: string, p: Place): Promise<{ failures: string[]; contended: boolean }> {
    const failures: string[] = [];
    const { staticDir, area } = p;
    await freshBuild(p);
    if (sc.deadHolder) await leaveDeadLock(p);
    const a = runPauserIn(p, sc.op, { DEVSERVER_STAGING_PAUSE_AT: point });
    const aResult = pauserResult(a);
    await waitFor(() => (stateOf(a.pid!) === 'T' ? true : undefined), 20_000, `the operation to stop at ${point}`, 5);
    await sleep(timing.staleMs + 200);
    // Another holder, while the first is stopped.
    const b = track(startWorker('holder', [JSON.stringify({ staticDir, tag, createOnce: false, waitMs: 15_000, ...timing })]));
    const bFirst = await expectMessage<Msg & { token?: string; code?: string }>(b, (m) => m.type === 'acquired' || m.type === 'error', 30_000, `the second holder at ${point}`);
    let bFence: number | undefined;
    let bIno: number | undefined;
    let watcher: { stop(): Promise<string[]> } | undefined;
    // The second holder's critical section, marked as the paused one marks its own: held from
    // now until its release, so that the paused one entering meanwhile is seen (a clash).
    const marker = path.join(staticDir, 'inside');
    if (bFirst.type === 'acquired') {
      fs.mkdirSync(marker);
      const record = JSON.parse(fs.readFileSync(path.join(area, LOCK_NAME, 'owner.json'), 'utf8')) as { token: string; fence: number };
      assert.equal(record.token, bFirst.token, 'the lock on disk is the second holder’s');
      bFence = record.fence;
      bIno = fs.lstatSync(path.join(area, LOCK_NAME)).ino;
      watcher = await watchName(area, LOCK_NAME);
    } else if (!(sc.op === 'destroy' && bFirst.code === 'ENOENT')) {
      failures.push(`${point}: the second holder could not lock: ${String(bFirst.code)} ${String(bFirst.message)}`);
    }
    let bLost = false;
    b.on('message', (m: Msg) => {
      if (m.type === 'lost') bLost = true;
    });
    process.kill(a.pid!, 'SIGCONT');
    const aOut = await aResult;
    // Stopped once its token was published, its acquisition was over: like any lease, it may go
    // on into its section unaware (its lower token and its work directory, gone, fence what it
    // does). Stopped earlier, the fence must keep it from ever getting that far.
    const complete = point.startsWith('settle.published#');
    if (aOut.clash === true && !complete) failures.push(`${point}: the paused process entered the critical section while another held it`);
    if (bFirst.type === 'acquired') {
      // Long enough for the second holder's heartbeat to notice a lock taken from it.
      await sleep(timing.refreshMs * 3);
      const events = (await watcher?.stop()) ?? [];
      const ino = fs.lstatSync(path.join(area, LOCK_NAME), { throwIfNoEntry: false })?.ino;
      if (events.length > 0) failures.push(`${point}: the second holder's lock was moved while it held it (${events.join(', ')})`);
      if (bLost) failures.push(`${point}: the second holder lost its lock`);
      if (ino !== bIno) failures.push(`${point}: the lock in place is no longer the second holder's`);
      if (aOut.fence !== undefined && bFence !== undefined && aOut.fence >= bFence) failures.push(`${point}: tokens ${aOut.fence} (paused) and ${String(bFence)} (second)`);
      fs.rmdirSync(marker);
      const released = expectMessage(b, (m) => m.type === 'released' || m.type === 'release-error', 20_000, 'release');
      b.send('release');
      const r = await released;
      if (r.type !== 'released') failures.push(`${point}: the second holder's release failed: ${String(r.code)} ${String(r.message)}`);
    }
    b.kill('SIGKILL');
    await exitOf(b);
    // The build: whole before or whole after (a staging), or gone whole (a destroy).
    if (fs.existsSync(area) && fs.readdirSync(area).some((n) => n.endsWith('.bin') || n.startsWith('.devserver-staging.manifest'))) {
      const v = await verify(staticDir, tag).catch((err: unknown) => ({ ok: false, problems: [String(err)] }));
      const files = filesOf(area);
      const whole = files === filesOf(p.old) || (sc.op === 'stage-add' && files === filesOf(p.source));
      if (!v.ok || !whole) failures.push(`${point}: the build is not whole (verify ${v.ok ? 'ok' : 'DAMAGED'}; files ${files.slice(0, 120)})`);
    } else if (sc.op !== 'destroy') {
      failures.push(`${point}: the build is gone`);
    }
    return { failures, contended: bFirst.type === 'acquired' };
  }

  for (const sc of scenarios) {
    it(`${sc.name}: stopped at each step for longer than the stale threshold, it never moves another's lock, shares a token or breaks the build`, async () => {
      // Learn the steps.
      const learnPlace = placeFor('learn');
      await freshBuild(learnPlace);
      if (sc.deadHolder) await leaveDeadLock(learnPlace);
      const log = path.join(root, 'steps.log');
      const learn = runPauserIn(learnPlace, sc.op, { DEVSERVER_STAGING_STEP_LOG: log });
      const learned = await pauserResult(learn);
      assert.equal(learned.ok, true, `the operation itself must work: ${JSON.stringify(learned)}`);
      const passed = fs.readFileSync(log, 'utf8').trim().split('\n');
      for (const s of sc.mustPass) assert.ok(passed.includes(s), `${sc.name} passes ${s} (it passed: ${passed.join(' ')})`);
      // Each step at its first and last passage (a destroy passes `destroy.moved` once per entry).
      const counts = new Map<string, number>();
      for (const s of passed) counts.set(s, (counts.get(s) ?? 0) + 1);
      const points: string[] = [];
      for (const [s, n] of counts) {
        points.push(`${s}#1`);
        if (n > 1) points.push(`${s}#${n}`);
      }

      const failures: string[] = [];
      let stopped = 0;
      let contended = 0;
      await pool(points, AT_ONCE, async (point, i) => {
        const t = await trial(sc, point, placeFor(`trial${i}`));
        stopped++;
        if (t.contended) contended++;
        failures.push(...t.failures);
      });
      report(`${sc.name}: ${points.length} steps (${passed.length} passages), stopped at each (${stopped}); another process took the lock meanwhile in ${contended}; ${failures.length} failures`);
      assert.equal(stopped, points.length, 'every step was reached and stopped at');
      assert.ok(contended >= points.length - 3, `another holder took the lock in most trials (${contended} of ${points.length})`);
      assert.deepEqual(failures, []);
    });
  }
});
