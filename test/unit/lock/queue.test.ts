/**
 * The fair queue under real conditions: waiters in separate processes, real signals, things
 * planted in the queue. The kernel is the referee of the order: each waiter, once inside, creates
 * the first free `order/<k>` with O_EXCL, so the entries are numbered by the filesystem, not read
 * from clocks; an O_EXCL marker held inside shows any overlap. Waiters start one after another,
 * each only once the one before it has its ticket (its first place-in-line report), so the order
 * they came in is known. Timings are reported; the only bounds asserted are the protocol's own,
 * each with its slack explained.
 */
import { strict as assert } from 'assert';
import { spawn, spawnSync, type ChildProcess } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { performance } from 'perf_hooks';
import { makeHolder } from '../../../src/core/base/holder';
import { acquire } from '../../../src/core/lock/lock';
import { queueDirOf } from '../../../src/core/lock/lineDirs';
import { queueOf } from '../../../src/core/lock/lineView';
import { META_DIR, QUEUE_DIR } from '../../../src/core/base/protocol';
import { CLI, type Msg, WORKERS, catchesSignal, cleanup, cli, expectMessage, exitOf, isRoot, killAll, rejectsWith, report, tempDir, track, waitFor } from '../../helpers';

const wallMs = (): number => performance.timeOrigin + performance.now();
const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)] ?? NaN;
const max = (xs: readonly number[]): number => Math.max(...xs);
const ms = (x: number): string => `${x.toFixed(1)} ms`;

interface Waiter {
  id: number;
  child: ChildProcess;
}

/** Long-lived waiter processes (test/workers/waiter.ts), replaced when a test kills some. */
class Pool {
  private next = 0;
  readonly idle: Waiter[] = [];

  constructor(
    private readonly staticDir: string,
    private readonly options: { staleMs?: number; refreshMs?: number } = {},
  ) {}

  async start(wrap?: (command: string, args: string[]) => [string, string[]]): Promise<Waiter> {
    const id = this.next++;
    const args = [path.join(WORKERS, 'waiter.js'), JSON.stringify({ staticDir: this.staticDir, id, ...this.options })];
    const [command, argv] = wrap?.(process.execPath, args) ?? [process.execPath, args];
    const child = track(spawn(command, argv, { stdio: ['ignore', 'pipe', 'pipe', 'ipc'] }));
    await expectMessage(child, (m) => m.type === 'ready', 30_000, 'ready');
    return { id, child };
  }

  async take(n: number): Promise<Waiter[]> {
    this.idle.push(...(await Promise.all(Array.from({ length: Math.max(0, n - this.idle.length) }, () => this.start()))));
    return this.idle.splice(0, n);
  }

  giveBack(ws: readonly Waiter[]): void {
    this.idle.push(...ws.filter((w) => w.child.exitCode === null && w.child.signalCode === null));
  }
}

interface Joined {
  w: Waiter;
  /** Every place-in-line report of this round, in order. */
  positions: number[];
  /** When it entered, by its own wall clock (the same clock in every process). */
  enteredAt?: number;
  outcome?: Promise<Msg>;
}

/** Starts `w` waiting for `tag` and resolves once its ticket exists (its first report). */
async function join(w: Waiter, round: number, tag: string, orderDir: string, waitMs: number): Promise<Joined> {
  const joined: Joined = { w, positions: [] };
  const onMessage = (m: Msg): void => {
    if (m.type === 'position' && m.round === round) joined.positions.push(m.position as number);
    if (m.type === 'entered' && m.round === round) joined.enteredAt = m.atMs as number;
  };
  w.child.on('message', onMessage);
  const first = expectMessage(w.child, (m) => m.type === 'position' && m.round === round, 20_000, `waiter ${w.id}'s place in line`);
  joined.outcome = expectMessage(w.child, (m) => (m.type === 'released' || m.type === 'failed') && m.round === round, 60_000, `waiter ${w.id}'s turn`);
  joined.outcome.catch(() => undefined).finally(() => w.child.off('message', onMessage));
  w.child.send({ type: 'wait', round, tag, waitMs, orderDir, marker: path.join(path.dirname(orderDir), 'inside.marker') });
  await first;
  return joined;
}

/** The waiter ids in the order the kernel numbered their entries. */
function entries(orderDir: string): number[] {
  return fs
    .readdirSync(orderDir)
    .map(Number)
    .sort((a, b) => a - b)
    .map((k) => Number(fs.readFileSync(path.join(orderDir, String(k)), 'utf8')));
}

/** What is left in the static directory's queues (nothing, once everyone has left). */
function queueLeftovers(staticDir: string): string[] {
  const dir = path.join(staticDir, META_DIR, QUEUE_DIR);
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir).flatMap((key) => {
    const sub = path.join(dir, key);
    return fs.lstatSync(sub).isDirectory() ? [key, ...fs.readdirSync(sub).map((n) => `${key}/${n}`)] : [key];
  });
}

describe('fair queue (multi-process)', function () {
  this.timeout(120_000);
  let staticDir: string;

  beforeEach(() => {
    staticDir = tempDir('dss-queue-');
  });

  afterEach(async () => {
    await killAll();
    cleanup(staticDir);
  });

  it('waiters enter in the order they came: 120 rounds of 5 processes, with waiters killed in line and waiters that time out', async function () {
    const ROUNDS = 120;
    const N = 5;
    const tag = 'board/shared';
    fs.mkdirSync(path.join(staticDir, 'board', 'shared'), { recursive: true });
    const pool = new Pool(staticDir);
    const kinds = ['plain', 'kill', 'plain', 'timeout'] as const;
    const handoff: Record<(typeof kinds)[number], number[]> = { plain: [], kill: [], timeout: [] };
    let entered = 0;
    let killed = 0;
    let timedOut = 0;
    let deadAtRelease = 0;
    const spent = { spawn: 0, join: 0, drain: 0 };
    const t0 = performance.now();
    for (let round = 0; round < ROUNDS; round++) {
      const kind = kinds[round % kinds.length];
      const orderDir = path.join(staticDir, 'rounds', String(round));
      fs.mkdirSync(orderDir, { recursive: true });
      const holder = await acquire(staticDir, tag, { createOnce: false });
      const tTake = performance.now();
      const line = await pool.take(N);
      spent.spawn += performance.now() - tTake;
      const tJoin = performance.now();
      // Kill rounds: always the first in line (the one a release would go to), and one other.
      const victims = kind === 'kill' ? new Set([0, 1 + (round % (N - 1))]) : new Set<number>();
      const quitter = kind === 'timeout' ? 1 + (round % (N - 1)) : -1;
      const joined: Joined[] = [];
      for (const [i, w] of line.entries()) {
        // The quitter gives up while the lock is still held; the others wait as long as it takes.
        joined.push(await join(w, round, tag, orderDir, i === quitter ? 250 : 60_000));
        assert.ok(joined[i].positions[0] <= i + 1, `waiter ${i} of round ${round} joined at ${joined[i].positions[0]}, behind fewer than ${i}`);
        if (kind !== 'timeout') assert.equal(joined[i].positions[0], i + 1, `round ${round}: the ${i + 1}th to come is ${i + 1}th in line`);
      }
      for (const i of victims) {
        joined[i].w.child.kill('SIGKILL');
        await exitOf(joined[i].w.child);
        killed++;
      }
      if (quitter >= 0) {
        const gaveUp = await joined[quitter].outcome!;
        assert.equal(gaveUp.type, 'failed');
        assert.equal(gaveUp.code, 'ELOCKED', String(gaveUp.message));
        assert.match(String(gaveUp.message), /is held: a lock by .*\. \d+ (is|are) waiting for it in line \(.*queue/);
        timedOut++;
        // A waiter that gives up takes its ticket with it, at once.
        const pids = (await queueOf(staticDir, tag)).map((e) => e.waiter?.pid);
        assert.ok(!pids.includes(joined[quitter].w.child.pid), `the quitter's ticket is gone: ${JSON.stringify(pids)}`);
      }
      if (victims.size > 0) {
        // Their tickets no longer count: judged stale by their pid (gone on this machine) until
        // the next waiter to look removes them (the holder's heartbeat wakes them all).
        const q = await queueOf(staticDir, tag);
        const dead = q.filter((e) => e.state === 'stale');
        assert.ok(dead.every((e) => e.waiterAlive === false), JSON.stringify(dead));
        deadAtRelease += dead.length;
        assert.deepEqual(
          q.filter((e) => e.position !== undefined).map((e) => e.position),
          Array.from({ length: N - victims.size }, (_, i) => i + 1),
        );
      }
      spent.join += performance.now() - tJoin;
      const tDrain = performance.now();
      const releasedAt = wallMs();
      await holder.release();
      const expected = joined.filter((_, i) => !victims.has(i) && i !== quitter).map((j) => j.w.id);
      const outcomes = await Promise.all(joined.filter((_, i) => !victims.has(i) && i !== quitter).map((j) => j.outcome!));
      spent.drain += performance.now() - tDrain;
      for (const o of outcomes) assert.equal(o.type, 'released', `round ${round}: ${JSON.stringify(o)}`);
      const order = entries(orderDir);
      assert.deepEqual(order, expected, `round ${round} (${kind}): entered ${order.join(' ')}, came ${expected.join(' ')}`);
      entered += order.length;
      for (const [i, j] of joined.entries()) {
        if (victims.has(i) || i === quitter) continue;
        // Reported places only move up, and each entered as the first in line.
        assert.deepEqual([...j.positions].sort((a, b) => b - a), j.positions, `round ${round}: places of waiter ${i}: ${j.positions.join(' ')}`);
        assert.equal(j.positions.at(-1), 1, `round ${round}: waiter ${i} entered first in line`);
      }
      // The first to enter, by its own clock at entry: the same clock (wall time) in every process.
      const firstIn = firstEntryMs(joined, victims, quitter);
      handoff[kind].push(firstIn - releasedAt);
      assert.deepEqual(queueLeftovers(staticDir), [], `round ${round}: the last to leave removes the queue`);
      pool.giveBack(line);
    }
    const elapsed = performance.now() - t0;
    report(
      `${ROUNDS} rounds × ${N} waiters in ${(elapsed / 1000).toFixed(1)} s: ${entered} entries, all in the order the waiters came; ` +
        `${killed} waiters SIGKILLed in line and ${timedOut} that timed out were skipped`,
    );
    report(`time spent: starting waiter processes ${(spent.spawn / 1000).toFixed(1)} s, joining the line one by one (kills and timeouts included) ${(spent.join / 1000).toFixed(1)} s, release to last exit ${(spent.drain / 1000).toFixed(1)} s`);
    report(`release → first entry, plain rounds: median ${ms(median(handoff.plain))}, max ${ms(max(handoff.plain))}`);
    report(
      `release → first live entry with the first in line (and one more) SIGKILLed: median ${ms(median(handoff.kill))}, max ${ms(max(handoff.kill))} ` +
        `(${deadAtRelease} of ${killed} killed waiters' tickets were still in line at the release)`,
    );
    report(`release → first entry after a waiter timed out: median ${ms(median(handoff.timeout))}, max ${ms(max(handoff.timeout))}`);
    // A waiter killed on this machine is judged by its pid, not by the 10 s stale threshold: the
    // handoff past it takes a pid check, not a heartbeat's wait. 5 s of slack for a loaded machine.
    assert.ok(max(handoff.kill) < 5_000, `killed waiters were skipped by their pid: ${max(handoff.kill)} ms`);
  });

  it('a waiter on another host keeps its place while it refreshes its ticket, and is skipped once a killed one goes stale', async function () {
    if (!isRoot) this.skip(); // a second hostname needs a UTS namespace (unshare), which needs root
    const timing = { staleMs: 2_000, refreshMs: 1_000 };
    const pool = new Pool(staticDir, timing);
    const tag = 'hosts';
    const elsewhere = (command: string, args: string[]): [string, string[]] => ['unshare', ['--uts', 'sh', '-c', 'hostname queue-other-host && exec "$0" "$@"', command, ...args]];
    for (const kill of [false, true]) {
      const round = kill ? 1 : 0;
      const orderDir = path.join(staticDir, 'rounds', String(round));
      fs.mkdirSync(orderDir, { recursive: true });
      const holder = await acquire(staticDir, tag, { ...timing, createOnce: false });
      const [a] = await pool.take(1);
      const remote = await pool.start(elsewhere);
      const [b] = await pool.take(1);
      const joined = [await join(a, round, tag, orderDir, 60_000), await join(remote, round, tag, orderDir, 60_000), await join(b, round, tag, orderDir, 60_000)];
      const q = await queueOf(staticDir, tag, timing);
      assert.equal(q[1]?.waiter?.hostname, 'queue-other-host');
      assert.equal(q[1]?.waiterAlive, undefined, 'a waiter on another host cannot be checked by its pid');
      if (kill) {
        remote.child.kill('SIGKILL');
        await exitOf(remote.child);
      } else {
        // Longer than the stale threshold: only its refreshes keep its place.
        await new Promise((r) => setTimeout(r, 2 * timing.staleMs));
      }
      const releasedAt = wallMs();
      await holder.release();
      const live = kill ? [joined[0], joined[2]] : joined;
      for (const j of live) assert.equal((await j.outcome!).type, 'released');
      assert.deepEqual(entries(orderDir), live.map((j) => j.w.id));
      if (kill) {
        const last = enteredAt(joined[2]);
        report(`a waiter killed on another host: the one behind it entered ${ms(last - releasedAt)} after the release (stale after ${timing.staleMs} ms without a refresh)`);
        // Judged by its heartbeat only: not before its ticket went stale (its last refresh was at
        // most refreshMs before the kill), and within a few polls after.
        assert.ok(last - releasedAt < timing.staleMs + 3_000, `skipped once stale: ${last - releasedAt} ms`);
      } else {
        report(`a live waiter on another host kept its place for ${(2 * timing.staleMs) / 1000} s (twice the stale threshold) by refreshing its ticket`);
      }
      pool.giveBack([a, b, remote]);
    }
    assert.deepEqual(queueLeftovers(staticDir), []);
  });

  it('a FIFO, a link, a directory and garbage planted as tickets hold the line only until stale, never hang it, and are removed without being followed', async function () {
    const timing = { staleMs: 2_000, refreshMs: 1_000 };
    const tag = 'planted';
    fs.mkdirSync(path.join(staticDir, tag));
    const outside = tempDir('dss-queue-outside-');
    try {
      const canary = path.join(outside, 'canary');
      fs.writeFileSync(canary, 'keep me');
      const hash = (): string => crypto.createHash('sha256').update(fs.readFileSync(canary)).digest('hex');
      const before = hash();
      // Taken before anything is planted: a caller that does not wait respects a line that looks live.
      const holder = await acquire(staticDir, tag, { ...timing, createOnce: false });
      const qdir = await queueDirOf(staticDir, tag);
      fs.mkdirSync(qdir, { recursive: true });
      const planted = ['0000000001', '0000000002', '0000000003', '0000000004', '0000000005'];
      assert.equal(spawnSync('mkfifo', [path.join(qdir, planted[0])]).status, 0);
      fs.symlinkSync(canary, path.join(qdir, planted[1]));
      fs.mkdirSync(path.join(qdir, planted[2]));
      fs.writeFileSync(path.join(qdir, planted[3]), 'not a record {');
      fs.writeFileSync(path.join(qdir, planted[4]), Buffer.alloc(100 * 1024, 'x'));
      fs.writeFileSync(path.join(qdir, 'README'), 'not a ticket');
      const q = await queueOf(staticDir, tag, timing);
      assert.deepEqual(
        q.map((e) => [e.position, e.unreadable !== undefined]),
        planted.map((_, i) => [i + 1, true]),
        'planted tickets that cannot be read count as waiting while fresh',
      );
      assert.match(q[0].unreadable!, /FIFO/);
      assert.match(q[1].unreadable!, /symbolic link/);

      const pool = new Pool(staticDir, timing);
      const orderDir = path.join(staticDir, 'rounds', '0');
      fs.mkdirSync(orderDir, { recursive: true });
      const joined: Joined[] = [];
      for (const w of await pool.take(3)) joined.push(await join(w, 0, tag, orderDir, 60_000));
      assert.deepEqual(
        joined.map((j) => j.positions[0]),
        [6, 7, 8],
        'behind the planted tickets',
      );
      const plantedAt = fs.lstatSync(path.join(qdir, planted[0])).mtimeMs;
      await holder.release();
      for (const j of joined) assert.equal((await j.outcome!).type, 'released');
      assert.deepEqual(entries(orderDir), joined.map((j) => j.w.id), 'the order held');
      const firstIn = enteredAt(joined[0]);
      report(`planted tickets held the line ${ms(firstIn - plantedAt)} after they were planted (stale after ${timing.staleMs} ms)`);
      // Not skipped while fresh; not waited on for long once stale (a few polls of slack).
      assert.ok(firstIn - plantedAt >= timing.staleMs, 'planted tickets count until stale');
      assert.ok(firstIn - plantedAt < timing.staleMs + 5_000, 'and no longer');
      assert.equal(hash(), before, 'the link was never followed');
      assert.ok(fs.existsSync(canary));
      // The planted tickets are gone; what does not look like a ticket is left alone.
      assert.deepEqual(fs.existsSync(qdir) ? fs.readdirSync(qdir) : [], ['README']);
    } finally {
      cleanup(outside);
    }
  });

  it('a caller that does not wait does not take a free lock others wait for; status shows the line', async function () {
    const tag = 'eve/R1';
    fs.mkdirSync(path.join(staticDir, 'eve', 'R1'), { recursive: true });
    // A ticket of a live process (this one) in a waiter's own words.
    const qdir = await queueDirOf(staticDir, tag);
    fs.mkdirSync(qdir, { recursive: true });
    const { acquiredAt, fence: _fence, ...rest } = makeHolder({ staleMs: 10_000, refreshMs: 2_500, acquiredAtMs: Date.now(), purpose: 'nightly eve' });
    fs.writeFileSync(path.join(qdir, '0000000001'), JSON.stringify({ ...rest, queuedAt: acquiredAt }));
    const free = await rejectsWith(acquire(staticDir, tag, { createOnce: false }), 'ELOCKED', 'is free, but 1 is waiting for it in line');
    assert.ok(free.message.includes(qdir), `the message names the queue: ${free.message}`);
    assert.match(free.message, /nightly eve/);
    const viaCli = await cli(staticDir, ['lock', tag, '--', 'true']);
    assert.equal(viaCli.code, 3);
    assert.match(viaCli.stderr, /is free, but 1 is waiting for it in line/);

    const status = await cli(staticDir, ['status', tag]);
    assert.match(status.stdout, /queue:\s+1 waiting/);
    assert.match(status.stdout, /1\.\s+\S+@\S+ \(pid \d+, nightly eve\), waiting \d+ s, heartbeat \d+ s ago/);
    const json = JSON.parse((await cli(staticDir, ['--json', 'status', tag])).stdout) as { state: string; queue: { position: number; waiter: { pid: number; purpose: string } }[] };
    assert.equal(json.state, 'free');
    assert.equal(json.queue[0]?.position, 1);
    assert.equal(json.queue[0]?.waiter.pid, process.pid);

    fs.unlinkSync(path.join(qdir, '0000000001'));
    const lease = await acquire(staticDir, tag, { createOnce: false });
    assert.equal(fs.existsSync(qdir), false, 'an empty queue is removed by the next to look');
    await lease.release();
  });

  it('lock --wait through the command line keeps the order; Ctrl-C in line leaves it at once', async function () {
    const tag = 'cli/R1';
    fs.mkdirSync(path.join(staticDir, 'cli', 'R1'), { recursive: true });
    const orderDir = path.join(staticDir, 'order');
    fs.mkdirSync(orderDir);
    // The command numbers its entry with the kernel's help: noclobber (O_EXCL) on the first free name.
    const enter = 'set -C; k=0; until (echo "$ID" > "$ORDER/$k") 2>/dev/null; do k=$((k+1)); done';
    const holder = await acquire(staticDir, tag, { createOnce: false });
    const waiters: { id: number; child: ChildProcess; exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }> }[] = [];
    for (let id = 0; id < 4; id++) {
      const child = track(
        spawn(process.execPath, [CLI, 'lock', '--wait', '60', tag, '--', 'sh', '-c', enter], {
          env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir, ID: String(id), ORDER: orderDir },
          stdio: ['ignore', 'pipe', 'pipe'],
        }),
      );
      waiters.push({ id, child, exit: exitOf(child) });
      await waitFor(async () => ((await queueOf(staticDir, tag)).some((e) => e.waiter?.pid === child.pid) ? true : undefined), 20_000, `CLI waiter ${id} in line`);
    }
    const q = await queueOf(staticDir, tag);
    assert.deepEqual(
      q.map((e) => e.waiter?.pid),
      waiters.map((w) => w.child.pid),
    );
    assert.match(q[0].waiter!.purpose!, /^sh -c/);
    // Ctrl-C to the second in line: it stops waiting (exit 130) and takes its ticket along.
    const quitter = waiters[1];
    assert.ok(catchesSignal(quitter.child.pid!, 'SIGINT'));
    const stoppedAt = performance.now();
    quitter.child.kill('SIGINT');
    assert.equal((await quitter.exit).code, 130);
    const left = (await queueOf(staticDir, tag)).map((e) => e.waiter?.pid);
    report(`a CLI waiter interrupted in line had left it when it exited, ${ms(performance.now() - stoppedAt)} after SIGINT`);
    assert.ok(!left.includes(quitter.child.pid), 'its ticket is gone when it has exited');
    await holder.release();
    for (const w of waiters) if (w !== quitter) assert.equal((await w.exit).code, 0);
    assert.deepEqual(entries(orderDir), [0, 2, 3]);
    assert.deepEqual(queueLeftovers(staticDir), []);
  });
});

/** When the first live waiter entered, by its own wall clock. */
function firstEntryMs(joined: readonly Joined[], victims: ReadonlySet<number>, quitter: number): number {
  return enteredAt(joined.find((_, i) => !victims.has(i) && i !== quitter)!);
}

function enteredAt(j: Joined): number {
  assert.ok(j.enteredAt !== undefined, `waiter ${j.w.id} entered`);
  return j.enteredAt;
}
