/**
 * Who uses what, from the history: holdings, waits, force-releases and takeovers written by real
 * locks in real processes come back as the figures of a window (timelines, most contended builds,
 * longest waits, force-releases); hand-written lines show the odd cases (no end, out of order,
 * an end without its start, a line planted in another tag's directory, hostile text kept as text),
 * and a link or FIFO in a segment's place is skipped, never read or waited on.
 */
import { strict as assert } from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { DAY_MS, MAX_LANE_ITEMS, WAIT_FLOOR_MS, WEEK_MS, flushHistory, historyStats, type UsageFigures } from '../../../src/core/log/history';
import { acquire } from '../../../src/core/lock/lock';
import { forceRelease } from '../../../src/core/remove';
import { HISTORY_DIR, META_DIR, historyDirOf, historySegmentName } from '../../../src/core/base/protocol';
import { cli, cleanup, exitOf, expectMessage, killAll, report, startWorker, tempDir, track } from '../../helpers';

const timing = { staleMs: 3_000, refreshMs: 1_000 };

function tagDir(staticDir: string, tag: string): string {
  return path.join(staticDir, META_DIR, HISTORY_DIR, ...historyDirOf(tag));
}

/** Writes `lines` (objects as JSON, strings as they are) as host `host`'s segment of `tag`. */
function writeSegment(staticDir: string, tag: string, host: string, lines: readonly (object | string)[]): string {
  const dir = tagDir(staticDir, tag);
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, historySegmentName(host, 0));
  fs.writeFileSync(file, lines.map((l) => `${typeof l === 'string' ? l : JSON.stringify(l)}\n`).join(''));
  return file;
}

const H = (user: string, pid = 1, extra: object = {}): object => ({ user, hostname: 'ws1', pid, clientId: `${user}-${pid}`, ...extra });
const at = (ms: number): string => new Date(ms).toISOString();

function lane(f: UsageFigures, tag: string): UsageFigures['lanes'][number] {
  const l = f.lanes.find((x) => x.usage.tag === tag);
  assert.ok(l !== undefined, `no lane for ${tag}: ${f.lanes.map((x) => x.usage.tag).join(', ')}`);
  return l;
}

describe('history stats: who uses what', function () {
  this.timeout(60_000);
  let root: string;
  let staticDir: string;

  beforeEach(() => {
    root = tempDir('dss-stats-');
    staticDir = path.join(root, 'static');
    fs.mkdirSync(staticDir);
  });

  afterEach(async () => {
    await killAll();
    cleanup(root);
  });

  it('real locks: a wait, a force-release (and the lost that follows it), a takeover of a killed holder, a holding still open', async () => {
    const fr = 'eve-release/R2';
    const wait = 'eve-release/R1';
    const taken = 'eve-release/R3';
    const other = 'kevin-release/R9';
    // A waiter held up for longer than the floor: the first holder lets go only after it.
    const first = await acquire(staticDir, wait, { ...timing, createOnce: false, clientId: 'first', purpose: 'first' });
    const waiting = acquire(staticDir, wait, { ...timing, createOnce: false, clientId: 'second', waitMs: 30_000 });
    await new Promise((r) => setTimeout(r, WAIT_FLOOR_MS + 300));
    await first.release();
    await (await waiting).release();

    const victim = await acquire(staticDir, fr, { ...timing, createOnce: false, clientId: 'victim' });
    const lost = new Promise<void>((resolve) => victim.on('lost', () => resolve()));
    await forceRelease(staticDir, fr, timing);
    await lost;

    const dead = track(startWorker('holder', [JSON.stringify({ staticDir, tag: taken, createOnce: false, ...timing })]));
    const got = await expectMessage(dead, (m) => m.type === 'acquired' || m.type === 'error', 30_000, 'acquired');
    assert.equal(got.type, 'acquired', JSON.stringify(got));
    dead.kill('SIGKILL');
    await exitOf(dead);
    const successor = await acquire(staticDir, taken, { ...timing, createOnce: false, clientId: 'successor' });

    const o = await acquire(staticDir, other, { ...timing, createOnce: false });
    await o.release();
    await flushHistory();

    const [day] = await historyStats(staticDir, { scope: 'eve-release' });
    assert.deepEqual(day.lanes.map((l) => l.usage.tag).sort(), [wait, fr, taken].sort(), 'the folder holds these three, not kevin-release');
    const w = lane(day, wait);
    assert.deepEqual(w.holds.map((h) => [h.end, h.startSeen]), [['released', true], ['released', true]]);
    assert.equal(w.waits.length, 1);
    assert.equal(w.waits[0].who.pid, process.pid);
    assert.ok(w.waits[0].toMs - w.waits[0].fromMs >= WAIT_FLOOR_MS + 300, 'the wait lasted at least as long as the first holder stayed');
    assert.ok(w.holds[1].fromMs >= w.holds[0].toMs, 'the second holding starts when the first ended');
    assert.equal(day.contended[0].tag, wait);
    assert.deepEqual(day.longestWaits.map((x) => x.tag), [wait]);

    const f = lane(day, fr);
    assert.deepEqual(f.holds.map((h) => h.end), ['force-released'], 'the lost its holder recorded after the force-release adds nothing');
    assert.equal(f.holds[0].by?.pid, process.pid);
    assert.deepEqual(day.forceReleases.map((h) => h.tag), [fr]);

    const t = lane(day, taken);
    assert.deepEqual(t.holds.map((h) => [h.end, h.holder.pid]), [['taken-over', dead.pid], ['open', process.pid]]);
    assert.equal(t.holds[0].by?.pid, process.pid);
    assert.equal(day.builds, 3);
    assert.equal(day.holds, 5);
    await successor.release();

    const [exact] = await historyStats(staticDir, { scope: wait, exact: true });
    assert.deepEqual(exact.lanes.map((l) => l.usage.tag), [wait]);
    const [all] = await historyStats(staticDir);
    assert.equal(all.builds, 4);
    assert.deepEqual(lane(all, taken).holds.map((h) => h.end), ['taken-over', 'released']);
    report(`${all.holds} holdings of ${all.builds} builds, ${all.waits} wait, ${all.forceReleases.length} force-release, from real locks`);
  });

  it('hand-written lines: no end, out of order, an end without its start, another tag planted, outside the window, two windows', async () => {
    const now = Date.parse('2026-03-10T12:00:00Z');
    const tag = 'eve/R1';
    writeSegment(staticDir, tag, 'ws1', [
      // Out of order in the file: the release first.
      { tag, kind: 'released', time: at(now - 3_600_000), holder: H('ann', 10), fence: 4, heldMs: 1_800_000 },
      { tag, kind: 'acquired', time: at(now - 5_400_000), holder: H('ann', 10), fence: 4, waitedMs: 3 },
      // No end: held to now.
      { tag, kind: 'acquired', time: at(now - 600_000), holder: H('bob', 11), fence: 5, waitedMs: 120_000 },
      // An end whose start is older than the file: it starts heldMs before.
      { tag, kind: 'released', time: at(now - DAY_MS / 2), holder: H('cy', 12), fence: 2, heldMs: 2 * DAY_MS },
      // Planted in this tag's directory under another tag's name.
      { tag: 'eve/R2', kind: 'acquired', time: at(now - 60_000), holder: H('eve', 13), fence: 1 },
      // Outside both windows.
      { tag, kind: 'released', time: at(now - 30 * DAY_MS), holder: H('old', 14), fence: 1, heldMs: 1_000 },
      'not json at all',
    ]);
    const [day, week] = await historyStats(staticDir, { windowsMs: [DAY_MS, WEEK_MS], nowMs: now });
    assert.deepEqual(day.lanes.map((l) => l.usage.tag), [tag], 'the line naming eve/R2 in eve/R1\'s directory is left out');
    const l = lane(day, tag);
    assert.deepEqual(
      l.holds.map((h) => [h.holder.user, h.end, h.startSeen, h.toMs - h.fromMs]),
      [
        ['cy', 'released', false, 2 * DAY_MS],
        ['ann', 'released', true, 1_800_000],
        ['bob', 'open', true, 600_000],
      ],
    );
    assert.equal(l.usage.heldMs, DAY_MS / 2 + 1_800_000 + 600_000, 'time held is clipped to the window');
    assert.equal(day.waits, 1, 'a wait of 3 ms is no wait');
    assert.deepEqual(day.longestWaits.map((x) => [x.who.user, x.toMs - x.fromMs]), [['bob', 120_000]]);
    assert.equal(week.holds, 3);
    assert.equal(lane(week, tag).usage.heldMs, 2 * DAY_MS + 1_800_000 + 600_000);
    const [none] = await historyStats(staticDir, { scope: 'kevin', nowMs: now });
    assert.deepEqual([none.builds, none.lanes.length], [0, 0]);
  });

  it('one holder at a time: a holding with no end that another holder followed ended by then (unrecorded); a late end still counts', async () => {
    const now = Date.parse('2026-03-10T12:00:00Z');
    const tag = 'eve/R3';
    writeSegment(staticDir, tag, 'ws1', [
      // Its end never recorded (the lock removed by hand): the next holder took the lock an hour later.
      { tag, kind: 'acquired', time: at(now - 3 * 3_600_000), holder: H('ann', 1), fence: 1 },
      { tag, kind: 'acquired', time: at(now - 2 * 3_600_000), holder: H('bob', 2), fence: 2, waitedMs: 4 },
      // Written by a host whose clock is a little behind: the release comes after the next acquire.
      { tag, kind: 'acquired', time: at(now - 3_600_000 + 5), holder: H('cy', 3), fence: 3, waitedMs: 3_000 },
      { tag, kind: 'released', time: at(now - 3_600_000 + 20), holder: H('bob', 2), fence: 2, heldMs: 3_600_000 },
    ]);
    const [day] = await historyStats(staticDir, { nowMs: now });
    assert.deepEqual(
      lane(day, tag).holds.map((h) => [h.holder.user, h.end, h.toMs - h.fromMs]),
      [
        ['ann', 'unrecorded', 3_600_000],
        ['bob', 'released', 3_600_000 + 20],
        ['cy', 'open', 3_600_000 - 5],
      ],
    );
  });

  it('hostile text is kept as the text it is: control characters, markup and link syntax in users, hosts, purposes and tags', async () => {
    const now = Date.parse('2026-03-10T12:00:00Z');
    const tag = 'eve/<img src=x onerror=alert(1)>\u001b[31m';
    const user = '<script>alert(1)</script>\u202e';
    const purpose = '[run](command:devserverStaging.destroy) `x` \n<b>';
    writeSegment(staticDir, tag, 'ws1', [
      { tag, kind: 'acquired', time: at(now - 60_000), holder: { user, hostname: 'h\u0007<i>', pid: 1, clientId: 'c', purpose }, fence: 1, waitedMs: 5_000 },
      { tag, kind: 'force-released', time: at(now - 30_000), holder: { user: 'x"><svg onload=1>', hostname: 'h', pid: 2, clientId: 'd' }, fence: 1, heldMs: 30_000, previous: { user, hostname: 'h', pid: 1, clientId: 'c' } },
    ]);
    const [day] = await historyStats(staticDir, { nowMs: now });
    const h = lane(day, tag).holds[0];
    assert.equal(h.tag, tag);
    assert.equal(h.holder.user, user);
    assert.equal(h.holder.purpose, purpose);
    assert.equal(h.by?.user, 'x"><svg onload=1>');
    assert.equal(day.forceReleases[0].tag, tag);
  });

  it('a link or FIFO in a segment\'s place is skipped and reported, never followed or waited on', async () => {
    const now = Date.parse('2026-03-10T12:00:00Z');
    const tag = 'eve/R5';
    const line = { tag, kind: 'released', time: at(now - 60_000), holder: H('ann', 10), fence: 1, heldMs: 1_000 };
    writeSegment(staticDir, tag, 'good', [line]);
    const outside = path.join(root, 'outside.jsonl');
    fs.writeFileSync(outside, `${JSON.stringify({ ...line, holder: H('mallory', 66), fence: 9 })}\n`);
    fs.symlinkSync(outside, path.join(tagDir(staticDir, tag), historySegmentName('linked', 0)));
    assert.equal(spawnSync('mkfifo', [path.join(tagDir(staticDir, tag), historySegmentName('fifo', 0))]).status, 0);
    const warnings: string[] = [];
    const [day] = await historyStats(staticDir, { nowMs: now, warn: (w) => warnings.push(w.message) });
    assert.deepEqual(lane(day, tag).holds.map((h) => h.holder.user), ['ann'], 'mallory\'s line, behind the link, is not read');
    assert.equal(warnings.length, 2, warnings.join('\n'));
    assert.ok(warnings.some((w) => /symbolic link/.test(w)) && warnings.some((w) => /FIFO/.test(w)), warnings.join('\n'));
  });

  it('lists are bounded: many builds give the busiest lanes and the top of each list', async () => {
    const now = Date.parse('2026-03-10T12:00:00Z');
    for (let i = 0; i < 40; i++) {
      const tag = `eve/R${i}`;
      writeSegment(staticDir, tag, 'ws1', [
        { tag, kind: 'acquired', time: at(now - 3_600_000), holder: H('u', i), fence: 1, waitedMs: 1_000 * (i + 1) },
        { tag, kind: 'force-released', time: at(now - 3_600_000 + i * 10_000), holder: H('v', 100 + i), fence: 1, heldMs: i * 10_000, previous: { user: 'u', hostname: 'ws1', pid: i, clientId: `u-${i}` } },
      ]);
    }
    const [day] = await historyStats(staticDir, { nowMs: now, lanes: 5, top: 3 });
    assert.equal(day.builds, 40);
    assert.deepEqual(day.lanes.map((l) => l.usage.tag), ['eve/R39', 'eve/R38', 'eve/R37', 'eve/R36', 'eve/R35']);
    assert.deepEqual(day.longestWaits.map((w) => w.tag), ['eve/R39', 'eve/R38', 'eve/R37']);
    assert.deepEqual(day.forceReleases.map((h) => h.tag), ['eve/R39', 'eve/R38', 'eve/R37']);
    assert.deepEqual(day.contended.map((u) => u.tag), ['eve/R39', 'eve/R38', 'eve/R37']);
  });

  it('a lane keeps the newest holdings only, and counts the rest: a build held every few minutes still draws', async () => {
    const now = Date.parse('2026-03-10T12:00:00Z');
    const tag = 'eve/busy';
    const lines: object[] = [];
    for (let i = 0; i < 3 * MAX_LANE_ITEMS; i++) {
      const start = now - DAY_MS + i * 20_000;
      lines.push({ tag, kind: 'acquired', time: at(start), holder: H('u', i), fence: i + 1 }, { tag, kind: 'released', time: at(start + 10_000), holder: H('u', i), fence: i + 1, heldMs: 10_000 });
    }
    writeSegment(staticDir, tag, 'ws1', lines);
    const [day] = await historyStats(staticDir, { nowMs: now });
    const l = lane(day, tag);
    assert.equal(l.usage.holds, 3 * MAX_LANE_ITEMS, 'every holding counted');
    assert.equal(l.holds.length, MAX_LANE_ITEMS, 'only so many drawn');
    assert.equal(l.omitted, 2 * MAX_LANE_ITEMS);
    assert.equal(l.holds.at(-1)!.holder.pid, 3 * MAX_LANE_ITEMS - 1, 'the newest kept');
    assert.ok(l.holds.every((h, i) => i === 0 || h.fromMs >= l.holds[i - 1].fromMs), 'oldest first');
  });
  it('the history --stats command: a short table, or one JSON object; names from the disk printed as text; --stats with --limit a usage error', async () => {
    const now = Date.now();
    const tag = 'eve/R\u001b[31m1';
    writeSegment(staticDir, tag, 'ws1', [
      { tag, kind: 'acquired', time: at(now - 3_600_000), holder: H('ann\nfake line'), fence: 1, waitedMs: 60_000 },
      { tag, kind: 'force-released', time: at(now - 1_800_000), holder: H('bob', 2), fence: 1, heldMs: 1_800_000, previous: { user: 'ann\nfake line', hostname: 'ws1', pid: 1, clientId: 'ann\nfake line-1' } },
    ]);
    writeSegment(staticDir, 'kevin/R1', 'ws1', [{ tag: 'kevin/R1', kind: 'released', time: at(now - 8 * DAY_MS), holder: H('cy', 3), fence: 1, heldMs: 1_000 }]);
    const r = await cli(staticDir, ['history', '--stats', 'eve']);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stdout, /\u001b/, 'no escape sequence reaches the terminal');
    assert.doesNotMatch(r.stdout, /^fake line/m, 'a newline in a name makes no line of its own');
    assert.match(r.stdout, /eve, .* 1 build used, 1 holding, 1 wait \(60 s in all\)/);
    for (const title of ['Busiest builds', 'Most contended', 'Longest waits', 'Force-releases']) assert.match(r.stdout, new RegExp(`^${title}$`, 'm'));
    assert.match(r.stdout, /"eve\/R\\u001b\[31m1"/, 'the tag printed quoted, with escapes');
    assert.match(r.stdout, /bob@ws1:2/);
    const week = await cli(staticDir, ['--json', 'history', '--stats', '--since', '1w']);
    assert.equal(week.code, 0, week.stderr);
    const f = JSON.parse(week.stdout) as UsageFigures;
    assert.equal(week.stdout.trimEnd().split('\n').length, 1, 'one object on one line');
    assert.equal(f.untilMs - f.sinceMs, WEEK_MS);
    assert.deepEqual([f.builds, f.forceReleases[0].tag, f.lanes[0].holds[0].holder.user], [1, tag, 'ann\nfake line'], 'kevin/R1, 8 days ago, is outside the week');
    const month = await cli(staticDir, ['--json', 'history', '--stats', '--since', '30d']);
    assert.equal((JSON.parse(month.stdout) as UsageFigures).builds, 2);
    const both = await cli(staticDir, ['history', '--stats', '--limit', '3']);
    assert.equal(both.code, 2, both.stderr);
    assert.match(both.stderr, /--stats and --limit cannot be used together/);
  });
});
