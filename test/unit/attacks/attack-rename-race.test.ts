/**
 * A directory swapped for a symbolic link while a command runs. A helper (`exchanger` in
 * test/attack.ts) exchanges `<static>/board` (a real directory) and `<static>/board.x` (a link
 * to a directory outside) with renameat2(RENAME_EXCHANGE) in a tight loop, while destroy, prune,
 * stage, stage --add and force-release run again and again on `board/R1`. The outside directory
 * mirrors what they act on (an area R1 with artifacts, a lock, a legacy `devserver.lock` file); it
 * is hashed after every operation and must never change. Set-up goes through the real directory
 * by its descriptor (/proc/self/fd), so the test itself never writes through the link.
 */
import { strict as assert } from 'assert';
import { spawn, spawnSync, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { destroy, forceRelease, prune, stage } from '../../../src/core';
import { StagingError } from '../../../src/core/base/errors';
import { changes, cliTimed, exchanger, fingerprint, stopExchanger } from '../../attack';
import { cleanup, report, tempDir } from '../../helpers';

/** Seconds each operation runs against the swapper; iteration counts are printed. */
const BUDGET_MS = Number(process.env.DSS_ATTACK_RACE_MS ?? 12_000);
/**
 * Operations that must get through per race, or it proves little: most are refused (the path
 * was a link at the instant it was looked at). A race that has fewer at the end of its budget
 * runs on, up to three budgets, until it has them.
 */
const MIN_DONE = 10;
/** The same for the CLI's runs, which take longer each: at least this many of each command, in at most 160 runs. */
const CLI_MIN_DONE = 5;

describe('attack: a directory exchanged with a link to outside while commands run', function () {
  this.timeout(BUDGET_MS * 4 + 60_000);
  let root = '';
  let swapperCmd: string[] = [];
  let staticDir = '';
  let outside = '';
  let src = '';
  let boardFd = -1;
  let board = '';
  let swapper: ChildProcess | undefined;

  before(function () {
    if (process.platform !== 'linux') this.skip();
    root = tempDir('dss-attack-race-');
    const cmd = exchanger(root);
    if (typeof cmd === 'string') {
      console.log(`      skipped: ${cmd}`);
      this.skip();
    }
    swapperCmd = cmd;
    staticDir = path.join(root, 'static');
    outside = path.join(root, 'outside');
    src = path.join(root, 'src');
    fs.mkdirSync(path.join(staticDir, 'board'), { recursive: true });
    fs.mkdirSync(path.join(src, 'sub'), { recursive: true });
    for (let i = 0; i < 20; i++) fs.writeFileSync(path.join(src, i < 10 ? `f${i}.bin` : `sub/f${i}.bin`), `source ${i}\n`.repeat(50));
    // Outside: what the operations would find through the link.
    resetOutside();
    fs.symlinkSync(outside, path.join(staticDir, 'board.x'));
    boardFd = fs.openSync(path.join(staticDir, 'board'), fs.constants.O_RDONLY | fs.constants.O_DIRECTORY | fs.constants.O_NOFOLLOW);
    board = `/proc/self/fd/${boardFd}`;
  });

  after(async () => {
    await stopSwapper();
    if (boardFd >= 0) fs.closeSync(boardFd);
    if (root) cleanup(root);
  });

  function resetOutside(): void {
    fs.rmSync(outside, { recursive: true, force: true });
    const r1 = path.join(outside, 'R1');
    fs.mkdirSync(path.join(r1, 'sub'), { recursive: true });
    fs.writeFileSync(path.join(r1, 'f1.bin'), 'OUTSIDE: must never change\n');
    fs.writeFileSync(path.join(r1, 'sub', 'f12.bin'), 'OUTSIDE deeper\n');
    fs.writeFileSync(path.join(r1, 'staged.timestamp'), '');
    fs.writeFileSync(path.join(r1, '.devserver-staging.manifest.json'), JSON.stringify({ version: 1, artifacts: {} }));
    // A legacy-looking lock: force-release through the link would delete it.
    fs.writeFileSync(path.join(r1, 'devserver.lock'), 'outside legacy lock\n');
    fs.writeFileSync(path.join(outside, 'devserver.lock'), 'outside legacy lock at the top\n');
    fs.writeFileSync(path.join(outside, 'victim.txt'), 'victim\n');
    const old = new Date(Date.now() - 86_400_000);
    fs.utimesSync(path.join(r1, 'staged.timestamp'), old, old);
  }

  function startSwapper(): void {
    swapper = spawn(swapperCmd[0], [...swapperCmd.slice(1), 'board', 'board.x'], { cwd: staticDir, stdio: ['ignore', 'pipe', 'inherit'] });
  }

  async function stopSwapper(): Promise<number> {
    const s = swapper;
    swapper = undefined;
    if (s === undefined || s.exitCode !== null) return 0;
    const n = await stopExchanger(s);
    // Leave `board` the real directory again.
    if (fs.lstatSync(path.join(staticDir, 'board')).isSymbolicLink()) spawnSync(swapperCmd[0], [...swapperCmd.slice(1), 'board', 'board.x', '1'], { cwd: staticDir });
    return n;
  }

  /** Through the real directory's descriptor, whatever its name is right now. */
  function setupR1(withLock: 'none' | 'ours' | 'legacy'): void {
    const r1 = path.join(board, 'R1');
    fs.rmSync(r1, { recursive: true, force: true });
    fs.mkdirSync(path.join(r1, 'sub'), { recursive: true });
    fs.writeFileSync(path.join(r1, 'f1.bin'), 'inside\n');
    fs.writeFileSync(path.join(r1, 'staged.timestamp'), '');
    const old = new Date(Date.now() - 86_400_000);
    fs.utimesSync(path.join(r1, 'staged.timestamp'), old, old);
    if (withLock === 'ours') {
      fs.mkdirSync(path.join(r1, 'devserver.lock'));
      fs.writeFileSync(path.join(r1, 'devserver.lock', 'owner.json'), JSON.stringify({ pid: 999_999, hostname: 'gone.example', user: 'x', clientId: 'x', acquiredAt: 0, token: 'dead', staleMs: 10_000, refreshMs: 2_500, tool: 'test' }));
      fs.utimesSync(path.join(r1, 'devserver.lock'), old, old);
    } else if (withLock === 'legacy') {
      fs.writeFileSync(path.join(r1, 'devserver.lock'), 'inside legacy lock\n');
    }
  }

  interface Op {
    name: string;
    setup: () => void;
    run: (i: number) => Promise<unknown>;
  }

  const ops: Op[] = [
    { name: 'destroy board/R1 (force)', setup: () => setupR1('none'), run: () => destroy(staticDir, 'board/R1', { force: true }) },
    { name: 'prune board --keep 0', setup: () => setupR1('none'), run: () => prune(staticDir, { keep: 0, subpath: 'board' }) },
    { name: 'stage board/N<i> (new)', setup: () => undefined, run: (i) => stage(staticDir, `board/N${i}`, [src]) },
    { name: 'stage --add --overwrite board/R1', setup: () => setupR1('none'), run: () => stage(staticDir, 'board/R1', [src], { add: true, overwrite: true }) },
    { name: 'force-release board/R1 (stale lock)', setup: () => setupR1('ours'), run: () => forceRelease(staticDir, 'board/R1') },
    { name: 'force-release board/R1 (legacy lock)', setup: () => setupR1('legacy'), run: () => forceRelease(staticDir, 'board/R1') },
  ];

  for (const op of ops) {
    it(`${op.name}: nothing outside changes`, async function () {
      const breaks: string[] = [];
      let iterations = 0;
      let done = 0;
      /** Refusals by code; anything but a coded StagingError is a failure of the test. */
      const refused = new Map<string, number>();
      const crashes: string[] = [];
      let before = fingerprint(outside);
      startSwapper();
      const started = Date.now();
      let swaps = 0;
      try {
        while (Date.now() < started + BUDGET_MS || (done < MIN_DONE && Date.now() < started + 3 * BUDGET_MS)) {
          op.setup();
          try {
            await op.run(iterations);
            done++;
          } catch (err) {
            if (err instanceof StagingError) refused.set(err.code, (refused.get(err.code) ?? 0) + 1);
            else crashes.push(String(err));
          }
          iterations++;
          // A listing seen through the swapped link must not turn into the removal of the real
          // board (a directory of the static directory that is not a build).
          if (fs.fstatSync(boardFd).nlink === 0) {
            breaks.push(`iteration ${iterations}: the board directory itself (not a build) was destroyed`);
            break;
          }
          const diff = changes(outside, before, fingerprint(outside));
          if (diff.length > 0) {
            breaks.push(`iteration ${iterations}: ${diff.slice(0, 4).join('; ')}`);
            resetOutside();
            before = fingerprint(outside);
          }
        }
      } finally {
        swaps = await stopSwapper();
        const codes = [...refused].map(([code, n]) => `${n} ${code}`).join(', ') || 'none';
        report(`${op.name}: ${iterations} iterations, ${done} done, refused: ${codes}; ${swaps} exchanges, ${breaks.length} changed something outside`);
      }
      // Clean the areas staged by 'stage new' so later operations see a small tree.
      for (const name of fs.readdirSync(board)) if (name.startsWith('N')) fs.rmSync(path.join(board, name), { recursive: true, force: true });
      assert.ok(breaks.length === 0, `${op.name}: ${breaks.length} of ${iterations} iterations changed files outside the static directory:\n  ${breaks.slice(0, 8).join('\n  ')}`);
      assert.deepEqual(crashes.slice(0, 5), [], `${op.name}: failures that are not a coded refusal`);
      assert.ok(swaps > 0, 'the swapper must have exchanged the directories');
      assert.ok(done >= MIN_DONE, `${op.name}: only ${done} of ${iterations} operations got through (at least ${MIN_DONE} must, or the race proves little)`);
    });
  }

  it(`the CLI: destroy and force-release by path, 40 runs each (more until ${CLI_MIN_DONE} of each got through): nothing outside changes`, async function () {
    const breaks: string[] = [];
    let before = fingerprint(outside);
    let runs = 0;
    /** Exit codes per command; a refusal is exit 1 or 3 with the tool's own words. */
    const exits = new Map<string, Map<string, number>>();
    const odd: string[] = [];
    let swaps = 0;
    startSwapper();
    try {
      const through = (name: string): number => exits.get(name)?.get('0') ?? 0;
      for (let i = 0; i < 40 || (i < 160 && (through('destroy') < CLI_MIN_DONE || through('force-release') < CLI_MIN_DONE)); i++) {
        for (const [args, lock] of [
          [['destroy', '--force', 'board/R1'], 'none'],
          [['force-release', 'board/R1'], 'legacy'],
        ] as const) {
          setupR1(lock);
          const r = await cliTimed(staticDir, args, { timeoutMs: 20_000 });
          runs++;
          const name = args[0];
          const byCode = exits.get(name) ?? new Map<string, number>();
          exits.set(name, byCode);
          byCode.set(String(r.code ?? r.signal), (byCode.get(String(r.code ?? r.signal)) ?? 0) + 1);
          if (r.code !== 0 && !((r.code === 1 || r.code === 2 || r.code === 3) && r.stderr.startsWith('devserver-stage: '))) odd.push(`${args.join(' ')}: exit ${r.code ?? r.signal}: ${r.stderr.trim().slice(0, 200)}`);
          const diff = changes(outside, before, fingerprint(outside));
          if (diff.length > 0) {
            breaks.push(`${args.join(' ')} (exit ${r.code}): ${diff.slice(0, 4).join('; ')}`);
            resetOutside();
            before = fingerprint(outside);
          }
        }
      }
    } finally {
      swaps = await stopSwapper();
      const tally = [...exits].map(([name, byCode]) => `${name} ${[...byCode].map(([code, n]) => `${n}× exit ${code}`).join(', ')}`).join('; ');
      report(`CLI: ${runs} runs (${tally}), ${swaps} exchanges, ${breaks.length} changed something outside`);
    }
    assert.ok(breaks.length === 0, `${breaks.length} of ${runs} CLI runs changed files outside the static directory:\n  ${breaks.slice(0, 8).join('\n  ')}`);
    assert.ok(runs >= 80, 'every run ran');
    assert.deepEqual(odd.slice(0, 5), [], 'every run either did its work or was refused in its own words');
    assert.ok(swaps > 0, 'the swapper must have exchanged the directories');
    for (const name of ['destroy', 'force-release']) {
      const got = exits.get(name)?.get('0') ?? 0;
      assert.ok(got >= CLI_MIN_DONE, `${name}: only ${got} of ${runs / 2} runs got through (at least ${CLI_MIN_DONE} must, or the race proves little)`);
    }
  });
});
