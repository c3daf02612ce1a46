/**
 * The lock under conditions a temp dir on one machine does not show: clocks that disagree
 * (libfaketime), a network filesystem shared by two clients (sshfs over a private sshd), and a
 * full disk (a small tmpfs). Each suite skips, saying why, where its tools or root are missing.
 * The only timing assertions are the protocol's own bounds, each with its slack explained.
 */
import { strict as assert } from 'assert';
import { spawn, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { performance } from 'perf_hooks';
import { inspect, list } from '../../../src/core/lock/inspect';
import { acquire, heldLeases } from '../../../src/core/lock/lock';
import { history } from '../../../src/core/log/history';
import { FENCE_FILE, HISTORY_DIR, LOCK_NAME, META_DIR, OWNER_FILE, historyDirOf, historyHostName, historySegmentName } from '../../../src/core/base/protocol';
import { LockStates, POLL_FAST_MS, POLL_IDLE_MS } from '../../../src/core/watch/states';
import type { LockState } from '../../../src/core/base/types';
import { type Msg, WORKERS, cleanup, exitOf, expectMessage, isRoot, killAll, readToken, report, run, sleep, snapshot, startWorker, tempDir, track, waitFor } from '../../helpers';
import { type SshfsExport, isMounted, startSshfs, unmountFuse, whyNoSshfs, works } from '../../sshfs';
import { FAKETIME, clockOff } from '../../hosts';

const timing = { staleMs: 2_000, refreshMs: 1_000 };

/**
 * Starts a compiled worker with an IPC channel. `otherHost` runs it under `unshare --uts` with
 * the hostname "otherhost", so the core sees a holder on another machine, whose pid it cannot
 * check; exec keeps one process through unshare and sh, so a kill reaches node itself.
 */
function startNode(worker: string, arg: object, options: { env?: NodeJS.ProcessEnv; otherHost?: boolean } = {}): ChildProcess {
  const env = { ...process.env, ...options.env };
  if (options.otherHost === true) {
    const script = path.join(WORKERS, `${worker}.js`);
    const stdio: ['ignore', 'pipe', 'pipe', 'ipc'] = ['ignore', 'pipe', 'pipe', 'ipc'];
    return track(spawn('unshare', ['--uts', 'sh', '-c', 'hostname otherhost && exec "$0" "$@"', process.execPath, script, JSON.stringify(arg)], { stdio, env }));
  }
  return track(startWorker(worker, [JSON.stringify(arg)], { env }));
}

/** Judges `judge()` every `everyMs` for `forMs`; returns every state seen. */
async function judgeFor<T extends { state: LockState }>(forMs: number, everyMs: number, judge: () => Promise<T>): Promise<T[]> {
  const seen: T[] = [];
  const end = performance.now() + forMs;
  while (performance.now() < end) {
    seen.push(await judge());
    await sleep(everyMs);
  }
  return seen;
}

// ---------------------------------------------------------------------------------------------

/**
 * A clock `offsetS` seconds off for one process (hosts.ts). Such a process plays another host on a
 * network filesystem: it measures the offset with the probe, which the core skips on a local
 * filesystem, where a real process's clock is the kernel's.
 */
function skewedEnv(lib: string, offsetS: number): NodeJS.ProcessEnv {
  return { ...clockOff(offsetS, lib), DEVSERVER_STAGING_CLOCK_PROBE: '1' };
}

/** How far Date.now() of a node process started with `env` is from ours, in ms. */
async function clockOffsetOf(env: NodeJS.ProcessEnv): Promise<number> {
  const before = Date.now();
  const r = await run(process.execPath, ['-e', 'process.stdout.write(String(Date.now()))'], { env: { ...process.env, ...env } });
  const after = Date.now();
  return Number(r.stdout) - (before + after) / 2;
}

describe('clock skew between hosts (libfaketime)', function () {
  this.timeout(120_000);
  let lib: string;
  let canUnshare = false;
  let staticDir: string;

  before(async function () {
    const found = FAKETIME;
    if (found === undefined) {
      console.log("      skipped: libfaketime is missing: install Debian's faketime (apt-get install faketime)");
      this.skip();
    }
    lib = found;
    const offset = await clockOffsetOf(skewedEnv(lib, -60));
    if (Math.abs(offset + 60_000) > 5_000) {
      console.log(`      skipped: libfaketime does not shift node's clock here (offset ${Math.round(offset)} ms, wanted -60000)`);
      this.skip();
    }
    canUnshare = isRoot && (await works('unshare', ['--uts', 'true']));
  });

  beforeEach(() => {
    staticDir = tempDir('dss-skew-');
  });

  afterEach(async () => {
    await killAll();
    await Promise.all(heldLeases().map((l) => l.release().catch(() => undefined)));
    cleanup(staticDir);
  });

  /**
   * After a SIGKILL, when must the lock be stale? Its last heartbeat was at most `refreshMs`
   * before the kill, so it turns stale at most `staleMs` after that. The slack covers timers
   * running late on a busy machine and the 100 ms between two looks.
   */
  const staleBoundMs = timing.staleMs + timing.refreshMs + 1_000;

  /**
   * Kills `holder`, a holder on another host where root allows it (the test is skipped otherwise),
   * and waits for `judge` to call its lock stale: that judgement, and how long after the kill.
   */
  async function killAndAwaitStale<T extends { state: LockState }>(
    test: Mocha.Context,
    holder: ChildProcess,
    judge: () => Promise<T>,
    lockPath?: string,
  ): Promise<{ stale: T; elapsed: number; afterBeatMs?: number }> {
    if (!canUnshare) {
      console.log('      skipped the kill: a holder on another host (`unshare --uts`) needs root');
      test.skip();
    }
    const t0 = performance.now();
    holder.kill('SIGKILL');
    await exitOf(holder);
    // Its last heartbeat as the filesystem keeps it, in the filesystem's (here: the real) time.
    const lastBeatMs = lockPath === undefined ? undefined : fs.statSync(lockPath).mtimeMs;
    const stale = await waitFor(
      async () => {
        const j = await judge();
        return j.state === 'stale' ? j : undefined;
      },
      staleBoundMs + 5_000,
      'the lock to turn stale',
      100,
    );
    // Judged stale no later than now, by the real clock.
    return { stale, elapsed: performance.now() - t0, ...(lastBeatMs !== undefined ? { afterBeatMs: Date.now() - lastBeatMs } : {}) };
  }

  for (const offsetS of [-60, 60]) {
    const clock = `${Math.abs(offsetS)} s ${offsetS < 0 ? 'behind' : 'ahead'}`;

    it(`a holder whose clock is ${clock}: held for a real-clock judge, stale soon after it dies on another host`, async function () {
      const tag = `skew/holder${offsetS}`;
      const lockPath = path.join(staticDir, tag, LOCK_NAME);
      const env = skewedEnv(lib, offsetS);
      const holderClock = await clockOffsetOf(env);
      assert.ok(Math.abs(holderClock - offsetS * 1000) < 5_000, `the holder's clock is ${Math.round(holderClock)} ms off`);

      const holder = startNode('holder', { staticDir, tag, ...timing, createOnce: false }, { env, otherHost: canUnshare });
      const acquired = await expectMessage(holder, (m) => m.type === 'acquired' || m.type === 'error', 30_000, 'acquired');
      assert.equal(acquired.type, 'acquired', JSON.stringify(acquired));

      // Longer than the threshold plus a heartbeat: a lock judged on the wrong clock would be stale by now.
      const seen = await judgeFor(timing.staleMs + timing.refreshMs + 300, 200, () => inspect(staticDir, tag, timing));
      assert.deepEqual([...new Set(seen.map((i) => i.state))], ['held'], JSON.stringify(seen.find((i) => i.state !== 'held')));
      // Heartbeats are stamped in the filesystem's time, not in the holder's, a minute off: had they
      // been stamped in the holder's time, this lock would look a minute old (or a minute ahead,
      // and immortal for that minute).
      const ageMs = Date.now() - fs.statSync(lockPath).mtimeMs;
      report(`holder clock ${Math.round(holderClock)} ms off; heartbeat age by the real clock ${Math.round(ageMs)} ms; ${seen.length} judgements, all held`);
      assert.ok(Math.abs(ageMs) <= timing.refreshMs + 500, `the heartbeat is ${Math.round(ageMs)} ms old by the real clock`);

      const { stale, elapsed, afterBeatMs } = await killAndAwaitStale(this, holder, () => inspect(staticDir, tag, timing), lockPath);
      report(`SIGKILL → stale after ${Math.round(elapsed)} ms (bound ${staleBoundMs} ms), ${Math.round(afterBeatMs!)} ms after the last heartbeat's mtime at most: ${stale.staleReason}`);
      assert.ok(elapsed <= staleBoundMs, `stale only after ${Math.round(elapsed)} ms`);
      // A real-clock judge never calls it stale before the threshold has passed since the last heartbeat.
      assert.ok(afterBeatMs! > timing.staleMs, `stale at most ${Math.round(afterBeatMs!)} ms after the last heartbeat, before the ${timing.staleMs} ms threshold`);
      const lease = await acquire(staticDir, tag, { ...timing, createOnce: false });
      assert.equal(readToken(lockPath), lease.holder.token);
      await lease.release();
    });

    it(`a judge whose clock is ${clock}: a real-clock holder is held, and stale soon after it dies on another host`, async function () {
      const tag = `skew/judge${offsetS}`;
      const holder = startNode('holder', { staticDir, tag, ...timing, createOnce: false }, { otherHost: canUnshare });
      const acquired = await expectMessage(holder, (m) => m.type === 'acquired' || m.type === 'error', 30_000, 'acquired');
      assert.equal(acquired.type, 'acquired', JSON.stringify(acquired));
      const judge = startNode('judge', { staticDir, tag, ...timing }, { env: skewedEnv(lib, offsetS) });
      const ready = await expectMessage<Msg & { nowMs: number }>(judge, (m) => m.type === 'ready', 30_000, 'ready');
      assert.ok(Math.abs(ready.nowMs - Date.now() - offsetS * 1000) < 5_000, `the judge's clock is ${ready.nowMs - Date.now()} ms off`);

      type Judged = Msg & { state: LockState; heartbeatAgeMs?: number; naiveAgeMs?: number; skewMs: number };
      const ask = async (): Promise<Judged> => {
        const p = expectMessage<Judged>(judge, (m) => m.type === 'judged' || m.type === 'error', 30_000, 'judged');
        judge.send('judge');
        const r = await p;
        assert.equal(r.type, 'judged', JSON.stringify(r));
        return r;
      };
      const seen = await judgeFor(timing.staleMs + timing.refreshMs + 300, 200, ask);
      const last = seen[seen.length - 1];
      report(`judge measured a filesystem clock offset of ${last.skewMs} ms; naive ages ${Math.round(Math.min(...seen.map((s) => s.naiveAgeMs!)))}..${Math.round(Math.max(...seen.map((s) => s.naiveAgeMs!)))} ms`);
      assert.deepEqual([...new Set(seen.map((s) => s.state))], ['held'], JSON.stringify(seen.find((s) => s.state !== 'held')));
      assert.ok(Math.abs(last.skewMs + offsetS * 1000) <= 1_000, `measured offset ${last.skewMs} ms`);
      if (offsetS > 0) {
        // Without the correction this judge would have called the live lock stale every time.
        for (const s of seen) assert.ok(s.naiveAgeMs! > timing.staleMs, `naive age ${s.naiveAgeMs} ms`);
      } else {
        // Without it, every heartbeat would have looked as if from the future: see below.
        for (const s of seen) assert.ok(s.naiveAgeMs! < 0, `naive age ${s.naiveAgeMs} ms`);
      }

      const { stale, elapsed } = await killAndAwaitStale(this, holder, ask);
      report(`SIGKILL → stale for the skewed judge after ${Math.round(elapsed)} ms (bound ${staleBoundMs} ms); naive age then ${Math.round(stale.naiveAgeMs!)} ms`);
      assert.ok(elapsed <= staleBoundMs, `stale only after ${Math.round(elapsed)} ms`);
      // A judge behind the filesystem's clock, uncorrected, would call this dead lock held for another minute.
      if (offsetS < 0) assert.ok(stale.naiveAgeMs! < timing.staleMs, `naive age ${stale.naiveAgeMs} ms`);
      judge.send('exit');
    });
  }
});

// ---------------------------------------------------------------------------------------------

describe('a network filesystem shared by two clients (sshfs)', function () {
  this.timeout(180_000);
  let base = '';
  let exportDir = '';
  let mountA = '';
  let mountB = '';
  let share: SshfsExport | undefined;
  /** Mounts the export at `m` as another client, with `extra` sshfs options. */
  let mount: (m: string, extra?: string) => Promise<void> = async () => undefined;

  before(async function () {
    const why = await whyNoSshfs();
    if (why !== undefined) {
      console.log(`      skipped: sshfs suite ${why}`);
      this.skip();
    }
    share = await startSshfs();
    ({ base, exportDir, mountA, mountB, mount } = share);
  });

  after(async () => {
    await killAll();
    await share?.stop();
  });

  afterEach(async () => {
    await killAll();
    await Promise.all(heldLeases().map((l) => l.release().catch(() => undefined)));
  });

  it('excludes across the two mounts: 2 processes on each × 100 acquisitions of one tag never overlap', async () => {
    const PER_MOUNT = 2;
    const COUNT = 100;
    const tag = 'board/shared';
    fs.mkdirSync(path.join(exportDir, tag), { recursive: true });

    // Is O_EXCL honoured across the clients? Then the marker goes through the mounts, as the workers see the files.
    const probeA = path.join(mountA, 'excl.probe');
    fs.closeSync(fs.openSync(probeA, 'wx'));
    let exclusive: boolean;
    try {
      fs.closeSync(fs.openSync(path.join(mountB, 'excl.probe'), 'wx'));
      exclusive = false;
    } catch (err) {
      exclusive = (err as NodeJS.ErrnoException).code === 'EEXIST';
    }
    fs.unlinkSync(probeA);
    report(`O_EXCL across the two sshfs clients: ${exclusive ? 'honoured' : 'NOT honoured: marker on the exported directory'}`);

    const workers: ChildProcess[] = [];
    for (const [i, mount] of [mountA, mountB].flatMap((m) => Array.from({ length: PER_MOUNT }, () => m)).entries()) {
      const marker = path.join(exclusive ? mount : exportDir, 'critical.marker');
      workers.push(startNode('exclusion', { staticDir: mount, tag, id: i, count: COUNT, marker, holdMs: 2, ...timing }));
    }
    await Promise.all(workers.map((w) => expectMessage(w, (m) => m.type === 'ready', 30_000, 'ready')));
    type Done = Msg & { acquired: number; overlaps: number; foreign: number; lost: number; errors: string[]; ms: number };
    const done = workers.map((w) => expectMessage<Done>(w, (m) => m.type === 'done', 170_000, 'done'));
    const t0 = performance.now();
    for (const w of workers) w.send('go');
    const results = await Promise.all(done);
    const elapsed = performance.now() - t0;
    const total = results.reduce((n, r) => n + r.acquired, 0);
    report(`${total} acquisitions through two sshfs clients in ${Math.round(elapsed)} ms (${(elapsed / total).toFixed(1)} ms each)`);
    for (const r of results) {
      assert.deepEqual(r.errors, [], `worker ${String(r.id)}`);
      assert.equal(r.acquired, COUNT);
      assert.equal(r.overlaps, 0, `worker ${String(r.id)} met another process inside`);
      assert.equal(r.foreign, 0, `worker ${String(r.id)} found someone else's owner record on its lock`);
      assert.equal(r.lost, 0, `worker ${String(r.id)} lost a lock`);
    }
    assert.equal(fs.existsSync(path.join(exportDir, 'critical.marker')), false);
    // No lock, claim, probe or anything set aside is left.
    assert.deepEqual(fs.readdirSync(path.join(exportDir, tag)).filter((n) => n !== FENCE_FILE), []);
  });

  it('a share mounted as a folder of a local static directory: a listing never waits on it with the event loop held, even when its server stops answering', async () => {
    const local = path.join(base, 'local-static');
    const remote = path.join(local, 'remote');
    fs.mkdirSync(path.join(local, 'eve', 'R1'), { recursive: true });
    fs.writeFileSync(path.join(local, 'eve', 'R1', 'staged.timestamp'), '');
    fs.mkdirSync(remote);
    // No caches: every lookup below goes to the (stopped) server.
    await mount(remote, 'dir_cache=no,attr_timeout=0,entry_timeout=0,negative_timeout=0');
    const sshfsPid = fs
      .readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .find((d) => {
        try {
          const argv = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
          return argv[0]?.endsWith('sshfs') === true && argv.includes(remote);
        } catch {
          // A process that ended between the listing of /proc and this read.
          return false;
        }
      });
    assert.ok(sshfsPid !== undefined, 'the sshfs process of the share');
    // A listing in another process, which says every 50 ms that its event loop turns.
    const script = `
      const { list } = require(${JSON.stringify(path.join(__dirname, '..', '..', '..', 'src', 'core', 'lock', 'inspect.js'))});
      setInterval(() => process.stdout.write('beat\\n'), 50);
      list(process.argv[1]).then((r) => { process.stdout.write('listed ' + r.map((e) => e.tag).join(',') + '\\n'); process.exit(0); }, (e) => { process.stdout.write('error ' + e.code + '\\n'); process.exit(1); });`;
    let out = '';
    try {
      process.kill(Number(sshfsPid), 'SIGSTOP');
      try {
        const child = spawn(process.execPath, ['-e', script, local], { stdio: ['ignore', 'pipe', 'pipe'] });
        child.stdout.on('data', (d: Buffer) => (out += d.toString()));
        track(child);
        await sleep(1_500);
        const beats = out.split('\n').filter((l) => l === 'beat').length;
        await sleep(1_000);
        const later = out.split('\n').filter((l) => l === 'beat').length;
        assert.ok(!out.includes('listed'), `the listing waited for the stopped server: ${out}`);
        // About 20 beats a second while the event loop is free; none while a synchronous lstat waits.
        assert.ok(later - beats >= 5, `${later - beats} beats in the second while the share did not answer`);
      } finally {
        process.kill(Number(sshfsPid), 'SIGCONT');
      }
      await waitFor(() => (out.includes('listed') || out.includes('error') ? true : undefined), 30_000, 'the listing once the server answers');
      assert.match(out, /listed eve,remote/);
    } finally {
      await killAll();
      await unmountFuse(remote);
    }
  });

  /** How long after a lock is taken through mount B a LockStates following `seenFrom` shows it held, each round. */
  async function pollDelays(seenFrom: string, prefix: string, rounds: number): Promise<number[]> {
    const states = new LockStates({ staleMs: 10_000, refreshMs: 2_500 }, { warn: () => undefined });
    const took: number[] = [];
    try {
      for (let i = 0; i < rounds; i++) {
        fs.mkdirSync(path.join(mountB, prefix, `R${i}`), { recursive: true });
        fs.writeFileSync(path.join(mountB, prefix, `R${i}`, 'staged.timestamp'), '');
      }
      states.scan([seenFrom]);
      await states.settled();
      await waitFor(() => (states.polling.intervalMs > 0 ? true : undefined), 5_000, 'polling to start on sshfs');
      for (let i = 0; i < rounds; i++) {
        const tag = `${prefix}/R${i}`;
        await waitFor(() => (states.record(seenFrom, tag) !== undefined ? true : undefined), 30_000, `${tag} known through ${seenFrom}`);
        // A third of the rounds after a quiet while, the rest right after the previous change.
        if (i % 3 === 2) await sleep(POLL_IDLE_MS + 200);
        const lease = await acquire(mountB, tag, { createOnce: false });
        const t = performance.now();
        await waitFor(() => (states.entry(seenFrom, tag)?.state === 'held' ? true : undefined), 30_000, `${tag} held as seen through ${seenFrom}`, 10);
        took.push(performance.now() - t);
        await lease.release();
      }
    } finally {
      states.dispose();
    }
    return took;
  }

  it('follows locks taken through the other mount by polling, as the view and watch do there', async () => {
    const p95 = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.ceil(0.95 * xs.length) - 1];
    // sshfs as mounted by default: its own directory cache and FUSE's one-second name and
    // attribute caches come on top of the polling interval.
    const plain = await pollDelays(mountA, 'poll-default', 12);
    report(`default sshfs mount: a lock taken through mount B seen after ${plain.map((t) => Math.round(t)).join(', ')} ms (p95 ${Math.round(p95(plain))} ms; polling ${POLL_FAST_MS}/${POLL_IDLE_MS} ms)`);
    // Mounted as the README advises for a static directory: no caches.
    const tuned = path.join(base, 'clientC');
    fs.mkdirSync(tuned, { recursive: true });
    await mount(tuned, 'dir_cache=no,attr_timeout=0,entry_timeout=0');
    let fast: number[];
    try {
      fast = await pollDelays(tuned, 'poll-tuned', 12);
    } finally {
      await unmountFuse(tuned);
    }
    report(`sshfs -o dir_cache=no,attr_timeout=0,entry_timeout=0: seen after ${fast.map((t) => Math.round(t)).join(', ')} ms (p95 ${Math.round(p95(fast))} ms)`);
    // Bounds for being seen at all within a few polls; the figures above are what counts.
    assert.ok(p95(fast) < 2 * POLL_IDLE_MS + 1_000, `p95 ${Math.round(p95(fast))} ms`);
    assert.ok(p95(plain) < 2 * POLL_IDLE_MS + 3_000, `p95 ${Math.round(p95(plain))} ms`);
  });

  it('releases cleanly while the owner record is open on the same client (FUSE hides it as .fuse_hidden…)', async () => {
    const tag = 'board/reader';
    const lease = await acquire(mountB, tag, { ...timing, createOnce: false });
    // A reader on client B, as a tree view judging the lock would be, still has the record open.
    const fd = fs.openSync(path.join(mountB, tag, LOCK_NAME, OWNER_FILE), 'r');
    const closed = sleep(150).then(() => fs.closeSync(fd));
    try {
      await lease.release();
    } finally {
      await closed;
    }
    await waitFor(() => (fs.readdirSync(path.join(exportDir, tag)).filter((n) => n !== FENCE_FILE).length === 0 ? true : undefined), 2_000, 'the area to be empty');
    const again = await acquire(mountA, tag, { ...timing, createOnce: false });
    await again.release();
  });

  it('history through the two clients: 2 processes on each (mount B as another host) × 300 records of one tag, no line lost or torn', async () => {
    const COUNT = 300;
    const tag = 'board/history';
    const actors = [mountA, mountA, mountB, mountB].map((m, i) => startNode('history-actor', { staticDir: m }, { otherHost: i >= 2 }));
    await Promise.all(actors.map((w) => expectMessage(w, (m) => m.type === 'ready', 30_000, 'ready')));
    const done = actors.map((w) => expectMessage<Msg & { ok: boolean; message?: string }>(w, (m) => m.type === 'done', 120_000, 'done'));
    for (const w of actors) w.send({ id: 1, op: 'append', tag, count: COUNT, pad: 100, gated: true });
    const t0 = performance.now();
    for (const w of actors) w.send({ op: 'go' });
    for (const r of await Promise.all(done)) assert.ok(r.ok, r.message);
    const elapsed = performance.now() - t0;
    // Read on the server: one segment per host, every line whole, each process's records all there and in order.
    const dir = path.join(exportDir, META_DIR, HISTORY_DIR, ...historyDirOf(tag));
    const segments = fs.readdirSync(dir).sort();
    assert.deepEqual(segments, [historySegmentName('otherhost', 0), historySegmentName(historyHostName(os.hostname()), 0)].sort());
    const seqs = new Map<string, number[]>();
    for (const name of segments) {
      const text = fs.readFileSync(path.join(dir, name), 'utf8');
      assert.ok(text.endsWith('\n'), `${name} ends inside a line`);
      for (const l of text.slice(0, -1).split('\n')) {
        const e = JSON.parse(l) as { fence: number; holder: { clientId: string } };
        seqs.set(e.holder.clientId, [...(seqs.get(e.holder.clientId) ?? []), e.fence]);
      }
    }
    assert.equal(seqs.size, actors.length);
    for (const [who, s] of seqs) assert.deepEqual(s, Array.from({ length: COUNT }, (_, i) => i), `${who}: records lost or out of order`);
    // Through a client, the other host's segment shows once its cached listing of the tag's
    // directory expires (sshfs keeps one for 20 s by default; see the README on mount options).
    await waitFor(async () => ((await history(mountB, { tag })).length === actors.length * COUNT ? true : undefined), 30_000, 'every record read through mount B', 500);
    report(`${actors.length * COUNT} records through two sshfs clients in ${Math.round(elapsed)} ms, in ${segments.join(' and ')}: every line whole`);
  });

  it('a holder through mount A is seen as held through mount B for 3× the stale threshold', async () => {
    const tag = 'board/held';
    const holder = startNode('holder', { staticDir: mountA, tag, ...timing, createOnce: false }, { otherHost: true });
    const acquired = await expectMessage(holder, (m) => m.type === 'acquired' || m.type === 'error', 30_000, 'acquired');
    assert.equal(acquired.type, 'acquired', JSON.stringify(acquired));
    let lost: Msg | undefined;
    holder.on('message', (m: Msg) => {
      if (m.type === 'lost') lost = m;
    });

    const judgements: { state: LockState; ageMs: number; ms: number }[] = [];
    const attempts: string[] = [];
    const end = performance.now() + 3 * timing.staleMs + 500;
    let nextAttempt = 0;
    while (performance.now() < end) {
      const t = performance.now();
      const info = await inspect(mountB, tag, timing);
      judgements.push({ state: info.state, ageMs: info.heartbeatAgeMs ?? NaN, ms: performance.now() - t });
      if (performance.now() >= nextAttempt) {
        // A contender through mount B must be refused, never handed a live lock.
        nextAttempt = performance.now() + 1_000;
        const outcome = await acquire(mountB, tag, { ...timing, createOnce: false }).then(
          async (lease) => {
            await lease.release();
            return 'ACQUIRED';
          },
          (err: { code?: string }) => String(err.code),
        );
        attempts.push(outcome);
      }
      await sleep(200);
    }
    const states = judgements.map((j) => j.state);
    const maxAge = Math.max(...judgements.map((j) => j.ageMs));
    const slow = judgements.filter((j) => j.ms > 500).length;
    report(
      `${judgements.length} judgements through B: ${JSON.stringify(Object.fromEntries([...new Set(states)].map((s) => [s, states.filter((x) => x === s).length])))}; ` +
        `heartbeat age seen up to ${Math.round(maxAge)} ms; ${slow} took > 500 ms (looked again past the client's caches); acquire attempts ${JSON.stringify(attempts)}`,
    );
    assert.deepEqual([...new Set(states)], ['held'], `through mount B: ${JSON.stringify(judgements.filter((j) => j.state !== 'held'))}`);
    assert.deepEqual([...new Set(attempts)], ['ELOCKED']);
    assert.equal(lost, undefined, `the holder lost its lock: ${JSON.stringify(lost)}`);
    const viaList = (await list(mountB, 'board', timing)).find((e) => e.tag === tag);
    assert.equal(viaList?.state, 'held');

    const released = expectMessage(holder, (m) => m.type === 'released', 30_000, 'released');
    holder.send('release');
    await released;
  });

  it('once that holder dies on another host, a contender through mount B takes the lock after the stale threshold', async () => {
    const tag = 'board/killed';
    const lockOnServer = path.join(exportDir, tag, LOCK_NAME);
    const holder = startNode('holder', { staticDir: mountA, tag, ...timing, createOnce: false }, { otherHost: true });
    const acquired = await expectMessage(holder, (m) => m.type === 'acquired' || m.type === 'error', 30_000, 'acquired');
    assert.equal(acquired.type, 'acquired', JSON.stringify(acquired));
    // Kill right after a heartbeat, read on the server, so the lock's age counts from a known moment.
    const first = fs.statSync(lockOnServer).mtimeMs;
    await waitFor(() => (fs.statSync(lockOnServer).mtimeMs !== first ? true : undefined), 5_000, 'a heartbeat');
    // Let B's client cache the held lock, as a judge there would have.
    assert.equal((await inspect(mountB, tag, timing)).state, 'held');

    const t0 = performance.now();
    holder.kill('SIGKILL');
    await exitOf(holder);
    // Its last heartbeat, as the server keeps it (what every judge reads through its client), read
    // once the holder is gone. (One still on its way to the server would only make the threshold
    // count from later.)
    const lastHeartbeat = fs.statSync(lockOnServer).mtimeMs;
    // The lock turns stale `staleMs` after the last heartbeat; sshfs stamps whole seconds and
    // heartbeats are rounded up to the next one, adding up to 1 s. Then: the client's caches (the
    // core waits 1.1 s for FUSE's 1 s attribute cache before it believes a lock stale), and a
    // waiter's sleep between attempts (1 s backoff cap × 1.5 jitter).
    const boundMs = timing.staleMs + 1_000 + 1_100 + 1_500 + 1_000; // the last 1 s: timers late on a busy machine
    const lease = await acquire(mountB, tag, { ...timing, createOnce: false, waitMs: 30_000 });
    const elapsed = performance.now() - t0;
    // When it was taken, by the clock the judge on B used: the new holder's record, made after the
    // takeover (the filesystem's time; the two clients and the server share one clock here).
    const takenAt = Date.parse(lease.holder.acquiredAt);
    report(`SIGKILL → taken through mount B after ${Math.round(elapsed)} ms (bound ${boundMs} ms); ${Math.round(takenAt - lastHeartbeat)} ms after the last heartbeat's mtime on the server`);
    assert.ok(elapsed <= boundMs, `took ${Math.round(elapsed)} ms`);
    // Never before the threshold, counted from the last heartbeat as the server keeps it (rounded up to a whole second by sshfs).
    assert.ok(takenAt - lastHeartbeat > timing.staleMs, `taken ${Math.round(takenAt - lastHeartbeat)} ms after the last heartbeat, before the ${timing.staleMs} ms threshold`);
    assert.equal(readToken(lockOnServer), lease.holder.token);
    assert.equal((await inspect(mountA, tag, timing)).holder?.token, lease.holder.token);
    await lease.release();
    assert.deepEqual(fs.readdirSync(path.join(exportDir, tag)).filter((n) => n !== FENCE_FILE), []);
  });

  it('waiters through the two mounts enter in the order they came, within a poll of each release', async () => {
    const ROUNDS = 5;
    const tag = 'board/line';
    fs.mkdirSync(path.join(exportDir, tag), { recursive: true });
    // Two waiters on each client, alternating; each starts once the one before it has its ticket.
    const mounts = [mountA, mountB, mountA, mountB];
    const waiters = mounts.map((staticDir, id) => startNode('waiter', { staticDir, id, ...timing }));
    await Promise.all(waiters.map((w) => expectMessage(w, (m) => m.type === 'ready', 30_000, 'ready')));
    const handoffs: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // Numbered by the server's kernel: the order files are made on the exported directory itself.
      const orderDir = path.join(exportDir, `order-${round}`);
      fs.mkdirSync(orderDir);
      const holder = await acquire(round % 2 === 0 ? mountA : mountB, tag, { ...timing, createOnce: false });
      const entered: Promise<Msg>[] = [];
      for (const [i, w] of waiters.entries()) {
        const placed = expectMessage(w, (m) => m.type === 'position' && m.round === round, 30_000, 'a place in line');
        entered.push(expectMessage(w, (m) => m.type === 'entered' && m.round === round, 60_000, 'its turn'));
        w.send({ type: 'wait', round, tag, waitMs: 60_000, orderDir, marker: path.join(exportDir, 'inside.marker') });
        // Each sees the tickets taken through the other client at once (past the client's cached listing).
        assert.equal((await placed).position, i + 1, `round ${round}: waiter ${i}'s place`);
      }
      const releasedAt = performance.timeOrigin + performance.now();
      await holder.release();
      const times = (await Promise.all(entered)).map((m) => m.atMs as number);
      const order = fs.readdirSync(orderDir).map(Number).sort((a, b) => a - b).map((k) => Number(fs.readFileSync(path.join(orderDir, String(k)), 'utf8')));
      assert.deepEqual(order, [0, 1, 2, 3], `round ${round}: entered ${order.join(' ')}`);
      for (const [i, t] of [releasedAt, ...times].slice(0, -1).entries()) handoffs.push(times[i] - t);
      await Promise.all(waiters.map((w) => expectMessage(w, (m) => m.type === 'released' && m.round === round, 30_000, 'released')));
    }
    handoffs.sort((a, b) => a - b);
    report(`${ROUNDS} rounds of 4 waiters through two sshfs clients, all in order; handoffs median ${Math.round(handoffs[Math.floor(handoffs.length / 2)])} ms, max ${Math.round(handoffs.at(-1)!)} ms`);
    assert.deepEqual(fs.readdirSync(path.join(exportDir, META_DIR, 'queue')), [], 'the last to leave removes the line');
  });
});

// ---------------------------------------------------------------------------------------------

describe('a full disk (tmpfs)', function () {
  this.timeout(60_000);
  let base = '';
  const mounts: string[] = [];

  before(async function () {
    if (!isRoot) {
      console.log('      skipped: mounting a small tmpfs needs root');
      this.skip();
    }
    base = tempDir('dss-full-');
  });

  after(async () => {
    for (const m of mounts) if (isMounted(m)) await works('umount', [m]);
    if (base !== '' && mounts.every((m) => !isMounted(m))) cleanup(base);
  });

  afterEach(async () => {
    await Promise.all(heldLeases().map((l) => l.release().catch(() => undefined)));
  });

  async function smallDisk(name: string, options: string): Promise<string> {
    const dir = path.join(base, name);
    fs.mkdirSync(dir);
    const r = await run('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', dir]);
    assert.equal(r.code, 0, `mount: ${r.stderr}`);
    mounts.push(dir);
    return dir;
  }

  /** Everything below the static directory except our bookkeeping, which must hold no leftovers. */
  function areas(staticDir: string): Map<string, string> {
    const all = snapshot(staticDir);
    const meta = path.join(staticDir, META_DIR);
    for (const p of [...all.keys()]) if (p === meta || p.startsWith(`${meta}/`)) all.delete(p);
    // The history of what was tried stays (it is bounded); nothing else may.
    if (fs.existsSync(meta)) assert.deepEqual(fs.readdirSync(meta).filter((n) => n !== HISTORY_DIR), [], 'a clock probe or other file left in the bookkeeping directory');
    return all;
  }

  async function failsCleanly(kind: string, fill: (disk: string) => void, disk: string): Promise<void> {
    const staticDir = path.join(disk, 'static');
    const existing = path.join(staticDir, 'board', 'existing');
    fs.mkdirSync(existing, { recursive: true });
    fs.writeFileSync(path.join(existing, 'image.bin'), Buffer.alloc(4096, 7));
    fill(disk);
    const before = areas(staticDir);

    const fresh = path.join(staticDir, 'board', 'fresh');
    const err1 = await acquire(staticDir, 'board/fresh', { ...timing, createOnce: true }).then(
      () => assert.fail('acquired on a full disk'),
      (e: unknown) => e as { code?: string; message: string; path?: string; cause?: { code?: string } },
    );
    report(`${kind}, new area: ${err1.code} (${err1.cause?.code}): ${err1.message}`);
    assert.equal(err1.code, 'EIO');
    assert.equal(err1.cause?.code, 'ENOSPC');
    assert.ok(err1.path !== undefined && err1.path.startsWith(fresh), `path ${err1.path}`);
    assert.ok(err1.message.includes(err1.path) && /full/.test(err1.message), err1.message);
    assert.equal(fs.existsSync(fresh), false, 'the new area was left behind');
    assert.deepEqual(areas(staticDir), before);

    const err2 = await acquire(staticDir, 'board/existing', { ...timing, createOnce: false }).then(
      () => assert.fail('acquired on a full disk'),
      (e: unknown) => e as { code?: string; message: string; path?: string; cause?: { code?: string } },
    );
    report(`${kind}, existing area: ${err2.code} (${err2.cause?.code}): ${err2.message}`);
    assert.equal(err2.code, 'EIO');
    assert.equal(err2.cause?.code, 'ENOSPC');
    assert.equal(err2.path, path.join(existing, LOCK_NAME));
    assert.ok(err2.message.includes(err2.path) && /full/.test(err2.message), err2.message);
    assert.deepEqual(areas(staticDir), before, 'the existing area changed');

    // Nothing left blocks anyone once there is room again.
    fs.rmSync(path.join(disk, 'filler'), { recursive: true, force: true });
    for (const [tag, createOnce] of [
      ['board/fresh', true],
      ['board/existing', false],
    ] as const) {
      const lease = await acquire(staticDir, tag, { ...timing, createOnce });
      await lease.release();
    }
  }

  it('out of space: acquire fails with ENOSPC naming the path, and leaves nothing behind', async () => {
    const disk = await smallDisk('blocks', 'size=1m');
    await failsCleanly(
      'no space',
      (d) => {
        const fd = fs.openSync(path.join(d, 'filler'), 'w');
        try {
          for (const chunk of [65_536, 1]) {
            const buf = Buffer.alloc(chunk, 1);
            try {
              for (;;) fs.writeSync(fd, buf);
            } catch (err) {
              if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
            }
          }
        } finally {
          fs.closeSync(fd);
        }
      },
      disk,
    );
  });

  it('out of inodes: acquire fails with ENOSPC naming the path, and leaves nothing behind', async () => {
    const disk = await smallDisk('inodes', 'size=10m,nr_inodes=64');
    await failsCleanly(
      'no inodes',
      (d) => {
        const dir = path.join(d, 'filler');
        fs.mkdirSync(dir);
        try {
          for (let i = 0; ; i++) fs.closeSync(fs.openSync(path.join(dir, String(i)), 'wx'));
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
        }
      },
      disk,
    );
  });
});
