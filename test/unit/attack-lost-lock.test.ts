/**
 * A lock lost mid-staging. A first `stage --add` of 200 small files and a few of 1-4 MiB is
 * force-released (with the CLI) at a random instant, early or late in its run; at once a second
 * `stage --add --overwrite` stages the same names with other content (or, in the second suite,
 * distinct names). When both have ended, the area is checked file by file: the manifest lists
 * exactly the artifacts on disk, every listed hash matches the file's bytes, and every file of the
 * second stager is there with its content. The second stager must succeed. A damaged area fails.
 */
import { strict as assert } from 'assert';
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { checkArea, cliTimed, describeRun, pool, writeRandom } from '../attack';
import { CLI, cleanup, cli, report, sleep, tempDir } from '../helpers';

const TRIALS = Number(process.env.DSS_ATTACK_LOST_TRIALS ?? 50);
/** Stop starting trials after this long per suite (the count run is printed). */
const BUDGET_MS = Number(process.env.DSS_ATTACK_LOST_MS ?? 85_000);

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
    // How long a first stager runs here, so that force-releases land across its run.
    await cli(staticDir, ['stage', 'probe/run', seed]);
    const t0 = Date.now();
    const r = await cli(staticDir, ['stage', '--add', 'probe/run', first.dir]);
    span = Date.now() - t0;
    assert.equal(r.code, 0, r.stderr);
  });
  after(() => root && cleanup(root));

  for (const mode of ['same names', 'distinct names'] as const) {
    it(`${mode}: ${TRIALS} trials, early and late losses: 0 damaged areas`, async () => {
      const second = mode === 'same names' ? sameNames : distinct;
      const damaged: string[] = [];
      let trials = 0;
      let released = 0;
      const started = Date.now();
      const counts = { early: 0, late: 0 };
      await pool(
        Array.from({ length: TRIALS }, (_, i) => i),
        2,
        async (i) => {
          if (Date.now() - started > BUDGET_MS) return;
          const tag = `${mode === 'same names' ? 'same' : 'distinct'}/t${i}`;
          const seeded = await cli(staticDir, ['stage', tag, path.join(root, 'seed')]);
          assert.equal(seeded.code, 0, seeded.stderr);
          const late = i % 2 === 1;
          counts[late ? 'late' : 'early']++;
          // Early: in the first half of the run; late: in the second half (the CLI itself starts in ~150 ms).
          const at = (late ? 0.5 + Math.random() * 0.5 : Math.random() * 0.5) * span;
          const stager = spawn(process.execPath, [CLI, 'stage', '--add', tag, first.dir], { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir }, stdio: ['ignore', 'ignore', 'pipe'] });
          let firstErr = '';
          stager.stderr.on('data', (d: Buffer) => (firstErr += d.toString()));
          const firstExit = new Promise<number | null>((r) => stager.once('exit', (code) => r(code)));
          await sleep(at);
          const fr = await cliTimed(staticDir, ['force-release', tag], { timeoutMs: 20_000 });
          if (fr.code === 0) released++;
          const r2 = await cliTimed(staticDir, ['stage', '--add', '--overwrite', '--wait', '30', tag, second.dir], { timeoutMs: 60_000 });
          const code1 = await firstExit;
          trials++;
          const problems: string[] = [];
          if (r2.code !== 0) problems.push(describeRun('second stager', r2));
          problems.push(...checkArea(path.join(staticDir, tag), second.hashes));
          if (problems.length > 0) {
            damaged.push(
              `trial ${i} (${late ? 'late' : 'early'} loss at ${Math.round(at)} ms, force-release exit ${fr.code}, first stager exit ${code1}${code1 === 0 ? '' : `: ${firstErr.trim().split('\n').pop()?.slice(0, 160)}`}): ${problems.length} problems: ${problems.slice(0, 5).join('; ')}`,
            );
          }
        },
      );
      report(`${mode}: ${trials} trials (${counts.early} early, ${counts.late} late; first stager ran ${span} ms unhindered), ${released} force-releases took effect, ${damaged.length} damaged areas, ${((Date.now() - started) / 1000).toFixed(0)} s`);
      assert.ok(damaged.length === 0, `${damaged.length} of ${trials} areas damaged (${mode}):\n  ${damaged.slice(0, 12).join('\n  ')}`);
    });
  }
});
