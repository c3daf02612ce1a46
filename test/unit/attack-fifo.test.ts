/**
 * Records that cannot hang: a FIFO planted as an owner record (`devserver.lock/owner.json`), as the
 * manifest, as `audit.log`, as `staged.timestamp` and as the clock probe names. status, list,
 * force-release, `lock --wait`, `stage --add`, du and destroy must each end on their own (with an
 * error naming the FIFO, or having ignored it) within the deadline, and must also stop when sent
 * SIGTERM while they run. A command that is still running at the deadline is SIGTERMed, then
 * SIGKILLed 3 s later, and the failure says which happened.
 */
import { strict as assert } from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { cliTimed, describeRun, hasTool, nextPids, pool, type Timed } from '../attack';
import { cleanup, cli, report, tempDir } from '../helpers';

const DEADLINE_MS = 10_000;
const TAG = 'board/f1';

type Position = 'owner.json' | 'manifest' | 'audit.log' | 'staged.timestamp' | 'clock probes';
const POSITIONS: Position[] = ['owner.json', 'manifest', 'audit.log', 'staged.timestamp', 'clock probes'];

const COMMANDS: { name: string; args: (src: string) => string[] }[] = [
  { name: `status ${TAG}`, args: () => ['status', TAG] },
  { name: 'list board', args: () => ['list', 'board'] },
  { name: `force-release ${TAG}`, args: () => ['force-release', TAG] },
  { name: `lock --wait 3 ${TAG} -- true`, args: () => ['lock', '--wait', '3', TAG, '--', 'true'] },
  { name: `stage --add ${TAG}`, args: (src) => ['stage', '--add', TAG, src] },
  { name: 'du', args: () => ['du'] },
  { name: `destroy --force ${TAG}`, args: () => ['destroy', '--force', TAG] },
];

function mkfifo(paths: string[]): void {
  for (let i = 0; i < paths.length; i += 500) {
    const r = spawnSync('mkfifo', paths.slice(i, i + 500), { encoding: 'utf8' });
    assert.equal(r.status, 0, `mkfifo: ${r.stderr}`);
  }
}

describe('attack: FIFOs in every record position', function () {
  this.timeout(600_000);
  let template = '';

  before(async function () {
    if (process.platform !== 'linux' || !hasTool('mkfifo')) {
      console.log('      skipped: needs Linux and mkfifo');
      this.skip();
    }
    template = tempDir('dss-attack-fifo-template-');
    const src = path.join(template, 'src');
    fs.mkdirSync(src);
    fs.writeFileSync(path.join(src, 'extra.bin'), 'more\n');
    fs.mkdirSync(path.join(template, 'static'));
    const first = path.join(template, 'first');
    fs.mkdirSync(first);
    fs.writeFileSync(path.join(first, 'a.bin'), 'a\n');
    const r = await cli(path.join(template, 'static'), ['stage', TAG, first]);
    assert.equal(r.code, 0, r.stderr);
  });
  after(() => template && cleanup(template));

  /** A copy of the template with a FIFO at `pos`. */
  function sandbox(pos: Position): { root: string; staticDir: string; src: string; fifo: string } {
    const root = tempDir('dss-attack-fifo-');
    fs.cpSync(template, root, { recursive: true });
    const staticDir = path.join(root, 'static');
    const area = path.join(staticDir, TAG);
    const meta = path.join(staticDir, '.devserver-staging');
    fs.mkdirSync(meta, { recursive: true });
    let fifo: string;
    switch (pos) {
      case 'owner.json': {
        fs.mkdirSync(path.join(area, 'devserver.lock'));
        fifo = path.join(area, 'devserver.lock', 'owner.json');
        mkfifo([fifo]);
        break;
      }
      case 'manifest':
        fifo = path.join(area, '.devserver-staging.manifest.json');
        fs.rmSync(fifo);
        mkfifo([fifo]);
        break;
      case 'audit.log':
        fifo = path.join(meta, 'audit.log');
        fs.rmSync(fifo, { force: true });
        mkfifo([fifo]);
        break;
      case 'staged.timestamp':
        fifo = path.join(area, 'staged.timestamp');
        fs.rmSync(fifo);
        mkfifo([fifo]);
        break;
      case 'clock probes':
        fifo = path.join(meta, 'clock.<next pids>');
        mkfifo(nextPids(1500).map((p) => path.join(meta, `clock.${p}`)));
        break;
    }
    return { root, staticDir, src: path.join(root, 'src'), fifo };
  }

  for (const pos of POSITIONS) {
    it(`a FIFO as ${pos}: no command hangs, and each stops on SIGTERM`, async () => {
      const problems: string[] = [];
      const lines: string[] = [];
      const jobs: { cmd: (typeof COMMANDS)[number]; term: boolean }[] = [];
      for (const cmd of COMMANDS) for (const term of [false, true]) jobs.push({ cmd, term });
      await pool(jobs, 7, async ({ cmd, term }) => {
        const s = sandbox(pos);
        try {
          const r: Timed = await cliTimed(s.staticDir, cmd.args(s.src), term ? { timeoutMs: DEADLINE_MS, termAfterMs: 1_500 } : { timeoutMs: DEADLINE_MS });
          const what = `${cmd.name}${term ? ' (SIGTERM at 1.5 s)' : ''} with a FIFO at ${s.fifo}`;
          lines.push(describeRun(what, r));
          if (!term && r.hung) problems.push(`HANG: ${describeRun(what, r)}`);
          if (term && r.signal === 'SIGKILL') problems.push(`IGNORES SIGTERM: ${describeRun(what, r)}`);
        } finally {
          cleanup(s.root);
        }
      });
      report(`FIFO as ${pos}: ${jobs.length} runs, ${problems.length} hung or ignored SIGTERM`);
      assert.ok(problems.length === 0, `a FIFO as ${pos}:\n  ${problems.join('\n  ')}\nall runs:\n  ${lines.join('\n  ')}`);
    });
  }
});
