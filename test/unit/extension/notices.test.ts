/**
 * The notices the extension gives, as plain data (model/notices.ts): which changes of a lock make
 * which notice, the warning ten minutes before a reservation's end counted from the filesystem's
 * time left, once per end (again after an extension), the wish to hear of a free build, every
 * notice once, the timers cleared on dispose; and, on a real static directory, a reservation of
 * this user force-released by another process told with who did it.
 */
import { strict as assert } from 'assert';
import { explainLoss, inspect, type LockInfo, type LostLease } from '../../../src/core';
import { Notices, WARN_BEFORE_MS, type Notice, type Timers } from '../../../src/extension/model/notices';
import { cleanup, cli, run, CLI, tempDir } from '../../helpers';
import * as fs from 'fs';
import * as path from 'path';

/** Timers that run only when the test moves the clock. */
class FakeTimers implements Timers {
  t = 1_000_000;
  private next = 0;
  readonly pending = new Map<number, { at: number; fn: () => void }>();
  now(): number {
    return this.t;
  }
  set(fn: () => void, ms: number): unknown {
    const id = ++this.next;
    this.pending.set(id, { at: this.t + ms, fn });
    return id;
  }
  clear(h: unknown): void {
    this.pending.delete(h as number);
  }
  advance(ms: number): void {
    const until = this.t + ms;
    for (;;) {
      const due = [...this.pending.entries()].filter(([, p]) => p.at <= until).sort((a, b) => a[1].at - b[1].at)[0];
      if (due === undefined) break;
      this.pending.delete(due[0]);
      this.t = due[1].at;
      due[1].fn();
    }
    this.t = until;
  }
}

const ref = { staticDir: '/srv/static', tag: 'eve/R1' };
const MIN = 60_000;

function lock(over: { state?: LockInfo['state']; token?: string; fence?: number; until?: string; leftMs?: number; mine?: boolean } = {}): LockInfo {
  const reserved = over.until !== undefined;
  return {
    ...ref,
    dir: `${ref.staticDir}/${ref.tag}`,
    lockPath: `${ref.staticDir}/${ref.tag}/devserver.lock`,
    exists: true,
    state: over.state ?? 'held',
    holder: { pid: 42, hostname: 'vm', user: 'alice', clientId: 'vm:42', acquiredAt: '2026-01-01T00:00:00Z', token: over.token ?? 't1', fence: over.fence ?? 7, staleMs: 10_000, refreshMs: 2_500 },
    ...(reserved ? { reservation: { until: over.until!, ended: (over.leftMs ?? 0) <= 0, leftMs: Math.max(0, over.leftMs ?? 0), ownerUid: 1000, mine: over.mine ?? true } } : {}),
  };
}

function setup(): { timers: FakeTimers; notices: Notices; said: Notice[]; gone: LostLease[] } {
  const timers = new FakeTimers();
  const notices = new Notices(timers);
  const said: Notice[] = [];
  const gone: LostLease[] = [];
  notices.onNotice((n) => said.push(n));
  notices.onGone((l) => gone.push(l));
  return { timers, notices, said, gone };
}

describe('notices (model)', function () {
  it('warns ten minutes before the end of the user\'s reservation, counted from the filesystem\'s time left when judged, then says it ended; once each', () => {
    const { timers, notices, said } = setup();
    // Judged 1 minute ago, when the filesystem said 30 minutes were left: it ends 29 minutes from now,
    // whatever this machine's clock says of the end's date.
    notices.update(ref, lock({ until: '2030-01-01T00:30:00Z', leftMs: 30 * MIN }), timers.t - MIN);
    timers.advance(19 * MIN - 1);
    assert.equal(said.length, 0);
    timers.advance(1);
    assert.deepEqual(said, [{ ...ref, kind: 'ending', until: '2030-01-01T00:30:00Z' }]);
    // The model sees the same reservation again and again: no second warning.
    notices.update(ref, lock({ until: '2030-01-01T00:30:00Z', leftMs: 10 * MIN }), timers.t);
    timers.advance(10 * MIN);
    assert.deepEqual(
      said.map((n) => n.kind),
      ['ending', 'ended'],
    );
    // Judged ended (stale) later: already said.
    notices.update(ref, lock({ state: 'stale', until: '2030-01-01T00:30:00Z', leftMs: 0 }), timers.t);
    assert.equal(said.length, 2);
  });

  it('warns again for the new end after an extension, and never for the old one', () => {
    const { timers, notices, said } = setup();
    notices.update(ref, lock({ until: 'end-1', leftMs: 15 * MIN }), timers.t);
    timers.advance(5 * MIN);
    assert.deepEqual(said.map((n) => n.kind), ['ending']);
    notices.update(ref, lock({ until: 'end-2', leftMs: 60 * MIN }), timers.t);
    timers.advance(45 * MIN);
    assert.deepEqual(said.map((n) => `${n.kind} ${(n as { until: string }).until}`), ['ending end-1']);
    timers.advance(5 * MIN);
    assert.deepEqual(said.map((n) => `${n.kind} ${(n as { until: string }).until}`), ['ending end-1', 'ending end-2']);
    timers.advance(10 * MIN);
    assert.deepEqual(said.map((n) => `${n.kind} ${(n as { until: string }).until}`), ['ending end-1', 'ending end-2', 'ended end-2']);
  });

  it('warns at once of a reservation with less than ten minutes left, and says nothing of another user\'s or of a plain lock', () => {
    const { timers, notices, said } = setup();
    notices.update({ ...ref, tag: 'x' }, { ...lock({ until: 'u', leftMs: 5 * MIN, mine: false }), tag: 'x' }, timers.t);
    notices.update({ ...ref, tag: 'y' }, { ...lock(), tag: 'y' }, timers.t);
    timers.advance(60 * MIN);
    assert.equal(said.length, 0);
    notices.update(ref, lock({ until: 'u', leftMs: WARN_BEFORE_MS - 1 }), timers.t);
    assert.deepEqual(said.map((n) => n.kind), ['ending']);
  });

  it('asks the history about a reservation of the user\'s gone from under it, and tells only a recorded force-release, takeover or destroy, once', () => {
    const { timers, notices, said, gone } = setup();
    notices.update(ref, lock({ until: 'u', leftMs: 60 * MIN, fence: 9 }), timers.t);
    // Another holder's lock now: the reservation went.
    notices.update(ref, lock({ token: 't2', fence: 10 }), timers.t);
    notices.update(ref, undefined, timers.t);
    assert.deepEqual(gone, [{ ...ref, dir: `${ref.staticDir}/${ref.tag}`, fence: 9, holder: { pid: 42, hostname: 'vm', token: 't1' } }]);
    // Its timers went with it.
    timers.advance(120 * MIN);
    assert.equal(said.length, 0);
    const by = { user: 'bob', hostname: 'other', pid: 5, clientId: 'other:5' };
    const base = { ...ref, dir: '', at: '2030-01-01T00:00:00Z', recorded: true };
    notices.lost({ ...base, kind: 'removed', recorded: false });
    notices.lost({ ...base, kind: 'replaced', recorded: false });
    assert.equal(said.length, 0);
    notices.lost({ ...base, kind: 'force-released', by });
    assert.equal(said.length, 1);
    assert.equal(said[0].kind === 'lost' && said[0].loss.by?.user, 'bob');
  });

  it('tells once when a wished build is free (or stale), then forgets the wish; a second wish is refused, and a build gone ends it quietly', () => {
    const { timers, notices, said } = setup();
    assert.equal(notices.wish(ref), true);
    assert.equal(notices.wish(ref), false);
    notices.update(ref, lock(), timers.t);
    assert.equal(said.length, 0);
    notices.update(ref, { ...lock(), state: 'free', holder: undefined }, timers.t);
    notices.update(ref, { ...lock(), state: 'free', holder: undefined }, timers.t);
    assert.deepEqual(said, [{ ...ref, kind: 'free' }]);
    assert.equal(notices.wished(ref), false);
    notices.wish(ref);
    notices.update(ref, { ...lock(), state: 'stale' }, timers.t);
    assert.equal(said.length, 2);
    notices.wish(ref);
    assert.equal(notices.unwish(ref), true);
    assert.equal(notices.unwish(ref), false);
    notices.update(ref, { ...lock(), state: 'free', holder: undefined }, timers.t);
    assert.equal(said.length, 2);
    notices.wish(ref);
    notices.update(ref, undefined, timers.t);
    assert.equal(notices.wished(ref), false);
    assert.equal(said.length, 2);
  });

  it('clears its timers on dispose', () => {
    const { timers, notices, said } = setup();
    notices.update(ref, lock({ until: 'u', leftMs: 60 * MIN }), timers.t);
    notices.update({ ...ref, tag: 'eve/R2' }, { ...lock({ until: 'v', leftMs: 90 * MIN }), tag: 'eve/R2' }, timers.t);
    assert.ok(timers.pending.size >= 4);
    notices.dispose();
    assert.equal(timers.pending.size, 0);
    timers.advance(120 * MIN);
    assert.equal(said.length, 0);
  });

  it('on a real static directory: this user\'s reservation force-released by a process on another host is told with who did it', async function () {
    const staticDir = tempDir('dss-notices-');
    try {
      fs.mkdirSync(path.join(staticDir, 'eve/R1'), { recursive: true });
      fs.writeFileSync(path.join(staticDir, 'eve/R1/staged.timestamp'), '');
      assert.equal((await cli(staticDir, ['reserve', 'eve/R1', '--for', '1h'])).code, 0);
      const { notices, said, gone } = setup();
      const area = { staticDir, tag: 'eve/R1' };
      const held = await inspect(staticDir, 'eve/R1');
      assert.equal(held.reservation?.mine, true);
      notices.update(area, held, Date.now());
      const fr = await run('unshare', ['--uts', 'sh', '-c', 'hostname elsewhere && exec "$@"', 'sh', process.execPath, CLI, '--static-dir', staticDir, 'force-release', 'eve/R1']);
      assert.equal(fr.code, 0, fr.stderr);
      notices.update(area, await inspect(staticDir, 'eve/R1'), Date.now());
      assert.equal(gone.length, 1);
      notices.lost(await explainLoss(gone[0]));
      assert.equal(said.length, 1);
      const n = said[0];
      assert.ok(n.kind === 'lost');
      assert.equal(n.loss.kind, 'force-released');
      assert.equal(n.loss.by?.hostname, 'elsewhere');
      notices.dispose();
    } finally {
      cleanup(staticDir);
    }
  });
});
