/**
 * A lock lost mid-staging. A first `stage --add` of 200 small files and a few of 1-4 MiB is
 * force-released (with the CLI) at a random instant, early or late in its run; at once a second
 * `stage --add --overwrite` stages the same names with other content (or, in the second suite,
 * distinct names). When both have ended, the area is checked file by file: the manifest lists
 * exactly the artifacts on disk, every listed hash matches the file's bytes, and every file of the
 * second stager is there with its content. The second stager must succeed. A damaged area fails.
 *
 * The loss must really happen in every trial: at the chosen instant the first stager is stopped
 * (SIGSTOP) and must be holding the lock (its pid in the lock's record), the force-release must
 * succeed while it is stopped, and it is continued at once; it must then fail, having lost its
 * lock. An instant at which it did not hold the lock (not yet taken, or let go of already) is
 * drawn again, in a new trial.
 */
import { strict as assert } from 'assert';
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { checkArea, cliTimed, describeRun, pool, processState, writeRandom } from '../../attack';
import { CLI, cleanup, cli, report, sleep, tempDir } from '../../helpers';
import { FENCE_FILE, LOCK_NAME, OWNER_FILE } from '../../../src/core/base/protocol';

/** Draws of an instant per trial at which the first stager did not hold the lock, before the trial gives up. */
const MAX_DRAWS = 10;

/**
 * Whether the lock of `area` is held by process `pid`: its record names the process, and the token
 * it proposed is the counter's now (published: its acquisition is over). A lock lost earlier, while
 * it was still being taken, is only taken again.
 */
function heldBy(area: string, pid: number): boolean {
  try {
    const record = JSON.parse(fs.readFileSync(path.join(area, LOCK_NAME, OWNER_FILE), 'utf8')) as { pid?: number; fence?: number };
    return record.pid === pid && fs.existsSync(path.join(area, FENCE_FILE, String(record.fence)));
  } catch {
    return false;
  }
}

/** Stops `pid` (SIGSTOP) and waits until the kernel has: false when it ended first. */
async function stopProcess(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 'SIGSTOP');
  } catch {
    return false;
  }
  for (;;) {
    const state = processState(pid);
    if (state === 'T' || state === 't') return true;
    if (state === undefined || state === 'Z' || state === 'X') return false;
    await new Promise((r) => setImmediate(r));
  }
}

const TRIALS = Number(process.env.DSS_ATTACK_LOST_TRIALS ?? 50);
/** Stop starting trials after this long per suite: a cap for a machine in trouble (every trial named must run). */
const BUDGET_MS = Number(process.env.DSS_ATTACK_LOST_MS ?? 240_000);

interface Source {
  dir: string;
  hashes: Map<string, string>;
}

function makeSource(dir: string, prefix: string, seedSizes: number[]): Source {
  const hashes = new Map<string, string>();
  for (let i = 0; i < 200; i++) {
    const name = i < 100 ? `${prefix}${String(i).padStart(3, '0')}.txt` : `sub/${prefix}${String(i).padStart(3, '0')}.txt`;
    hashes.set(name, writeRandom(path.join(dir, name), 64 + ((i * 37) % 900)));
  }
  seedSizes.forEach((size, i) => hashes.set(`big${prefix}${i}.bin`, writeRandom(path.join(dir, `big${prefix}${i}.bin`), size)));
  return { dir, hashes };
}

describe('attack: a lock lost mid-staging', function () {
  this.timeout(BUDGET_MS * 2 + 120_000);
  let root = '';
  let staticDir = '';
  let first: Source;
  let sameNames: Source;
  let distinct: Source;
  let span = 0;

  before(async () => {
    root = tempDir('dss-attack-lost-');
    staticDir = path.join(root, 'static');
    fs.mkdirSync(staticDir);
    const MiB = 1 << 20;
    first = makeSource(path.join(root, 'first'), 'f', [1 * MiB, 3 * MiB, 4 * MiB]);
    sameNames = makeSource(path.join(root, 'second-same'), 'f', [2 * MiB, 1 * MiB, 4 * MiB]);
    distinct = makeSource(path.join(root, 'second-distinct'), 'g', [1 * MiB, 2 * MiB]);
    const seed = path.join(root, 'seed');
    fs.mkdirSync(seed);
    fs.writeFileSync(path.join(seed, 'README.txt'), 'the area before the trials\n');
    // How long a first stager holds its lock here, so that force-releases land across that time.
    await cli(staticDir, ['stage', 'probe/run', seed]);
    const stager = startFirst('probe/run');
    const t0 = await untilHeld('probe/run', stager.child.pid!);
    const code = await stager.exit;
    span = Date.now() - t0;
    assert.equal(code, 0, stager.stderr());
  });

  /** The first stager of `tag`, started. */
  function startFirst(tag: string): { child: ReturnType<typeof spawn>; exit: Promise<number | null>; exitedAt: () => number; stderr: () => string } {
    const child = spawn(process.execPath, [CLI, 'stage', '--add', tag, first.dir], { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir }, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    let exitedAt = 0;
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exit = new Promise<number | null>((r) =>
      child.once('exit', (code) => {
        exitedAt = Date.now();
        r(code);
      }),
    );
    return { child, exit, exitedAt: () => exitedAt, stderr: () => err };
  }

  /** Waits until process `pid` holds the lock of `tag` (or has ended): when that was seen. */
  async function untilHeld(tag: string, pid: number): Promise<number> {
    while (!heldBy(path.join(staticDir, tag), pid)) {
      const state = processState(pid);
      if (state === undefined || state === 'Z') break;
      await sleep(2);
    }
    return Date.now();
  }
  after(() => root && cleanup(root));

  for (const mode of ['same names', 'distinct names'] as const) {
    it(`${mode}: ${TRIALS} trials, early and late losses: 0 damaged areas`, async () => {
      const second = mode === 'same names' ? sameNames : distinct;
      const damaged: string[] = [];
      let trials = 0;
      let released = 0;
      let redrawn = 0;
      /** What a first stager said, once, for the report. */
      let lostWords = '';
      /** Trials whose first stager did not fail having lost its lock. */
      const unnoticed: string[] = [];
      const started = Date.now();
      const counts = { early: 0, late: 0 };
      await pool(
        Array.from({ length: TRIALS }, (_, i) => i),
        2,
        async (i) => {
          if (Date.now() - started > BUDGET_MS) return;
          const late = i % 2 === 1;
          let tag = '';
          let at = 0;
          let firstErr = '';
          let firstStderr: () => string = () => '';
          let firstExit: Promise<number | null> = Promise.resolve(null);
          let fr: Awaited<ReturnType<typeof cliTimed>> | undefined;
          // How long a first stager holds its lock: as measured before the trials, or less where a
          // stager of this trial let go before the instant drawn (the machine is busier or freer
          // than it was, with other files running beside this one), so that the next draw falls
          // inside what it takes now.
          let trialSpan = span;
          for (let draw = 0; fr === undefined; draw++) {
            assert.ok(draw < MAX_DRAWS, `trial ${i}: in ${MAX_DRAWS} draws the first stager never held its lock at the instant drawn (last: exit ${String(await firstExit)}, ${firstStderr().trim().split('\n').pop()?.slice(0, 200)})`);
            if (draw > 0) redrawn++;
            tag = `${mode === 'same names' ? 'same' : 'distinct'}/t${i}.${draw}`;
            const seeded = await cli(staticDir, ['stage', tag, path.join(root, 'seed')]);
            assert.equal(seeded.code, 0, seeded.stderr);
            // Early: in the first half of the time it holds its lock; late: in the second half, short of its very end.
            at = (late ? 0.5 + Math.random() * 0.4 : Math.random() * 0.5) * trialSpan;
            const stager = startFirst(tag);
            firstExit = stager.exit;
            const heldAt = await untilHeld(tag, stager.child.pid!);
            await sleep(at);
            // Stopped where it is: it must hold its lock, or this instant proves nothing.
            const stopped = await stopProcess(stager.child.pid!);
            if (stopped && heldBy(path.join(staticDir, tag), stager.child.pid!)) {
              fr = await cliTimed(staticDir, ['force-release', tag], { timeoutMs: 20_000 });
            }
            if (stopped) stager.child.kill('SIGCONT');
            await (fr === undefined ? firstExit : Promise.resolve());
            if (fr === undefined && stager.exitedAt() > heldAt) trialSpan = Math.min(trialSpan, stager.exitedAt() - heldAt);
            firstStderr = stager.stderr;
          }
          counts[late ? 'late' : 'early']++;
          if (fr.code === 0) released++;
          const r2 = await cliTimed(staticDir, ['stage', '--add', '--overwrite', '--wait', '30', tag, second.dir], { timeoutMs: 60_000 });
          const code1 = await firstExit;
          firstErr = firstStderr();
          trials++;
          if (lostWords === '' && code1 !== 0) lostWords = firstErr.trim().split('\n').pop()?.split(root).join('<root>').slice(0, 200) ?? '';
          // Lost before its commit point it fails; lost after it, its staging is whole in the build and it says so.
          const noticed = code1 === 0 ? /was lost after this staging was committed/.test(firstErr) : /lost the lock/i.test(firstErr);
          if (!noticed) unnoticed.push(`trial ${i} (${late ? 'late' : 'early'} at ${Math.round(at)} ms): first stager exit ${code1}: ${firstErr.trim().split('\n').pop()?.slice(0, 200)}`);
          const problems: string[] = [];
          if (fr.code !== 0) problems.push(describeRun('force-release of the stopped first stager', fr));
          if (r2.code !== 0) problems.push(describeRun('second stager', r2));
          problems.push(...checkArea(path.join(staticDir, tag), second.hashes));
          if (problems.length > 0) {
            damaged.push(
              `trial ${i} (${late ? 'late' : 'early'} loss at ${Math.round(at)} ms, force-release exit ${fr.code}, first stager exit ${code1}${code1 === 0 ? '' : `: ${firstErr.trim().split('\n').pop()?.slice(0, 160)}`}): ${problems.length} problems: ${problems.slice(0, 5).join('; ')}`,
            );
          }
        },
      );
      report(
        `${mode}: ${trials} trials (${counts.early} early, ${counts.late} late; a first stager holds its lock ${span} ms unhindered; ${redrawn} instants drawn again), ` +
          `${released} force-releases took effect, ${trials - unnoticed.length} first stagers said they lost the lock, ${damaged.length} damaged areas, ${((Date.now() - started) / 1000).toFixed(0)} s`,
      );
      report(`  e.g. the first stager: ${lostWords}`);
      assert.ok(damaged.length === 0, `${damaged.length} of ${trials} areas damaged (${mode}):\n  ${damaged.slice(0, 12).join('\n  ')}`);
      assert.equal(trials, TRIALS, `only ${trials} of ${TRIALS} trials ran within ${BUDGET_MS} ms (DSS_ATTACK_LOST_MS)`);
      assert.equal(released, trials, 'every force-release took the lock of a first stager that held it');
      assert.deepEqual(unnoticed.slice(0, 5), [], 'every first stager said it lost its lock: failed before its commit point, or whole after it');
    });
  }
});
