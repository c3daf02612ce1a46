/**
 * The history of every build, on real directories with real processes: every transition recorded
 * by whichever process made it, complete and in order per tag; many processes appending at once
 * without a lost or torn line; a bounded size; links, FIFOs and devices planted in the history's
 * place refused without a hang while the operation itself goes through; the CLI's output.
 */
import { strict as assert } from 'assert';
import { spawn, spawnSync, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { history, lastHeld, recordHistory, type HistoryEvent, type HistoryKind } from '../../../src/core/log/history';
import { acquire } from '../../../src/core/lock/lock';
import { HISTORY_DIR, HISTORY_SEGMENT_BYTES, META_DIR, historyDirOf, historyHostName, historySegmentName } from '../../../src/core/base/protocol';
import { changes, cliTimed, fingerprint, plantCanaries } from '../../attack';
import { type Msg, cleanup, exitOf, expectMessage, isRoot, killAll, report, startWorker, tempDir, track, waitFor } from '../../helpers';

const timing = { staleMs: 3_000, refreshMs: 1_000 };

/** A process that acts on areas when told (test/workers/history-actor.ts). */
class Actor {
  private next = 0;
  constructor(
    readonly child: ChildProcess,
    readonly pid: number,
  ) {}

  static async start(staticDir: string, env: NodeJS.ProcessEnv = {}): Promise<Actor> {
    const child = track(startWorker('history-actor', [JSON.stringify({ staticDir, ...timing })], { env: { ...process.env, ...env } }));
    const ready = await expectMessage<Msg & { pid: number }>(child, (m) => m.type === 'ready', 30_000, 'ready');
    return new Actor(child, ready.pid);
  }

  /** Starts `op` and resolves when it is done; the test fails if it failed. */
  async do(op: string, tag: string, extra: object = {}, timeoutMs = 30_000): Promise<void> {
    const id = ++this.next;
    const done = expectMessage<Msg & { id: number; ok: boolean; code?: string; message?: string }>(this.child, (m) => m.type === 'done' && m.id === id, timeoutMs, `${op} ${tag}`);
    this.child.send({ id, op, tag, ...extra });
    const r = await done;
    assert.ok(r.ok, `${op} ${tag} by pid ${this.pid}: ${r.code} ${r.message}`);
  }
}

/** The directory of `tag`'s segments. */
function tagDir(staticDir: string, tag: string): string {
  return path.join(staticDir, META_DIR, HISTORY_DIR, ...historyDirOf(tag));
}

/** This host's segment of generation `n` for `tag`. */
function segment(staticDir: string, tag: string, n = 0): string {
  return path.join(tagDir(staticDir, tag), historySegmentName(historyHostName(os.hostname()), n));
}

/** Every line of every segment of `tag`, by file, parsed: a line that is not JSON fails the test. */
function rawLines(staticDir: string, tag: string): Map<string, Record<string, unknown>[]> {
  const dir = tagDir(staticDir, tag);
  const out = new Map<string, Record<string, unknown>[]>();
  for (const name of fs.readdirSync(dir).sort((a, b) => Number(a.split('.').at(-2)) - Number(b.split('.').at(-2)))) {
    const text = fs.readFileSync(path.join(dir, name), 'utf8');
    assert.ok(text.endsWith('\n'), `${name} ends inside a line`);
    out.set(
      name,
      text
        .slice(0, -1)
        .split('\n')
        .map((l, i) => {
          try {
            return JSON.parse(l) as Record<string, unknown>;
          } catch {
            assert.fail(`${name}:${i + 1} is not a whole line: ${l.slice(0, 200)}`);
          }
        }),
    );
  }
  return out;
}

describe('history of every build', function () {
  this.timeout(60_000);
  let root: string;
  let staticDir: string;

  beforeEach(() => {
    root = tempDir('dss-history-');
    staticDir = path.join(root, 'static');
    fs.mkdirSync(staticDir);
  });

  afterEach(async () => {
    await killAll();
    cleanup(root);
  });

  it('every transition, made by several processes at once on four areas, is recorded complete and in order per area', async () => {
    const src = path.join(root, 'src');
    fs.mkdirSync(src);
    fs.writeFileSync(path.join(src, 'image.bin'), 'x'.repeat(1000));
    fs.writeFileSync(path.join(src, 'autotest.tar'), 'y'.repeat(24));
    const [a, b] = await Promise.all([Actor.start(staticDir), Actor.start(staticDir)]);
    const tags = ['eve-release/R1', 'eve-release/R2', 'kevin-release/R1', 'kevin-release/R2'];
    type Step = [kind: HistoryKind, by: number, previous?: number];
    const expected = new Map<string, Step[]>();
    // The four scripts run at the same time; the two processes take turns as holder and remover.
    await Promise.all(
      tags.map(async (tag, i) => {
        const [x, y] = i % 2 === 0 ? [a, b] : [b, a];
        const steps: Step[] = [];
        await x.do('stage', tag, { source: src });
        steps.push(['acquired', x.pid], ['staged', x.pid], ['released', x.pid]);
        await y.do('verify', tag);
        steps.push(['verified', y.pid]);
        await x.do('acquire', tag);
        steps.push(['acquired', x.pid]);
        const lost = expectMessage(x.child, (m) => m.type === 'lost' && m.tag === tag, 20_000, `lost ${tag}`);
        await y.do('force-release', tag);
        steps.push(['force-released', y.pid, x.pid]);
        await lost;
        steps.push(['lost', x.pid]);
        // A holder killed while it holds: stale at once (its pid is gone here), taken over by the next.
        const dead = track(startWorker('holder', [JSON.stringify({ staticDir, tag, createOnce: false, ...timing })]));
        const got = await expectMessage(dead, (m) => m.type === 'acquired' || m.type === 'error', 30_000, `acquired ${tag}`);
        assert.equal(got.type, 'acquired', JSON.stringify(got));
        steps.push(['acquired', dead.pid!]);
        dead.kill('SIGKILL');
        await exitOf(dead);
        await y.do('acquire', tag);
        steps.push(['taken-over', y.pid, dead.pid!], ['acquired', y.pid]);
        await y.do('release', tag);
        steps.push(['released', y.pid]);
        await x.do('destroy', tag);
        steps.push(['acquired', x.pid], ['destroyed', x.pid]);
        expected.set(tag, steps);
      }),
    );

    for (const tag of tags) {
      const events = await history(staticDir, { tag });
      assert.deepEqual(
        events.map((e): Step => (e.previous !== undefined ? [e.kind, e.holder.pid, e.previous.pid!] : [e.kind, e.holder.pid])),
        expected.get(tag),
        `history of ${tag}`,
      );
      for (let i = 1; i < events.length; i++) assert.ok(events[i].time >= events[i - 1].time, `${tag}: not in time order at ${i}`);
      // The fencing token of each lock: one more per holder, the removed lock's on a removal.
      assert.deepEqual(
        events.map((e) => e.fence),
        [1, 1, 1, undefined, 2, 2, 2, 3, 3, 4, 4, 5, 5],
        `${tag}: fencing tokens`,
      );
      for (const e of events) {
        assert.equal(e.tag, tag);
        if (e.kind === 'acquired') assert.ok(e.waitedMs !== undefined && e.waitedMs >= 0, `${tag}: acquired without waitedMs`);
        if (['released', 'lost', 'destroyed', 'force-released', 'taken-over'].includes(e.kind)) assert.ok(e.heldMs !== undefined && e.heldMs >= 0, `${tag}: ${e.kind} without heldMs`);
      }
      const staged = events.find((e) => e.kind === 'staged')!;
      assert.deepEqual([staged.artifacts, staged.skipped, staged.bytes], [2, 0, 1024]);
      const verified = events.find((e) => e.kind === 'verified')!;
      assert.deepEqual([verified.ok, verified.problems, verified.files], [true, 0, 2]);
      assert.match(events.find((e) => e.kind === 'lost')!.reason!, /.+/);
      assert.equal(events.find((e) => e.kind === 'taken-over')!.previous!.acquiredAt !== undefined, true);
      const last = await lastHeld(staticDir, tag);
      assert.equal(last?.kind, 'destroyed');
      assert.equal((last?.holder as { pid: number }).pid, expected.get(tag)!.at(-1)![1]);
    }
    const all = await history(staticDir);
    assert.equal(all.length, tags.length * 13);
    assert.deepEqual([...new Set(all.map((e) => e.tag))].sort(), [...tags].sort());
    report(`${all.length} events of ${tags.length} areas from ${2 + tags.length} processes, each area's complete and in order`);
  });

  it('8 processes × 500 records of one tag at once, half of them queued as on a network filesystem: no line lost or torn, through a new generation', async () => {
    const tag = 'board/shared';
    const N = 8;
    const COUNT = 500;
    // DEVSERVER_STAGING_ASYNC_IO=1: the path network filesystems take (records queued, written off the lock path).
    const actors = await Promise.all(Array.from({ length: N }, (_, i) => Actor.start(staticDir, i % 2 === 0 ? {} : { DEVSERVER_STAGING_ASYNC_IO: '1' })));
    const done = actors.map((w) => w.do('append', tag, { count: COUNT, pad: 200, gated: true }, 50_000));
    for (const w of actors) w.child.send({ op: 'go' });
    await Promise.all(done);

    const files = rawLines(staticDir, tag);
    const seqs = new Map<string, number[]>();
    for (const lines of files.values()) {
      for (const l of lines) {
        const who = (l.holder as { clientId: string }).clientId;
        seqs.set(who, [...(seqs.get(who) ?? []), l.fence as number]);
      }
    }
    const sizes = [...files.keys()].map((f) => `${f} ${fs.statSync(path.join(tagDir(staticDir, tag), f)).size}`);
    assert.equal(files.size, 2, `a segment filled up and the next generation took over: ${sizes.join(', ')}`);
    assert.equal(seqs.size, N);
    for (const [who, s] of seqs) assert.deepEqual(s, Array.from({ length: COUNT }, (_, i) => i), `${who}: records lost or out of order`);
    assert.equal((await history(staticDir, { tag })).length, N * COUNT);
    report(`${N * COUNT} lines in ${sizes.join(', ')}: every one whole, each process's in order`);
  });

  it('a segment that fills up starts a new generation and drops the one before: at most two per host, the newest events kept', async () => {
    const tag = 'eve-release/R9';
    const holder = { user: 'u', hostname: 'h', pid: 1, clientId: 'c', purpose: 'q'.repeat(400) };
    const COUNT = 8_000;
    for (let seq = 0; seq < COUNT; seq++) await recordHistory(staticDir, { tag, kind: 'staged', holder, fence: seq }, (w) => assert.fail(w.message));
    const dir = tagDir(staticDir, tag);
    const names = fs.readdirSync(dir).sort();
    const total = names.reduce((n, f) => n + fs.statSync(path.join(dir, f)).size, 0);
    assert.equal(names.length, 2, `segments: ${names.join(', ')}`);
    assert.ok(total <= 2 * HISTORY_SEGMENT_BYTES + 4096, `${total} bytes kept`);
    const events = await history(staticDir, { tag });
    const fences = events.map((e) => e.fence!);
    assert.equal(fences.at(-1), COUNT - 1, 'the newest event is kept');
    assert.deepEqual(fences, Array.from({ length: fences.length }, (_, i) => fences[0] + i), 'what is kept is contiguous and in order');
    assert.ok(fences[0] > 0 && events.length * 500 > HISTORY_SEGMENT_BYTES, `kept ${events.length} events from ${fences[0]}`);
    assert.deepEqual((await history(staticDir, { tag, limit: 3 })).map((e) => e.fence), [COUNT - 3, COUNT - 2, COUNT - 1]);
    report(`${COUNT} records: ${names.join(', ')}, ${(total / 1024 / 1024).toFixed(2)} MiB, the newest ${events.length} kept`);
  });

  it('what history creates has exact modes whatever the umask: writable by whoever may write the static directory', async function () {
    fs.chmodSync(staticDir, 0o1777);
    const r = await cliTimed(staticDir, ['lock', 'shared/R1', '--', 'true'], { timeoutMs: 20_000, umask: '077' });
    assert.equal(r.code, 0, r.stderr);
    const mode = (p: string): string => (fs.statSync(p).mode & 0o7777).toString(8);
    const h = path.join(staticDir, META_DIR, HISTORY_DIR);
    const [fan, hash] = historyDirOf('shared/R1');
    // The static directory's write bits, not its sticky bit (a host's writers drop each other's old generations).
    assert.deepEqual([mode(h), mode(path.join(h, fan)), mode(path.join(h, fan, hash)), mode(segment(staticDir, 'shared/R1'))], ['777', '777', '777', '666']);
    // The bookkeeping directory keeps it all: made first by the clock probe, with the static directory's bits.
    assert.equal(mode(path.join(staticDir, META_DIR)), '1777');
    fs.chmodSync(staticDir, 0o755);
    const r2 = await cliTimed(staticDir, ['lock', 'private/R1', '--', 'true'], { timeoutMs: 20_000, umask: '077' });
    assert.equal(r2.code, 0, r2.stderr);
    assert.deepEqual([mode(tagDir(staticDir, 'private/R1')), mode(segment(staticDir, 'private/R1'))], ['755', '644']);
  });

  it('two users on one host append to the same segment, whichever made it and whatever its umask', async function () {
    if (!isRoot) this.skip();
    fs.chmodSync(root, 0o755);
    fs.chmodSync(staticDir, 0o1777);
    const tag = 'shared/R2';
    // The area itself open to both (its mode is the lock's business); the history's modes are what is tested.
    fs.mkdirSync(path.join(staticDir, tag), { recursive: true });
    for (const d of ['shared', tag]) fs.chmodSync(path.join(staticDir, d), 0o777);
    for (const [user, umask] of [['daemon', '077'], ['nobody', '077'], ['daemon', '022']] as const) {
      const r = await cliTimed(staticDir, ['lock', tag, '--', 'true'], { timeoutMs: 20_000, user, umask });
      assert.deepEqual([r.code, r.stderr], [0, ''], `${user}: ${r.stderr}`);
    }
    const events = await history(staticDir, { tag });
    assert.deepEqual(
      events.map((e) => `${e.kind} ${e.holder.user}`),
      ['acquired daemon', 'released daemon', 'acquired nobody', 'released nobody', 'acquired daemon', 'released daemon'],
    );
    assert.equal(fs.readdirSync(tagDir(staticDir, tag)).length, 1, 'one segment for the host');
  });

  describe('links, FIFOs and devices in the history\'s place: never followed, never waited on, the operation goes through', () => {
    const tag = 'eve-release/R7';
    let outside: string;

    beforeEach(() => {
      outside = path.join(root, 'outside');
      plantCanaries(outside);
      fs.mkdirSync(tagDir(staticDir, tag), { recursive: true });
    });

    const cases: { what: string; plant: () => void | ChildProcess; refusal: RegExp; rootOnly?: boolean }[] = [
      {
        what: 'the history directory a link to a directory outside',
        plant: () => {
          fs.rmSync(path.join(staticDir, META_DIR, HISTORY_DIR), { recursive: true });
          fs.symlinkSync(path.join(outside, 'precious'), path.join(staticDir, META_DIR, HISTORY_DIR));
        },
        refusal: /is a symbolic link/,
      },
      {
        what: "the tag's directory a link to a directory outside",
        plant: () => {
          fs.rmdirSync(tagDir(staticDir, tag));
          fs.symlinkSync(path.join(outside, 'precious'), tagDir(staticDir, tag));
        },
        refusal: /is a symbolic link/,
      },
      { what: 'the segment a link to a file outside', plant: () => fs.symlinkSync(path.join(outside, 'victim.txt'), segment(staticDir, tag)), refusal: /it is a symbolic link/ },
      { what: 'the segment a dangling link out of the static directory', plant: () => fs.symlinkSync(path.join(outside, 'made-through-link'), segment(staticDir, tag)), refusal: /it is a symbolic link/ },
      { what: 'the segment a FIFO without a reader', plant: () => void spawnSync('mkfifo', [segment(staticDir, tag)]), refusal: /it is a FIFO/ },
      {
        what: 'the segment a FIFO with a reader',
        plant: () => {
          spawnSync('mkfifo', [segment(staticDir, tag)]);
          // Both ends open, so that an open for writing would succeed; whatever comes is written to `got`.
          return track(spawn('sh', ['-c', `exec 3<>"${segment(staticDir, tag)}"; exec cat <&3 > "${path.join(outside, 'got')}"`], { stdio: 'ignore' }));
        },
        refusal: /it is a FIFO/,
      },
      { what: 'the segment a directory', plant: () => fs.mkdirSync(segment(staticDir, tag)), refusal: /it is a directory/ },
      { what: 'the segment a device', plant: () => void spawnSync('mknod', [segment(staticDir, tag), 'c', '1', '3']), refusal: /it is a device/, rootOnly: true },
    ];

    for (const c of cases) {
      it(c.what, async function () {
        if (c.rootOnly === true && !isRoot) this.skip();
        const reader = c.plant();
        if (reader !== undefined) await waitFor(() => (fs.existsSync(path.join(outside, 'got')) ? true : undefined), 5_000, 'the reader');
        const before = fingerprint(outside);
        const planted = fs.lstatSync(path.join(staticDir, META_DIR, HISTORY_DIR)).isSymbolicLink() ? path.join(staticDir, META_DIR, HISTORY_DIR) : tagDir(staticDir, tag);
        const plantedBefore = fingerprint(planted);

        // The CLI, under a deadline: one warning line, and the lock taken and released all the same.
        const r = await cliTimed(staticDir, ['lock', tag, '--', 'true'], { timeoutMs: 15_000 });
        assert.equal(r.hung, false, 'the command hung');
        assert.equal(r.code, 0, r.stderr);
        const warnings = r.stderr.split('\n').filter((l) => l !== '');
        assert.equal(warnings.length, 1, r.stderr);
        assert.match(warnings[0], /^devserver-stage: warning: Could not record the history of eve-release\/R7 .*\(the operation itself went through\)/);
        assert.match(warnings[0], c.refusal);
        const status = await cliTimed(staticDir, ['--json', 'status', tag], { timeoutMs: 15_000 });
        assert.equal((JSON.parse(status.stdout) as { state: string }).state, 'free');

        // The core: the same refusal to the caller's `warn`, once per record; the lease works.
        const heard: string[] = [];
        const lease = await acquire(staticDir, tag, { createOnce: false, warn: (w) => heard.push(w.message) });
        await lease.release();
        assert.equal(heard.length, 2, heard.join('\n'));
        for (const h of heard) assert.match(h, c.refusal);

        // Reading skips it and says so; nothing is read from it or through it.
        const read = await cliTimed(staticDir, ['history', tag], { timeoutMs: 15_000 });
        assert.equal(read.hung, false);
        assert.equal(read.code, 0, read.stderr);
        assert.match(read.stdout, /^\(no history for eve-release\/R7\)$/m);
        assert.match(read.stderr, /warning: Skipped part of the history: Refusing .*/);

        assert.deepEqual(changes(outside, before, fingerprint(outside)), [], 'something outside the static directory changed');
        assert.deepEqual(changes(planted, plantedBefore, fingerprint(planted)), [], 'what was planted changed');
        if (reader !== undefined) {
          assert.equal(fs.readFileSync(path.join(outside, 'got'), 'utf8'), '', 'something was written into the FIFO');
          reader.kill('SIGKILL');
        }
      });
    }
  });

  describe('the history command', () => {
    const tag = 'eve-release/R120-15662.0.0';
    const hour = 3_600_000;
    const day = 24 * hour;

    /** Events at known times, written as hosts write them (out of time order across files), and one of another tag. */
    function fixture(): void {
      const now = Date.now();
      const who = (user: string, host: string, pid: number, purpose?: string) => ({ user, hostname: host, pid, clientId: `${host}:${pid}`, ...(purpose !== undefined ? { purpose } : {}) });
      const lines = (host: string, events: (object | string)[]): void => {
        fs.mkdirSync(tagDir(staticDir, tag), { recursive: true });
        fs.writeFileSync(path.join(tagDir(staticDir, tag), historySegmentName(host, 0)), events.map((e) => `${JSON.stringify(e)}\n`).join(''));
      };
      const at = (ago: number): string => new Date(now - ago).toISOString();
      lines('build1', [
        { tag, kind: 'acquired', time: at(3 * day), holder: who('builder', 'build1', 41, 'nightly eve'), fence: 7, waitedMs: 250 },
        { tag, kind: 'released', time: at(3 * day - 90_000), holder: who('builder', 'build1', 41, 'nightly eve'), fence: 7, heldMs: 90_000 },
        { tag, kind: 'verified', time: at(hour), holder: who('builder', 'build1', 77), ok: false, problems: 2, files: 12, bytes: 3 * 1024 ** 3 },
      ]);
      lines('build2', [
        { tag, kind: 'force-released', time: at(day), holder: who('admin', 'build2', 5), fence: 8, heldMs: 2 * hour, previous: { ...who('\u001b[31mmallory', 'build3', 99), acquiredAt: at(day + 2 * hour) } },
        'not json at all',
        { tag, kind: 'staged', time: at(2 * day), holder: who('builder', 'build2', 12), fence: 8, artifacts: 12, skipped: 1, bytes: 3 * 1024 ** 3 },
      ]);
      fs.appendFileSync(path.join(tagDir(staticDir, tag), historySegmentName('build2', 0)), '{"tag":"torn","kind":"acq');
      const other = 'kevin-release/R1';
      fs.mkdirSync(tagDir(staticDir, other), { recursive: true });
      fs.writeFileSync(path.join(tagDir(staticDir, other), historySegmentName('build1', 0)), `${JSON.stringify({ tag: other, kind: 'destroyed', time: at(12 * hour), holder: who('builder', 'build1', 3), fence: 2, heldMs: 40 })}\n`);
    }

    const kindsIn = (stdout: string): string[] =>
      stdout
        .split('\n')
        .slice(1)
        .filter((l) => l !== '')
        .map((l) => l.split(/\s+/)[1]);

    it('one line per event, oldest first, with who, when, durations and token; --since 30m, 12h, 2d; --limit', async () => {
      fixture();
      const r = await cliTimed(staticDir, ['history', tag], { timeoutMs: 15_000 });
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stderr, '');
      const lines = r.stdout.trimEnd().split('\n');
      assert.match(lines[0], /^TIME\s+EVENT\s+TAG\s+BY\s+DETAILS$/);
      assert.deepEqual(kindsIn(r.stdout), ['acquired', 'released', 'staged', 'force-released', 'verified']);
      assert.match(lines[1], /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\s+acquired\s+eve-release\/R120-15662\.0\.0\s+builder@build1:41\s+fence 7, waited 250 ms, for nightly eve$/);
      assert.match(lines[2], /released .* fence 7, held 2 min$/);
      assert.match(lines[3], /staged .* fence 8, 12 artifacts written, 1 identical, 3\.0 GiB$/);
      // A co-user's bytes are shown, not obeyed: the escape sequence is printed escaped.
      assert.match(lines[4], /force-released .*admin@build2:5 .*fence 8, held 2 h, from "\\u001b\[31mmallory@build3:99"$/);
      assert.ok(!r.stdout.includes('\u001b'), 'an escape sequence reached the terminal');
      assert.match(lines[5], /verified .* DAMAGED: 2 problems, 12 files, 3\.0 GiB$/);

      const since = async (d: string): Promise<string[]> => {
        const s = await cliTimed(staticDir, ['history', tag, '--since', d], { timeoutMs: 15_000 });
        assert.equal(s.code, 0, s.stderr);
        return s.stdout.startsWith('(no history') ? [] : kindsIn(s.stdout);
      };
      assert.deepEqual(await since('2d'), ['force-released', 'verified']);
      assert.deepEqual(await since('12h'), ['verified']);
      assert.deepEqual(await since('30m'), []);
      const limited = await cliTimed(staticDir, ['history', tag, '--limit', '2'], { timeoutMs: 15_000 });
      assert.deepEqual(kindsIn(limited.stdout), ['force-released', 'verified']);

      // Without a tag: every area's, in time order.
      const all = await cliTimed(staticDir, ['history', '--since', '2d'], { timeoutMs: 15_000 });
      assert.deepEqual(kindsIn(all.stdout), ['force-released', 'destroyed', 'verified']);
      assert.match(all.stdout, /destroyed\s+kevin-release\/R1/);

      const last = await lastHeld(staticDir, tag);
      assert.deepEqual([last?.kind, (last?.holder as { pid: number }).pid, last?.heldMs], ['force-released', 99, 2 * hour]);
    });

    it('--json: one event per line (JSON lines), oldest first', async () => {
      fixture();
      const r = await cliTimed(staticDir, ['--json', 'history', tag, '--since', '2d'], { timeoutMs: 15_000 });
      assert.equal(r.code, 0, r.stderr);
      const events = r.stdout
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l) as HistoryEvent);
      assert.deepEqual(
        events.map((e) => [e.kind, e.holder.user, e.fence]),
        [
          ['force-released', 'admin', 8],
          ['verified', 'builder', undefined],
        ],
      );
      assert.equal(events[0].previous?.user, '\u001b[31mmallory');
      const none = await cliTimed(staticDir, ['--json', 'history', 'no/such/R1'], { timeoutMs: 15_000 });
      assert.deepEqual([none.code, none.stdout, none.stderr], [0, '', '']);
    });

    it('errors are coded: a bad duration or count is a usage error, a bad tag EBADTAG, a missing static directory EBADSTATICDIR', async () => {
      const json = async (args: string[], dir = staticDir): Promise<[number | null, string]> => {
        const r = await cliTimed(dir, ['--json', ...args], { timeoutMs: 15_000 });
        return [r.code, (JSON.parse(r.stderr.trim()) as { error: { code: string } }).error.code];
      };
      assert.deepEqual(await json(['history', tag, '--since', '2x']), [2, 'EUSAGE']);
      assert.deepEqual(await json(['history', tag, '--since', '2']), [2, 'EUSAGE']);
      assert.deepEqual(await json(['history', '--limit', 'many']), [2, 'EUSAGE']);
      assert.deepEqual(await json(['history', '../etc']), [2, 'EBADTAG']);
      assert.deepEqual(await json(['history'], path.join(root, 'missing')), [2, 'EBADSTATICDIR']);
      const help = await cliTimed(staticDir, ['history', '--help'], { timeoutMs: 15_000 });
      assert.equal(help.code, 0);
      for (const word of ['--since <duration>', '30m, 12h, 2d', '--limit <n>', 'JSON lines', 'oldest first']) assert.ok(help.stdout.includes(word), `--help lacks ${word}`);
      const top = await cliTimed(staticDir, ['--help'], { timeoutMs: 15_000 });
      assert.match(top.stdout, /history \[options\] \[tag\]/);
    });
  });
});
