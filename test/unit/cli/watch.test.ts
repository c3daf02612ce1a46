/**
 * `devserver-stage watch --json` against a scripted sequence of changes made by other processes,
 * and the polling of a static directory on a network filesystem (sshfs): a lock taken through
 * another mount shows within the polling interval.
 */
import { strict as assert } from 'assert';
import { spawn, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { LockStates, POLL_IDLE_MS } from '../../../src/core/watch/states';
import { inThreadWatcher, type WatcherFactory } from '../../../src/core/watch/watcher';
import { acquire } from '../../../src/core/lock/lock';
import type { Lease } from '../../../src/core/lock/lease';
import { CLI, cleanup, cli, exitOf, stagedBuilds, tempDir, track, waitFor } from '../../helpers';

interface Line {
  event: string;
  tag: string;
  state?: string;
  holder?: string;
  token?: number;
}

/** Starts `watch --json`, collecting its lines. */
function watch(staticDir: string, args: string[] = []): { child: ChildProcess; lines: Line[] } {
  const child = track(spawn(process.execPath, [CLI, '--static-dir', staticDir, '--json', 'watch', ...args], { stdio: ['ignore', 'pipe', 'pipe'] }));
  const lines: Line[] = [];
  let rest = '';
  child.stdout!.on('data', (d: Buffer) => {
    rest += d.toString();
    const parts = rest.split('\n');
    rest = parts.pop()!;
    for (const p of parts) if (p.trim() !== '') lines.push(JSON.parse(p) as Line);
  });
  return { child, lines };
}

/** The model of `staticDir`, its watches made by `watcher`, once its scan and what `taking` does have ended. */
async function scannedWith(staticDir: string, watcher: WatcherFactory, taking: () => Promise<void> | undefined): Promise<LockStates> {
  const states = new LockStates({ staleMs: 600_000, refreshMs: 300_000 }, { warn: () => undefined }, { watcher });
  try {
    states.scan([staticDir]);
    await states.settled();
    await taking();
    return states;
  } catch (err) {
    states.dispose();
    throw err;
  }
}

const seen = (lines: readonly Line[], tag: string): string[] => lines.filter((l) => l.tag === tag).map((l) => (l.event === 'gone' ? 'gone' : `${l.event}:${l.state}`));

describe('devserver-stage watch', function () {
  let staticDir: string;
  let source: string;
  beforeEach(() => {
    staticDir = tempDir('dss-watch-');
    source = tempDir('dss-watch-src-');
    fs.writeFileSync(path.join(source, 'a.bin'), 'a');
    fs.mkdirSync(path.join(staticDir, 'eve/R1'), { recursive: true });
    fs.writeFileSync(path.join(staticDir, 'eve/R1/staged.timestamp'), '');
  });
  afterEach(() => {
    cleanup(staticDir);
    cleanup(source);
  });

  it('prints what is there, then each lock taken, released, staged and destroyed by other processes, in order', async () => {
    const { child, lines } = watch(staticDir);
    await waitFor(() => (lines.length >= 1 ? true : undefined), 10_000, 'the snapshot');
    assert.deepEqual(lines[0], { ...lines[0], event: 'snapshot', tag: 'eve/R1', state: 'free' });
    // Held by a command under the lock until the marker file goes.
    const go = path.join(staticDir, 'go');
    fs.writeFileSync(go, '');
    const holder = cli(staticDir, ['lock', 'eve/R1', '--', process.execPath, '-e', `const fs=require('fs');const t=setInterval(()=>{if(!fs.existsSync(${JSON.stringify(go)}))clearInterval(t)},20)`]);
    await waitFor(() => (seen(lines, 'eve/R1').includes('change:held') ? true : undefined), 5_000, 'held');
    const held = lines.find((l) => l.tag === 'eve/R1' && l.state === 'held')!;
    assert.match(held.holder ?? '', /^\S+@\S+$/);
    assert.equal(typeof held.token, 'number');
    fs.rmSync(go);
    assert.equal((await holder).code, 0);
    await waitFor(() => (seen(lines, 'eve/R1').at(-1) === 'change:free' ? true : undefined), 5_000, 'free again');
    assert.equal((await cli(staticDir, ['stage', 'eve/R2', source])).code, 0);
    await waitFor(() => (seen(lines, 'eve/R2').at(-1) === 'change:free' ? true : undefined), 5_000, 'R2 staged');
    assert.equal((await cli(staticDir, ['destroy', 'eve/R1'])).code, 0);
    await waitFor(() => (seen(lines, 'eve/R1').at(-1) === 'gone' ? true : undefined), 5_000, 'R1 gone');
    // destroy takes the lock before it removes the build: on a busy machine the lock can be seen
    // held for a moment, which is true, before the build goes.
    const r1 = seen(lines, 'eve/R1');
    assert.deepEqual(r1.filter((e, i) => !(e === 'change:held' && r1[i + 1] === 'gone')), ['snapshot:free', 'change:held', 'change:free', 'gone']);
    // R2 was staged under its lock: it may show held first, and ends free.
    assert.equal(seen(lines, 'eve/R2').at(-1), 'change:free');
    child.kill('SIGINT');
    assert.equal((await exitOf(child)).code, 130);
  });

  it("sees a reservation (no heartbeat to tell of it later) made after a build was judged but before its folder's first listing ended", async function () {
    this.timeout(60_000);
    for (const t of ['eve/R2', 'eve/R3']) {
      fs.mkdirSync(path.join(staticDir, t));
      fs.writeFileSync(path.join(staticDir, t, 'staged.timestamp'), '');
    }
    // Stopped at the end of its second listing (the static directory's, then eve's): every build
    // of eve judged, none recorded yet.
    const child = track(
      spawn(process.execPath, [CLI, '--static-dir', staticDir, '--json', 'watch'], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, DEVSERVER_STAGING_PAUSE_AT: 'list.judged#2' } }),
    );
    const lines: Line[] = [];
    child.stdout!.on('data', (d: Buffer) => {
      for (const p of d.toString().split('\n')) if (p.trim() !== '') lines.push(JSON.parse(p) as Line);
    });
    const stateOf = (): string | undefined => {
      try {
        return fs.readFileSync(`/proc/${child.pid}/stat`, 'utf8').replace(/^.*\) /s, '')[0];
      } catch {
        return undefined;
      }
    };
    await waitFor(() => (stateOf() === 'T' ? true : undefined), 20_000, 'watch stopped at the end of the folder listing');
    assert.equal(lines.length, 0, 'nothing printed before the listing ended');
    const reserved = await cli(staticDir, ['reserve', 'eve/R3', '--for', '1h']);
    assert.equal(reserved.code, 0, reserved.stderr);
    process.kill(child.pid!, 'SIGCONT');
    await waitFor(() => (seen(lines, 'eve/R3').some((s) => s.endsWith(':held')) ? true : undefined), 15_000, `eve/R3 shown held (seen: ${seen(lines, 'eve/R3').join(', ')})`);
    child.kill('SIGTERM');
    await exitOf(child);
  });

  it('follows only SUBPATH, and names a SUBPATH that is not there', async () => {
    fs.mkdirSync(path.join(staticDir, 'kevin/R1'), { recursive: true });
    fs.writeFileSync(path.join(staticDir, 'kevin/R1/staged.timestamp'), '');
    const { child, lines } = watch(staticDir, ['kevin']);
    await waitFor(() => (lines.length >= 1 ? true : undefined), 10_000, 'the snapshot');
    assert.deepEqual(lines.map((l) => l.tag), ['kevin/R1']);
    child.kill('SIGTERM');
    assert.equal((await exitOf(child)).code, 143);
    const missing = await cli(staticDir, ['--json', 'watch', 'nope']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /"code":"ENOENT".*no folder or build nope/);
  });

  it('stopped the moment its snapshot is read, it still ends as signalled (exit 143), 30 times in a row', async function () {
    this.timeout(60_000);
    fs.mkdirSync(path.join(staticDir, 'kevin/R1'), { recursive: true });
    fs.writeFileSync(path.join(staticDir, 'kevin/R1/staged.timestamp'), '');
    const ends: string[] = [];
    for (let i = 0; i < 30; i++) {
      const child = track(spawn(process.execPath, [CLI, '--static-dir', staticDir, '--json', 'watch', 'kevin'], { stdio: ['ignore', 'pipe', 'pipe'] }));
      // A script that stops it as soon as it has the snapshot: no pause between the two.
      await new Promise((resolve) => child.stdout!.once('data', resolve));
      child.kill('SIGTERM');
      const { code, signal } = await exitOf(child);
      ends.push(code !== null ? String(code) : `killed by ${signal}`);
    }
    // (Before its handlers were in place ahead of the snapshot, about half ended killed by SIGTERM.)
    assert.deepEqual(ends.filter((e) => e !== '143'), []);
  });

  it("shows a lock taken on a build after its judgement, while the rest of its folder's first listing is still being judged", async function () {
    this.timeout(120_000);
    // Enough builds that judging the rest takes longer than the events' settle time.
    const builds = 8_000;
    stagedBuilds(path.join(staticDir, 'big'), builds);
    // The first in the directory's own order (readdir's is sorted) is judged first.
    const dir = fs.opendirSync(path.join(staticDir, 'big'));
    const first = `big/${dir.readSync()!.name}`;
    dir.closeSync();
    let buildsWatched = false;
    let lease: Lease | undefined;
    let taking: Promise<void> | undefined;
    // The watches in this thread; the lock taken the moment the big folder's builds are watched,
    // on the turn after the first slice of their judgement.
    const watcher: WatcherFactory = (onEvent, onError) => {
      const w = inThreadWatcher(onEvent, onError);
      const watch = w.watch.bind(w);
      w.watch = (dir, data) => {
        if (dir.startsWith(path.join(staticDir, 'big') + path.sep)) buildsWatched = true;
        return watch(dir, data);
      };
      const ready = w.ready.bind(w);
      w.ready = async () => {
        await ready();
        if (buildsWatched && taking === undefined)
          taking = (async () => {
            // A few turns of the loop: the judgement gives the loop back between slices.
            for (let i = 0; i < 4; i++) await new Promise((r) => setImmediate(r));
            lease = await acquire(staticDir, first, { createOnce: false, staleMs: 600_000, refreshMs: 300_000 });
          })();
      };
      return w;
    };
    let states: LockStates | undefined;
    try {
      states = await scannedWith(staticDir, watcher, () => taking);
      const model = states;
      assert.ok(lease !== undefined, 'the lock was taken during the listing');
      assert.equal(model.record(staticDir, 'big')?.children?.length, builds, 'the folder was listed whole');
      // No heartbeat comes within the wait: only the event of the lock taken can tell.
      await waitFor(() => (model.entry(staticDir, first)?.state === 'held' ? true : undefined), 5_000, `${first} shown held`);
      // Judged free by the listing, then judged again on the lock's event: not judged held by the listing itself.
      assert.ok(states.work.inspections > 0, 'the lock was taken after the listing judged the build');
    } finally {
      await lease?.release();
      states?.dispose();
    }
  });

  it("judges no build of a folder's first listing before its watch is in place, where watches are made in another thread", async function () {
    this.timeout(60_000);
    stagedBuilds(path.join(staticDir, 'big'), 1_000);
    const big = path.join(staticDir, 'big') + path.sep;
    // Watches as another thread makes them: asked for now, in place only when ready() resolves.
    // The lock is taken on a build of the folder while its watch is not made yet: a build judged
    // before ready() resolved would be judged free, and no event would tell.
    let target: string | undefined;
    let lease: Lease | undefined;
    let taking: Promise<void> | undefined;
    let takenUnwatched = false;
    const watcher: WatcherFactory = (onEvent, onError) => {
      const w = inThreadWatcher(onEvent, onError);
      const watch = w.watch.bind(w);
      let asked: [string, Parameters<typeof watch>[1]][] = [];
      const made = new Set<string>();
      w.watch = (dir, data) => {
        if (!dir.startsWith(big) || made.has(dir)) return watch(dir, data);
        asked.push([dir, data]);
        return true;
      };
      const ready = w.ready.bind(w);
      w.ready = async () => {
        const batch = asked;
        asked = [];
        if (batch.length > 0 && taking === undefined) {
          target = path.relative(staticDir, batch[batch.length - 1][0]);
          taking = (async () => {
            // A few turns of the loop first: time for a judgement that does not wait to happen.
            for (let i = 0; i < 4; i++) await new Promise((r) => setImmediate(r));
            lease = await acquire(staticDir, target, { createOnce: false, staleMs: 600_000, refreshMs: 300_000 });
            takenUnwatched = !made.has(batch[batch.length - 1][0]);
          })();
          await taking;
        }
        for (const [dir, data] of batch) {
          made.add(dir);
          watch(dir, data);
        }
        await ready();
      };
      return w;
    };
    let states: LockStates | undefined;
    try {
      states = await scannedWith(staticDir, watcher, () => taking);
      assert.ok(lease !== undefined && target !== undefined, 'the lock was taken during the listing');
      assert.ok(takenUnwatched, 'the lock was taken before its build was watched');
      assert.equal(states.record(staticDir, 'big')?.children?.length, 1_000, 'the folder was listed whole');
      // No heartbeat comes, and no event: only the listing's own judgement can have seen the lock.
      assert.equal(states.entry(staticDir, target)?.state, 'held', `${target} judged held by the listing`);
      assert.equal(states.work.inspections, 0, 'judged by the listing, not again on an event');
    } finally {
      await lease?.release();
      states?.dispose();
    }
  });

  it('polls a static directory only where the filesystem sends no events, and only while someone looks', async () => {
    const states = new LockStates({ staleMs: 10_000, refreshMs: 2_500 }, { warn: () => undefined });
    try {
      states.scan([staticDir]);
      await states.settled();
      await new Promise((r) => setTimeout(r, 50));
      // A local filesystem: inotify tells, nothing to poll.
      assert.deepEqual(states.polling, { roots: [], intervalMs: 0 });
      states.setPolling(3_000);
      assert.deepEqual(states.polling, { roots: [staticDir], intervalMs: 3_000 });
      states.setPolling(0);
      states.setVisible(false);
      assert.equal(states.polling.intervalMs, 0);
    } finally {
      states.dispose();
    }
    assert.ok(POLL_IDLE_MS <= 1_500, 'idle polling keeps a change within two seconds');
  });
});
