/**
 * Holding an area covers everything below it, checked with real processes: a lock held by a
 * `devserver-stage lock` in another process, and two processes racing for nested areas with an
 * O_EXCL marker as referee.
 */
import { strict as assert } from 'assert';
import { spawn, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { inspect } from '../../../src/core/lock/inspect';
import { acquire } from '../../../src/core/lock/lock';
import { findHeldInside } from '../../../src/core/lock/nesting';
import { history } from '../../../src/core/log/history';
import { DEFAULT_TIMING, LOCK_NAME, OWNER_FILE, WORK_PREFIX } from '../../../src/core/base/protocol';
import { syncIo } from '../../../src/core/fs/io';
import { CLI, cleanup, cli, expectMessage, killAll, report, startWorker, staticContents, tempDir, track, waitFor, type Msg } from '../../helpers';

describe('nested areas', function () {
  this.timeout(60_000);
  let root: string;
  let staticDir: string;
  let source: string;

  beforeEach(() => {
    root = tempDir('dss-nest-');
    staticDir = path.join(root, 'static');
    source = path.join(root, 'src');
    fs.mkdirSync(staticDir);
    fs.mkdirSync(source);
    fs.writeFileSync(path.join(source, 'image.bin'), 'image');
  });
  afterEach(async () => {
    await killAll();
    cleanup(root);
  });

  /** `lock TAG -- sleep 60` in another process, once it holds the lock. */
  async function holdInAnotherProcess(tag: string): Promise<ChildProcess> {
    const started = path.join(root, `started-${tag.replace(/\//g, '_')}`);
    const child = track(
      spawn(process.execPath, [CLI, 'lock', tag, '--', 'sh', '-c', `touch "${started}"; exec sleep 60`], {
        env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir },
        stdio: ['ignore', 'ignore', 'pipe'],
      }),
    );
    await waitFor(() => (fs.existsSync(started) ? true : undefined), 20_000, `the lock on ${tag}`);
    return child;
  }

  it('while board/n1 is held, lock, stage and destroy of board/n1/sub fail with exit 3 and change nothing', async () => {
    fs.mkdirSync(path.join(staticDir, 'board', 'n1', 'sub'), { recursive: true });
    fs.writeFileSync(path.join(staticDir, 'board', 'n1', 'sub', 'kept'), 'kept');
    await holdInAnotherProcess('board/n1');
    const before = staticContents(staticDir);
    const attempts = [
      ['lock', 'board/n1/sub', '--', 'true'],
      ['lock', 'board/n1/new', '--', 'true'],
      ['lock', 'board/n1/sub/deeper', '--', 'true'],
      ['stage', 'board/n1/new', source],
      ['stage', '--add', 'board/n1/sub', source],
      ['destroy', 'board/n1/sub'],
      ['destroy', '--force', 'board/n1/sub'],
    ];
    for (const args of attempts) {
      const r = await cli(staticDir, args);
      assert.equal(r.code, 3, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /board\/n1, which contains it, is held by .*sleep 60/, args.join(' '));
      assert.deepEqual(staticContents(staticDir), before, `${args.join(' ')} changed nothing`);
    }
    const json = await cli(staticDir, ['--json', 'lock', 'board/n1/sub', '--', 'true']);
    const err = (JSON.parse(json.stderr) as { error: { code: string; lock: { tag: string; state: string } } }).error;
    assert.equal(err.code, 'ELOCKED');
    assert.equal(err.lock.state, 'held');
  });

  it('while board/n1/sub is held, lock and destroy of board/n1 and board fail with exit 3', async () => {
    await holdInAnotherProcess('board/n1/sub');
    const before = staticContents(staticDir);
    for (const args of [
      ['lock', 'board/n1', '--', 'true'],
      ['lock', 'board', '--', 'true'],
      ['destroy', 'board/n1'],
      ['destroy', 'board'],
      ['stage', '--add', 'board/n1', source],
    ]) {
      const r = await cli(staticDir, args);
      assert.equal(r.code, 3, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /board\/n1\/sub, inside it, is held by/, args.join(' '));
      assert.deepEqual(staticContents(staticDir), before, `${args.join(' ')} changed nothing`);
    }
  });

  it('--wait waits for a lock above to go; a stale lock above does not block', async () => {
    const holder = await holdInAnotherProcess('board/n1');
    setTimeout(() => holder.kill('SIGTERM'), 500);
    const waited = await cli(staticDir, ['lock', '--wait', '20', 'board/n1/sub', '--', 'true']);
    assert.equal(waited.code, 0, waited.stderr);
    // A lock whose holder is gone (a pid that has exited, on this machine): stale, so no obstacle.
    const dead = spawn('true');
    await new Promise((r) => dead.once('exit', r));
    const lockDir = path.join(staticDir, 'board', LOCK_NAME);
    fs.mkdirSync(lockDir);
    fs.writeFileSync(path.join(lockDir, OWNER_FILE), JSON.stringify({ pid: dead.pid, hostname: os.hostname(), token: 'gone', staleMs: 10_000, refreshMs: 2_500 }));
    const r = await cli(staticDir, ['lock', 'board/n1/sub', '--', 'true']);
    assert.equal(r.code, 0, r.stderr);
  });

  // A paused holder (SIGSTOP, swap, a long collection) is stale to the others but not dead: when it
  // resumes it carries on where it stopped. Its lock must be taken apart before anyone takes an area
  // nested with its own, or it writes below them through its work directory.
  for (const [paused, taker] of [
    ['board', 'board/b2'],
    ['board/b2', 'board'],
  ]) {
    it(`a holder of ${paused} paused past the stale threshold is taken over, never stepped past, when ${taker} is locked`, async () => {
      const timing = { staleMs: 2_000, refreshMs: 1_000 };
      fs.mkdirSync(path.join(staticDir, 'board', 'b2'), { recursive: true });
      const holder = track(startWorker('holder', [JSON.stringify({ staticDir, tag: paused, createOnce: false, ...timing })]));
      const got = await expectMessage<Msg & { token: string }>(holder, (m) => m.type === 'acquired', 20_000, `the holder of ${paused}`);
      const lost = expectMessage<Msg & { code: string }>(holder, (m) => m.type === 'lost', 60_000, 'the paused holder to learn its lock is gone');
      // The one way the paused holder writes into the area: through its work directory, inside its lock.
      const work = path.join(staticDir, paused, LOCK_NAME, `${WORK_PREFIX}${got.token}`);
      assert.ok(fs.statSync(work).isDirectory(), 'the holder writes through its work directory');
      holder.kill('SIGSTOP');
      try {
        await waitFor(async () => ((await inspect(staticDir, paused, timing)).state === 'stale' ? true : undefined), 30_000, `${paused} judged stale`);
        const lease = await acquire(staticDir, taker, { ...timing, createOnce: false });
        try {
          // The kernel's word: the paused holder's way in is gone, so whatever it does on waking changes nothing here.
          assert.throws(() => fs.writeFileSync(path.join(work, 'written-after-waking'), 'x'), { code: 'ENOENT' });
          assert.equal(fs.existsSync(path.join(staticDir, paused, LOCK_NAME)), false, `the paused holder's lock on ${paused} was taken apart`);
          const events = await history(staticDir, { tag: paused });
          assert.ok(events.some((e) => e.kind === 'taken-over'), `the takeover of ${paused} is in its history: ${JSON.stringify(events.map((e) => e.kind))}`);
        } finally {
          await lease.release();
        }
      } finally {
        holder.kill('SIGCONT');
      }
      const said = await lost;
      report(`${paused} paused, ${taker} locked: the paused holder's lock was taken over; on waking it said ${said.code}`);
    });
  }

  it('two processes racing 200 times for b/n1 and b/n1/sub are never inside at once', async () => {
    fs.mkdirSync(path.join(staticDir, 'b', 'n1', 'sub'), { recursive: true });
    const marker = path.join(root, 'inside');
    const workers = ['b/n1', 'b/n1/sub'].map((tag) => track(startWorker('nest-racer', [JSON.stringify({ staticDir, tag, count: 200, marker })])));
    await Promise.all(workers.map((w) => expectMessage(w, (m) => m.type === 'ready', 20_000, 'ready')));
    const results = workers.map((w) => expectMessage<Msg & { entered: number; refused: number; overlaps: number; errors: string[] }>(w, (m) => m.type === 'done', 55_000, 'done'));
    for (const w of workers) w.send({ type: 'go' });
    const done = await Promise.all(results);
    report(`b/n1: ${done[0].entered} entered, ${done[0].refused} refused; b/n1/sub: ${done[1].entered} entered, ${done[1].refused} refused; both inside at once: ${done[0].overlaps + done[1].overlaps}`);
    for (const d of done) assert.deepEqual(d.errors, []);
    assert.equal(done[0].overlaps + done[1].overlaps, 0);
    assert.ok(done[0].entered > 0 && done[1].entered > 0, 'both got in at some point');
  });

  it('what the check inside costs on an area of 2,000 files in 20 directories', async () => {
    const area = path.join(staticDir, 'big');
    for (let d = 0; d < 20; d++) {
      fs.mkdirSync(path.join(area, `dir${d}`), { recursive: true });
      for (let f = 0; f < 100; f++) fs.writeFileSync(path.join(area, `dir${d}`, `file${f}`), '');
    }
    const times = (n: number, fn: () => Promise<unknown>): Promise<number[]> =>
      (async () => {
        const out: number[] = [];
        for (let i = 0; i < n; i++) {
          const t0 = process.hrtime.bigint();
          await fn();
          out.push(Number(process.hrtime.bigint() - t0) / 1e6);
        }
        return out.sort((a, b) => a - b);
      })();
    const median = (xs: number[]): string => xs[Math.floor(xs.length / 2)].toFixed(3);
    const walk = await times(200, () => findHeldInside(area, DEFAULT_TIMING, Date.now(), syncIo));
    fs.mkdirSync(path.join(staticDir, 'small'));
    const cycleBig = await times(100, async () => (await acquire(staticDir, 'big', { createOnce: false })).release());
    const cycleSmall = await times(100, async () => (await acquire(staticDir, 'small', { createOnce: false })).release());
    report(`check inside of 2,000 files in 20 directories: median ${median(walk)} ms; lock cycle there ${median(cycleBig)} ms, on an empty area ${median(cycleSmall)} ms`);
    assert.equal(await findHeldInside(area, DEFAULT_TIMING), undefined);
  });
});
