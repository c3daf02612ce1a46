/**
 * The takeover of a stale lock above or inside the area being locked (takeStale.ts
 * `takeOverNested`, the way there opened level by level with `openPath`), attacked on its way:
 * - links planted at rest: `board` a link to a directory outside holding a dead holder's lock, and
 *   `board/b2` a link to one;
 * - races: a helper exchanges, with renameat2(RENAME_EXCHANGE) in a tight loop, the real `board`
 *   (or `board/b2`), holding a dead holder's lock, with a link to a directory outside holding
 *   another, while lock cycles on `board/b2` (or `board`) take the dead lock inside over again and
 *   again; and `board/b2`, holding a dead holder's lock, with `board/b3`, holding a live one, so that
 *   the takeover may open the live lock's directory where it judged the dead one;
 * - a FIFO or a file where the lock inside should be, or its work directory; a lock inside a
 *   directory whose name is not UTF-8.
 * Outside the static directory, canaries (and the dead locks there) are looked at after every cycle
 * and hashed at the end: nothing may change there. Each race counts its exchanges, its cycles and
 * the times the kernel's inotify saw the planted lock outside reached (its record opened through the
 * link), and asserts the takeover inside happened; a live lock is watched by inotify and must never
 * move. Nesting is by names: a co-user who may rename the directories can outrun the check (or move
 * a held area under another at any later time, race or not; SECURITY.md says so). The races count
 * how often a lock was taken with the live one above or inside it; they do not assert it.
 */
import { strict as assert } from 'assert';
import { spawn, spawnSync, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { acquire } from '../../../src/core/lock/lock';
import { StagingError } from '../../../src/core/base/errors';
import { LOCK_NAME, OWNER_FILE, WORK_PREFIX } from '../../../src/core/base/protocol';
import { changes, cliTimed, describeRun, exchanger, stopExchanger, fingerprint, plantCanaries, watchName, watchReach, type ReachWatch } from '../../attack';
import { cleanup, expectMessage, killAll, report, startWorker, tempDir, track, type Msg } from '../../helpers';

/** How long each race runs; counts are printed. */
const BUDGET_MS = Number(process.env.DSS_ATTACK_RACE_MS ?? 6_000);
/** Dead locks inside that each race must have taken over, or it proves little; a race short of them runs on, up to three budgets. */
const MIN_TAKEN = 10;

describe('attack: the takeover of a stale lock above or inside, on its way there', function () {
  this.timeout(BUDGET_MS * 10 + 60_000);
  let root = '';
  let staticDir = '';
  let outside = '';
  let deadPid = 0;
  let swapperCmd: string[] | string = 'not built';
  let swapper: ChildProcess | undefined;

  before(async function () {
    if (process.platform !== 'linux') this.skip();
    const dead = spawn('true');
    await new Promise((r) => dead.once('exit', r));
    deadPid = dead.pid!;
  });

  beforeEach(() => {
    root = tempDir('dss-nest-links-');
    staticDir = path.join(root, 'static');
    outside = path.join(root, 'outside');
    fs.mkdirSync(path.join(staticDir, 'board'), { recursive: true });
    plantCanaries(outside);
    // Outside, what a takeover through a link would take apart: a dead holder's lock of this
    // version (work directory and all) at the top and one level down, and a foreign one.
    plantDeadLock(path.join(outside, 'dir'), 'outside');
    plantDeadLock(path.join(outside, 'dir', 'b2'), 'outside-b2');
    plantDeadLock(path.join(outside, 'foreign'), 'outside-foreign', false);
    swapperCmd = exchanger(root);
  });

  afterEach(async () => {
    await stopSwapper();
    await killAll();
    cleanup(root);
  });

  function mkfifo(p: string): void {
    const r = spawnSync('mkfifo', [p]);
    assert.equal(r.status, 0, `mkfifo ${p}: ${String(r.stderr)}`);
  }

  /** A lock whose holder (a pid that has exited, on this host) is gone: stale at once. */
  function plantDeadLock(dir: string, token: string, withWork = true): void {
    const lock = path.join(dir, LOCK_NAME);
    fs.mkdirSync(lock, { recursive: true });
    const record = { pid: deadPid, hostname: os.hostname(), token, acquiredAt: new Date().toISOString(), staleMs: 10_000, refreshMs: 2_500 };
    fs.writeFileSync(path.join(lock, OWNER_FILE), JSON.stringify(record));
    if (withWork) {
      fs.mkdirSync(path.join(lock, `${WORK_PREFIX}${token}`));
      fs.writeFileSync(path.join(lock, `${WORK_PREFIX}${token}`, 'half-written.bin'), `${token}\n`);
    }
  }

  function startSwapper(a: string, b: string): void {
    if (typeof swapperCmd === 'string') throw new Error(swapperCmd);
    swapper = spawn(swapperCmd[0], [...swapperCmd.slice(1), a, b], { cwd: staticDir, stdio: ['ignore', 'pipe', 'inherit'] });
  }

  /** Stops the exchanger with both names as they were; how many exchanges it made. */
  async function stopSwapper(): Promise<number> {
    const s = swapper;
    swapper = undefined;
    return stopExchanger(s);
  }

  /** Opens a real directory of the static directory once, to set it up through its descriptor whatever its name is. */
  function pin(rel: string): { at: string; forOthers: string; close(): void } {
    const fd = fs.openSync(path.join(staticDir, rel), fs.constants.O_RDONLY | fs.constants.O_DIRECTORY | fs.constants.O_NOFOLLOW);
    return { at: `/proc/self/fd/${fd}`, forOthers: `/proc/${process.pid}/fd/${fd}`, close: () => fs.closeSync(fd) };
  }

  /** Every entry below `dir` by its `lstat` alone (reading a record would count as reaching it): after each cycle; contents hashed at the end. */
  function shapeOf(dir: string): Map<string, string> {
    const out = new Map<string, string>();
    const visit = (p: string, rel: string): void => {
      const st = fs.lstatSync(p, { throwIfNoEntry: false });
      if (st === undefined) return;
      out.set(rel || '.', `${st.mode.toString(8)} ino=${st.ino} size=${st.size} mtime=${st.mtimeMs} ctime=${st.ctimeMs}`);
      if (st.isDirectory()) for (const name of fs.readdirSync(p).sort()) visit(path.join(p, name), rel ? `${rel}/${name}` : name);
    };
    visit(dir, '');
    return out;
  }

  /** One lock cycle of `tag`: 'held' or the refusal's code. Anything but a coded refusal fails the test. */
  async function cycle(tag: string, whileHeld: () => boolean = () => false): Promise<string> {
    try {
      const lease = await acquire(staticDir, tag, { createOnce: false });
      const overlap = whileHeld();
      await lease.release();
      return overlap ? 'held with the live lock nested' : 'held';
    } catch (err) {
      if (err instanceof StagingError) return err.code;
      throw err;
    }
  }

  it('links at rest: `board` leading outside to a dead lock, locked below; `board/b2` leading outside to one, locked above: nothing outside changes', async () => {
    const before = fingerprint(outside);
    fs.rmdirSync(path.join(staticDir, 'board'));
    fs.symlinkSync(path.join(outside, 'dir'), path.join(staticDir, 'board'));
    const reach = await watchReach([path.join(outside, 'dir', LOCK_NAME, OWNER_FILE), path.join(outside, 'dir', 'b2', LOCK_NAME, OWNER_FILE)]);
    reach.start(0);
    const below = await cliTimed(staticDir, ['lock', 'board/b2', '--', 'true'], { timeoutMs: 20_000 });
    fs.unlinkSync(path.join(staticDir, 'board'));
    fs.mkdirSync(path.join(staticDir, 'board'));
    fs.symlinkSync(path.join(outside, 'dir', 'b2'), path.join(staticDir, 'board', 'b2'));
    fs.symlinkSync('../../outside/foreign', path.join(staticDir, 'board', 'b3'));
    const above = await cliTimed(staticDir, ['lock', 'board', '--', 'true'], { timeoutMs: 20_000 });
    const reached = await reach.end();
    report(`${describeRun('lock board/b2 (board a link outside)', below)}; ${describeRun('lock board (b2, b3 links outside)', above)}; outside reached: ${reached.length}`);
    assert.equal(below.code, 2, `a tag through a link outside is refused: ${below.stderr}`);
    assert.match(below.stderr, /symbolic link that leads outside the static directory/);
    // A link inside the area is not an area nested in it: never walked, never taken over.
    assert.equal(above.code, 0, above.stderr);
    assert.deepEqual(reached, [], 'no lock outside was even read');
    assert.deepEqual(changes(outside, before, fingerprint(outside)), []);
  });

  for (const where of ['inside', 'above'] as const) {
    const swapped = where === 'inside' ? 'board/b2' : 'board';
    const locked = where === 'inside' ? 'board' : 'board/b2';
    it(`${swapped}, holding a dead lock, exchanged in a tight loop with a link to a directory outside holding one, while ${locked} is locked again and again: only the lock inside is taken over`, async function () {
      if (typeof swapperCmd === 'string') this.skip();
      fs.mkdirSync(path.join(staticDir, 'board', 'b2'));
      const real = pin(swapped);
      const link = `${swapped}.x`;
      fs.symlinkSync(path.join(outside, 'dir', ...(where === 'inside' ? ['b2'] : [])), path.join(staticDir, link));
      const outsideLock = path.join(outside, 'dir', ...(where === 'inside' ? ['b2'] : []), LOCK_NAME, OWNER_FILE);
      const before = fingerprint(outside);
      const shape = shapeOf(outside);
      const reach: ReachWatch = await watchReach([outsideLock]);
      reach.start(0);
      const outcomes = new Map<string, number>();
      const breaks: string[] = [];
      let cycles = 0;
      let taken = 0;
      let swaps = 0;
      startSwapper(swapped, link);
      const started = Date.now();
      try {
        while (Date.now() < started + BUDGET_MS || (taken < MIN_TAKEN && Date.now() < started + 3 * BUDGET_MS)) {
          // The dead lock inside, planted again through the real directory's descriptor.
          if (!fs.existsSync(path.join(real.at, LOCK_NAME))) plantDeadLock(real.at, `inside${cycles}`);
          const outcome = await cycle(locked);
          cycles++;
          outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
          if (!fs.existsSync(path.join(real.at, LOCK_NAME))) taken++;
          const diff = changes(outside, shape, shapeOf(outside));
          if (diff.length > 0) {
            breaks.push(`cycle ${cycles} (${outcome}): ${diff.slice(0, 4).join('; ')}`);
            break;
          }
        }
      } finally {
        swaps = await stopSwapper();
        real.close();
      }
      const reached = await reach.end();
      breaks.push(...changes(outside, before, fingerprint(outside)));
      const tally = [...outcomes].map(([k, n]) => `${n} ${k}`).join(', ');
      report(`${swapped} exchanged with a link outside, ${locked} locked: ${cycles} cycles (${tally}); the dead lock inside taken over ${taken} times; ${swaps} exchanges; the lock outside read through the link ${reached.filter((r) => / opened/.test(r)).length} times; ${breaks.length} changed something outside`);
      assert.deepEqual(breaks, [], 'nothing outside the static directory changed');
      assert.ok(swaps > 0, 'the exchanger exchanged the directory and the link');
      assert.ok(taken >= MIN_TAKEN, `the dead lock inside was taken over at least ${MIN_TAKEN} times (${taken})`);
      assert.ok(reached.some((r) => / opened/.test(r)), 'the lock outside was reached through the link at least once');
    });
  }

  it('board/b2, holding a dead lock, exchanged in a tight loop with board/b3, holding a live one, while board is locked again and again: the live lock never moves (how often the walk is outrun is counted)', async function () {
    if (typeof swapperCmd === 'string') this.skip();
    fs.mkdirSync(path.join(staticDir, 'board', 'b2'));
    fs.mkdirSync(path.join(staticDir, 'board', 'b3'));
    const dead = pin('board/b2');
    const liveDir = pin('board/b3');
    const holder = track(startWorker('holder', [JSON.stringify({ staticDir, tag: 'board/b3', createOnce: false })]));
    await expectMessage(holder, (m) => m.type === 'acquired', 20_000, 'the live holder of board/b3');
    let lost = false;
    holder.on('message', (m: Msg) => {
      if (m.type === 'lost') lost = true;
    });
    const liveIno = fs.lstatSync(path.join(liveDir.at, LOCK_NAME)).ino;
    // inotify watches the live lock's directory itself, whatever name it has at the moment.
    const watcher = await watchName(liveDir.forOthers, LOCK_NAME);
    const outcomes = new Map<string, number>();
    let cycles = 0;
    let taken = 0;
    let swaps = 0;
    startSwapper('board/b2', 'board/b3');
    const started = Date.now();
    try {
      while (Date.now() < started + BUDGET_MS || (taken < MIN_TAKEN && Date.now() < started + 3 * BUDGET_MS)) {
        if (!fs.existsSync(path.join(dead.at, LOCK_NAME))) plantDeadLock(dead.at, `dead${cycles}`);
        // The live lock's directory never leaves board: holding board now covers it.
        const outcome = await cycle('board', () => true);
        cycles++;
        outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
        if (!fs.existsSync(path.join(dead.at, LOCK_NAME))) taken++;
      }
    } finally {
      swaps = await stopSwapper();
    }
    const events = await watcher.stop();
    const inoAfter = fs.lstatSync(path.join(liveDir.at, LOCK_NAME), { throwIfNoEntry: false })?.ino;
    dead.close();
    liveDir.close();
    const tally = [...outcomes].map(([k, n]) => `${n} ${k}`).join(', ');
    report(`board/b2 (dead lock) exchanged with board/b3 (live lock), board locked: ${cycles} cycles (${tally}); the dead lock taken over ${taken} times; ${swaps} exchanges; the live lock moved ${events.length} times`);
    assert.deepEqual(events, [], 'the live lock was never moved, removed or replaced');
    assert.equal(inoAfter, liveIno, 'the live lock is the same directory');
    assert.equal(lost, false, 'the live holder never lost its lock');
    assert.ok(swaps > 0, 'the exchanger exchanged the two directories');
    assert.ok(taken >= MIN_TAKEN, `the dead lock was taken over at least ${MIN_TAKEN} times (${taken})`);
    assert.ok((outcomes.get('ELOCKED') ?? 0) > 0, 'the live lock inside was met');
  });

  it('board, held by a live holder, exchanged in a tight loop with board.y, while board/b2 is locked again and again: the live lock never moves (how often the check is outrun is counted)', async function () {
    if (typeof swapperCmd === 'string') this.skip();
    fs.mkdirSync(path.join(staticDir, 'board', 'b2'));
    fs.mkdirSync(path.join(staticDir, 'board.y', 'b2'), { recursive: true });
    const liveDir = pin('board');
    const other = pin('board.y');
    const holder = track(startWorker('holder', [JSON.stringify({ staticDir, tag: 'board', createOnce: false })]));
    await expectMessage(holder, (m) => m.type === 'acquired', 20_000, 'the live holder of board');
    let lost = false;
    holder.on('message', (m: Msg) => {
      if (m.type === 'lost') lost = true;
    });
    const watcher = await watchName(liveDir.forOthers, LOCK_NAME);
    const outcomes = new Map<string, number>();
    let cycles = 0;
    let swaps = 0;
    startSwapper('board', 'board.y');
    const started = Date.now();
    try {
      while (Date.now() < started + BUDGET_MS) {
        const outcome = await cycle('board/b2', () => fs.existsSync(path.join(liveDir.at, 'b2', LOCK_NAME)));
        cycles++;
        outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      }
    } finally {
      swaps = await stopSwapper();
    }
    const events = await watcher.stop();
    liveDir.close();
    other.close();
    const tally = [...outcomes].map(([k, n]) => `${n} ${k}`).join(', ');
    report(`board (live lock) exchanged with board.y, board/b2 locked: ${cycles} cycles (${tally}); ${swaps} exchanges; the live lock moved ${events.length} times`);
    assert.deepEqual(events, [], 'the live lock was never moved, removed or replaced');
    assert.equal(lost, false, 'the live holder never lost its lock');
    assert.ok(swaps > 0, 'the exchanger exchanged the two directories');
    assert.ok((outcomes.get('ELOCKED') ?? 0) > 0, 'the live lock above was met');
  });

  // What stands where the lock inside should be: a FIFO, a file; a FIFO for its record; a FIFO or a file for its work directory.
  // `words`: what each refusal says (the planted thing was reached and judged); none: the dead lock is taken over.
  const planted: { name: string; plant: (lock: string) => void; words?: RegExp }[] = [
    { name: 'the lock a FIFO', plant: (lock) => mkfifo(lock), words: /legacy devserver lock|held by the Python devserver/ },
    { name: 'the lock a file', plant: (lock) => fs.writeFileSync(lock, 'not a lock\n'), words: /legacy devserver lock|held by the Python devserver/ },
    { name: 'its record a FIFO', plant: (lock) => (fs.mkdirSync(lock), mkfifo(path.join(lock, OWNER_FILE))), words: /it is a FIFO/ },
    { name: 'its work directory a FIFO', plant: (lock) => (plantDeadLock(path.dirname(lock), 'tok', false), mkfifo(path.join(lock, `${WORK_PREFIX}tok`))) },
    { name: 'its work directory a file', plant: (lock) => (plantDeadLock(path.dirname(lock), 'tok', false), fs.writeFileSync(path.join(lock, `${WORK_PREFIX}tok`), 'x')) },
  ];
  for (const p of planted) {
    it(`inside board, ${p.name}: lock board and lock board/b2 end on their own, in their own words, and change nothing outside`, async () => {
      const lock = path.join(staticDir, 'board', 'b2', LOCK_NAME);
      fs.mkdirSync(path.dirname(lock));
      p.plant(lock);
      const before = fingerprint(outside);
      const runs = [];
      for (const tag of ['board', 'board/b2']) {
        const r = await cliTimed(staticDir, ['lock', tag, '--', 'true'], { timeoutMs: 20_000 });
        runs.push(r);
        report(`${p.name}: ${describeRun(`lock ${tag}`, r)}`);
      }
      for (const r of runs) {
        assert.equal(r.hung, false, 'it ended on its own');
        if (p.words === undefined) assert.equal(r.code, 0, r.stderr);
        else {
          assert.equal(r.code, 3, r.stderr);
          assert.match(r.stderr, p.words);
        }
      }
      // Taken over: the dead lock and what stood for its work directory are gone, nothing set aside is left.
      if (p.words === undefined) assert.deepEqual(fs.readdirSync(path.dirname(lock)).filter((n) => n.startsWith(LOCK_NAME)), []);
      assert.deepEqual(changes(outside, before, fingerprint(outside)), []);
    });
  }

  it('a Python devserver lock inside a directory of board whose name is not UTF-8: lock board and destroy board are refused in their own words, and it stays', async () => {
    // `board/R\xff`: decoded the usual way, that name leads nowhere.
    const raw = Buffer.concat([Buffer.from(path.join(staticDir, 'board', 'R')), Buffer.from([0xff])]);
    fs.mkdirSync(raw);
    const lock = Buffer.concat([raw, Buffer.from(`/${LOCK_NAME}`)]);
    fs.writeFileSync(lock, 'a Python devserver lock\n');
    const ino = fs.lstatSync(lock).ino;
    for (const args of [
      ['lock', 'board', '--', 'true'],
      ['destroy', 'board'],
      ['destroy', '--force', 'board'],
    ]) {
      const r = await cliTimed(staticDir, args, { timeoutMs: 20_000 });
      report(describeRun(args.join(' '), r));
      assert.equal(r.code, 3, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /board\/R\\xff, inside it, is held by the Python devserver/);
    }
    assert.equal(fs.lstatSync(lock).ino, ino, 'the lock inside is still there');
    assert.equal(fs.readFileSync(lock, 'utf8'), 'a Python devserver lock\n');
    assert.deepEqual(fs.readdirSync(raw), [Buffer.from(LOCK_NAME)].map(String), 'nothing else appeared beside it');
  });
});
