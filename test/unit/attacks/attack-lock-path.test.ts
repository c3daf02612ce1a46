/**
 * What the lock path opens in one lookup, keeps, or makes late, attacked:
 * - an existing area is opened from the static directory's real path in one lookup: the area (and,
 *   for a deeper tag, the board above it) is exchanged with a link to a copy outside while lock
 *   cycles run;
 * - the history segment a tag was last written to is opened again by its path: its directory and
 *   the segment itself are moved out of the static directory with a link left in their place, and
 *   the directory is exchanged with such a link while lock cycles run;
 * - the work directory is made when first asked for, through the lock's own descriptor: the lock is
 *   taken away and another put in its place, or moved out of the static directory, before that;
 * - the lease tells its lock by the descriptor it keeps open: a copy of its lock, record and all,
 *   put in its place is not taken for it.
 * Outside the static directory, canaries are hashed before and after; nothing may change there.
 */
import { strict as assert } from 'assert';
import { spawn, spawnSync, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { acquire } from '../../../src/core/lock/lock';
import { flushHistory, history } from '../../../src/core/log/history';
import { StagingError as StagingErrorClass, type StagingError } from '../../../src/core/base/errors';
import { HISTORY_DIR, LOCK_NAME, META_DIR, OWNER_FILE, historyDirOf } from '../../../src/core/base/protocol';
import { changes, exchanger, fingerprint, plantCanaries } from '../../attack';
import { cleanup, rejectsWith, report, sleep, tempDir } from '../../helpers';

/** How long each race runs; iteration counts are printed. */
const BUDGET_MS = Number(process.env.DSS_ATTACK_RACE_MS ?? 8_000);
/** Cycles that must get through per race (most are refused): a race short of them runs on, up to three budgets. */
const MIN_HELD = 10;

describe('attack: the lock path, against what it opens in one lookup, keeps, or makes late', function () {
  this.timeout(BUDGET_MS * 6 + 60_000);
  let root = '';
  let staticDir = '';
  let outside = '';
  /** The exchanger's command (koffi or C), or why there is none. */
  let swapperCmd: string[] | string = 'not built';
  let swapper: ChildProcess | undefined;

  let binDir = '';

  before(function () {
    if (process.platform !== 'linux') this.skip();
    binDir = tempDir('dss-attack-lockpath-bin-');
    swapperCmd = exchanger(binDir);
    if (typeof swapperCmd === 'string') console.log(`      skipped: ${swapperCmd}`);
  });

  after(() => binDir && cleanup(binDir));

  beforeEach(() => {
    root = tempDir('dss-attack-lockpath-');
    staticDir = path.join(root, 'static');
    outside = path.join(root, 'outside');
    fs.mkdirSync(staticDir);
    plantCanaries(outside);
  });

  afterEach(async () => {
    await stopSwapper();
    cleanup(root);
  });

  /** The swapper running, and where: it exchanges `a` (the real directory) and `b` (a link) in `cwd`. */
  let swapping: { cwd: string; a: string; b: string } | undefined;

  function startSwapper(cwd: string, a: string, b: string): void {
    swapper = spawn(swapperCmd[0], [...(swapperCmd as string[]).slice(1), a, b], { cwd, stdio: ['ignore', 'pipe', 'inherit'] });
    swapping = { cwd, a, b };
  }

  /** Stops the swapper and leaves `a` the real directory again: the number of exchanges it made. */
  async function stopSwapper(): Promise<number> {
    const s = swapper;
    const where = swapping;
    swapper = undefined;
    swapping = undefined;
    if (s === undefined || where === undefined) return 0;
    let out = '';
    s.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    const done = new Promise<void>((r) => s.once('close', () => r()));
    if (s.exitCode === null) s.kill('SIGTERM');
    await done;
    if (fs.lstatSync(path.join(where.cwd, where.a)).isSymbolicLink()) spawnSync(swapperCmd[0], [...(swapperCmd as string[]).slice(1), where.a, where.b, '1'], { cwd: where.cwd });
    return Number(out.trim()) || 0;
  }

  /** Runs lock cycles of `tag` until the budget is spent, checking `outside` after each. */
  async function cycles(tag: string, warnings: StagingError[]): Promise<{ held: number; refused: number; codes: string; breaks: string[] }> {
    let before = fingerprint(outside);
    const breaks: string[] = [];
    let held = 0;
    let refused = 0;
    const byCode = new Map<string, number>();
    const started = Date.now();
    while (Date.now() < started + BUDGET_MS || (held < MIN_HELD && Date.now() < started + 3 * BUDGET_MS)) {
      try {
        const lease = await acquire(staticDir, tag, { createOnce: false, warn: (w) => warnings.push(w) });
        held++;
        await lease.release();
      } catch (err) {
        refused++;
        // A refusal is a coded error; anything else is a failure of the tool.
        assert.ok(err instanceof StagingErrorClass, `cycle ${held + refused}: ${String(err)}`);
        byCode.set(err.code, (byCode.get(err.code) ?? 0) + 1);
      }
      const diff = changes(outside, before, fingerprint(outside));
      if (diff.length > 0) {
        breaks.push(`cycle ${held + refused}: ${diff.slice(0, 4).join('; ')}`);
        before = fingerprint(outside);
      }
    }
    await flushHistory();
    return { held, refused, codes: [...byCode].map(([code, n]) => `${n} ${code}`).join(', ') || 'none', breaks };
  }

  for (const tag of ['R1', 'board/R2']) {
    it(`acquire+release of ${tag} while ${tag.includes('/') ? 'its board' : 'it'} is exchanged with a link to a copy outside: nothing outside changes`, async function () {
      if (typeof swapperCmd === 'string') return this.skip();
      const top = tag.split('/')[0];
      fs.mkdirSync(path.join(staticDir, tag), { recursive: true });
      // The copy outside has what the cycle writes: a lock would land there, the counter change.
      fs.mkdirSync(path.join(outside, 'copy', ...tag.split('/').slice(1)), { recursive: true });
      fs.symlinkSync('7', path.join(outside, 'copy', ...tag.split('/').slice(1), '.devserver-staging.fence'));
      fs.symlinkSync(path.join(outside, 'copy'), path.join(staticDir, `${top}.x`));
      startSwapper(staticDir, top, `${top}.x`);
      const warnings: StagingError[] = [];
      const { held, refused, codes, breaks } = await cycles(tag, warnings);
      const swaps = await stopSwapper();
      report(`${tag}: ${held} cycles held, ${refused} refused (${codes}), ${swaps} exchanges, ${breaks.length} changed something outside`);
      assert.deepEqual(breaks, [], 'nothing outside the static directory may change');
      assert.ok(held >= MIN_HELD, `only ${held} of ${held + refused} cycles got through (at least ${MIN_HELD} must, or the test proves little)`);
      assert.ok(swaps > 0, 'the swapper must have exchanged the directories');
    });
  }

  it('a history record never follows its tag directory or segment out of the static directory', async () => {
    const tag = 'H1';
    fs.mkdirSync(path.join(staticDir, tag));
    const warnings: StagingError[] = [];
    const warn = (w: StagingError): void => void warnings.push(w);
    // One cycle: the process now knows the segment's path.
    await (await acquire(staticDir, tag, { createOnce: false, warn })).release();
    const [fan, hash] = historyDirOf(tag);
    const historyDir = path.join(staticDir, META_DIR, HISTORY_DIR);
    const segments = fs.readdirSync(path.join(historyDir, fan, hash));
    assert.equal(segments.length, 1, `one segment: ${segments.join(', ')}`);
    const segment = segments[0];

    // The segment moved out, a link to it left in its place.
    fs.renameSync(path.join(historyDir, fan, hash, segment), path.join(outside, 'segment.jsonl'));
    fs.symlinkSync(path.join(outside, 'segment.jsonl'), path.join(historyDir, fan, hash, segment));
    let before = fingerprint(outside);
    await (await acquire(staticDir, tag, { createOnce: false, warn })).release();
    await flushHistory();
    assert.deepEqual(changes(outside, before, fingerprint(outside)), [], 'the segment moved outside is not written');
    assert.ok(warnings.length > 0, 'the record that could not be written is reported');

    // Put back, and learnt again by a cycle; then the fan directory moved out, the segment in it,
    // and a link to it left in its place.
    fs.rmSync(path.join(historyDir, fan, hash, segment));
    fs.renameSync(path.join(outside, 'segment.jsonl'), path.join(historyDir, fan, hash, segment));
    await (await acquire(staticDir, tag, { createOnce: false, warn })).release();
    fs.renameSync(path.join(historyDir, fan), path.join(outside, 'fan'));
    fs.symlinkSync(path.join(outside, 'fan'), path.join(historyDir, fan));
    before = fingerprint(outside);
    const reported = warnings.length;
    await (await acquire(staticDir, tag, { createOnce: false, warn })).release();
    await flushHistory();
    assert.deepEqual(changes(outside, before, fingerprint(outside)), [], 'the directory moved outside is not written');
    assert.ok(warnings.length > reported, 'the record that could not be written is reported');

    // Put right, the history goes on inside.
    fs.rmSync(path.join(historyDir, fan));
    const inside = (await history(staticDir, { tag })).length;
    await (await acquire(staticDir, tag, { createOnce: false, warn })).release();
    const events = await history(staticDir, { tag });
    assert.deepEqual(events.slice(inside).map((e) => e.kind), ['acquired', 'released'], 'the next records land inside again');
  });

  it('history records while the tag directory is exchanged with a link to a copy outside: nothing outside changes', async function () {
    if (typeof swapperCmd === 'string') return this.skip();
    const tag = 'H2';
    fs.mkdirSync(path.join(staticDir, tag));
    await (await acquire(staticDir, tag, { createOnce: false })).release();
    const [fan, hash] = historyDirOf(tag);
    const historyDir = path.join(staticDir, META_DIR, HISTORY_DIR);
    // The copy outside: the same fan, tag directory and segment names.
    fs.cpSync(path.join(historyDir, fan), path.join(outside, 'fan'), { recursive: true });
    fs.symlinkSync(path.join(outside, 'fan'), path.join(historyDir, `${fan}.x`));
    const inside = path.join(historyDir, fan, hash);
    const recordsBefore = fs.readdirSync(inside).reduce((n, s) => n + fs.readFileSync(path.join(inside, s), 'utf8').split('\n').length, 0);
    startSwapper(historyDir, fan, `${fan}.x`);
    const warnings: StagingError[] = [];
    const { held, refused, codes, breaks } = await cycles(tag, warnings);
    const swaps = await stopSwapper();
    const recordsAfter = fs.readdirSync(inside).reduce((n, s) => n + fs.readFileSync(path.join(inside, s), 'utf8').split('\n').length, 0);
    report(`${held} cycles held, ${refused} refused (${codes}), ${swaps} exchanges, ${recordsAfter - recordsBefore} records inside, ${warnings.length} not written, ${breaks.length} changed something outside`);
    assert.deepEqual(breaks, [], 'nothing outside the static directory may change');
    assert.ok(held >= MIN_HELD, `only ${held} of ${held + refused} cycles got through (at least ${MIN_HELD} must, or the test proves little)`);
    assert.ok(swaps > 0, 'the swapper must have exchanged the directories');
    // Records went through the link's place: some must have been refused there, or the exchange never met a record.
    assert.ok(warnings.length > 0, 'some records met the link and were not written');
    assert.ok(recordsAfter > recordsBefore, 'records still land inside');
  });

  it('the work directory is built into the lease\'s own lock before it is placed: once the lock is taken away, its name leads nowhere', async () => {
    const area = path.join(staticDir, 'W1');
    fs.mkdirSync(area);
    const lockPath = path.join(area, LOCK_NAME);

    // Taken away (as a force-release moves it) and another lock put in its place.
    const a = await acquire(staticDir, 'W1', { createOnce: false });
    fs.renameSync(lockPath, path.join(area, `${LOCK_NAME}.elsewhere`));
    fs.mkdirSync(lockPath);
    const other = JSON.stringify({ pid: 1, hostname: 'other', user: 'x', clientId: 'x', acquiredAt: new Date().toISOString(), token: 'other', staleMs: 600_000, refreshMs: 2_500, tool: 'test' });
    fs.writeFileSync(path.join(lockPath, OWNER_FILE), other);
    const work = a.workDir;
    assert.deepEqual(fs.readdirSync(lockPath), [OWNER_FILE], 'nothing is made in the lock that took its place');
    assert.throws(() => fs.writeFileSync(path.join(work, 'part'), 'x'), /ENOENT/, 'its name leads nowhere');
    await rejectsWith(a.release(), 'ECOMPROMISED');
    assert.deepEqual(fs.readdirSync(lockPath), [OWNER_FILE]);
    assert.equal(fs.readFileSync(path.join(lockPath, OWNER_FILE), 'utf8'), other, 'the other lock is left alone');
    fs.rmSync(lockPath, { recursive: true });
    fs.rmSync(path.join(area, `${LOCK_NAME}.elsewhere`), { recursive: true });

    // Moved out of the static directory.
    const b = await acquire(staticDir, 'W1', { createOnce: false });
    fs.renameSync(lockPath, path.join(outside, 'moved-lock'));
    const before = fingerprint(outside);
    void b.workDir;
    assert.deepEqual(changes(outside, before, fingerprint(outside)), [], 'nothing is made in a lock moved outside');
    await rejectsWith(b.release(), 'ECOMPROMISED');
  });

  it('the work directory, there from the start, does not make the heartbeat take the lock for lost when it is written in', async () => {
    fs.mkdirSync(path.join(staticDir, 'W2'));
    const lease = await acquire(staticDir, 'W2', { createOnce: false, staleMs: 2_000, refreshMs: 1_000 });
    const lost: unknown[] = [];
    lease.on('lost', (r) => lost.push(r));
    const work = lease.workDir;
    const st = fs.lstatSync(work);
    assert.ok(st.isDirectory(), 'built in with the lock');
    assert.equal(path.dirname(work), lease.area.at(LOCK_NAME), 'inside the lock, named through it');
    fs.writeFileSync(path.join(work, 'part'), 'x');
    // Three heartbeats.
    await sleep(3_500);
    assert.deepEqual(lost, [], 'still held');
    assert.equal(lease.state, 'held');
    await lease.release();
    assert.deepEqual(fs.readdirSync(path.join(staticDir, 'W2')).filter((n) => n.startsWith(LOCK_NAME)), [], 'the lock is gone, work directory and all');
  });

  it('a lease lost before anyone asked for its signal hands out one already aborted, with the reason', async () => {
    fs.mkdirSync(path.join(staticDir, 'S1'));
    const lease = await acquire(staticDir, 'S1', { createOnce: false, staleMs: 2_000, refreshMs: 1_000 });
    const lost = new Promise<StagingError>((resolve) => lease.once('lost', resolve));
    fs.rmSync(path.join(staticDir, 'S1', LOCK_NAME), { recursive: true });
    const reason = await lost;
    assert.equal(lease.signal.aborted, true);
    assert.equal(lease.signal.reason, reason);
    assert.equal((lease.signal.reason).code, 'ECOMPROMISED');
    await rejectsWith(lease.release(), 'ECOMPROMISED');
  });

  it('a copy of the lease\'s lock, record and all, put in its place is not taken for it', async () => {
    const area = path.join(staticDir, 'C1');
    fs.mkdirSync(area);
    const lockPath = path.join(area, LOCK_NAME);
    const lease = await acquire(staticDir, 'C1', { createOnce: false });
    const record = fs.readFileSync(path.join(lockPath, OWNER_FILE), 'utf8');
    fs.renameSync(lockPath, path.join(outside, 'stolen'));
    fs.mkdirSync(lockPath);
    fs.writeFileSync(path.join(lockPath, OWNER_FILE), record);
    await rejectsWith(lease.release(), 'ECOMPROMISED');
    assert.equal(fs.readFileSync(path.join(lockPath, OWNER_FILE), 'utf8'), record, 'the copy is left where it is');
    assert.ok(fs.existsSync(path.join(outside, 'stolen', OWNER_FILE)), 'and the moved lock is not touched outside');
  });
});
