/**
 * A standing randomized fault checker. Several processes on two sshfs clients of one static
 * directory (each client's processes with a hostname of their own, `unshare --uts`; default mount
 * options; a private sshd) lock, stage, `stage --add`, destroy and force-release at random, through
 * the built CLI and through the core library in worker processes, while a nemesis SIGKILLs them,
 * SIGSTOPs them for longer than the stale threshold and continues them, and fills the disk under the
 * export (a small ext4 image) and frees it. Then a checker verifies, with the kernel as referee:
 *
 * 1. No two critical sections overlap. With leases, a holder stopped longer than the threshold
 *    inside its section is taken over; what must hold is that what it writes after that is refused.
 *    So a section is defined by its fenced writes. Each holder (test/workers/fault-holder.ts through
 *    `lease.workDir`; test/workers/fault-writer.ts under `lock -- COMMAND`, which finds its work
 *    directory by its command record) writes a begin entry, some writes and an end entry, each as a
 *    file created in `<area>/devserver.lock/work.<token>/` and then hard-linked into a log outside
 *    the static directory under the next free number (test/faults/log.ts). `link` is resolved by the
 *    server when it runs: once the lock was taken away, the name through the lock leads nowhere and
 *    the entry is refused. A number is only taken once the one below it exists, and the server lets
 *    one `link` onto a name succeed: the log is dense and its order is the order in which the server
 *    accepted the writes. The check: the accepted entries of each lock instance form one unbroken
 *    run among those of every conflicting tag (the same tag, or one above or below it: holding an
 *    area covers what is below it). Nothing is judged by a clock.
 * 2. Fencing tokens strictly grow in the order sections began (consecutive begins in the log, and
 *    each staging's token, known from its output or the manifest, against the begins surely before
 *    and after it), and no token is handed to two lock instances of a tag. Where a destroy of the
 *    tag may have come in between (placed by the log's length when it started and ended), such a
 *    failure is reported apart (`...-after-destroy`): a destroy may end a count.
 * 3. Every build is whole stagings: each artifact's first line names the staging that wrote it;
 *    each staging is in a build whole or not at all, at most one new-build staging per build, the
 *    manifest matches the files (hashes, names, each entry's source is that staging's), each
 *    staging's entries carry one fence, an added staging's above the build's, and `devserver-stage
 *    verify` agrees (run on the server: through a client, sshfs's 20 s directory cache can hide
 *    what the other client did last). A staging that succeeded is there unless something that may
 *    remove it ran after it; one that failed left nothing. Builds are judged all along (after each
 *    operation ends, and every second), whenever one is free and whole by the protocol's own account (no lock, nothing a cut-off holder left beside
 *    it) and nothing in it moved while it was read; and in checkpoints (every DSS_FAULT_CHECK_MS
 *    of faults, default 5 minutes, and at the end): the faults pause, every operation ends, and
 *    one holder per client takes and releases each area, as the next holder would (it undoes
 *    commits cut off), before the builds, verify and the stagings' ends are judged.
 * 4. Nothing outside the static directory changed: canary trees beside it on the same disk and
 *    elsewhere are hashed before and after, and the export holds only what the test put there.
 * 5. Every command ended: each operation has a deadline (not counting the time it was kept
 *    stopped); one that misses it is a violation, reported with each process's state, wait channel,
 *    kernel stack and JavaScript stack (a Node diagnostic report), then killed.
 *
 * Timing: a stale threshold of 4 s and a heartbeat every second: the core's shortest heartbeat is
 * 1 s, and on a network filesystem the README asks for a threshold at least 3 s above it. Pauses
 * last the threshold plus 1 to 3.5 s.
 *
 * Check 0: each kind of operation is first run once alone, unharmed, and must succeed.
 *
 * The nemesis aims some of its blows: stops mostly at holders inside their sections and at
 * contenders for a lock whose holder is stopped (they are taking it over), and kills or stops at
 * stagers while the server shows their commit record; contenders are sent to those tags, mostly
 * from the other client. Where the core names its protocol steps (DEVSERVER_STAGING_STEP_LOG),
 * some processes stop themselves at one (DEVSERVER_STAGING_PAUSE_AT) and are continued after the
 * threshold.
 *
 * With no violation found, the test still fails unless the attacks are proven to have happened:
 * kills seen (the kernel no longer runs the process), stops seen (state T in /proc), some of them
 * of holders inside their sections and past the threshold, fills that hit ENOSPC, and writes the
 * fence refused. Every kind of operation must have run under faults and succeeded at least once.
 *
 * Size: DSS_FAULT_MS (ms of faults, default 30,000, or no limit when DSS_FAULT_OPS is set; 0: no
 * limit), DSS_FAULT_OPS (stop after this many operations; default none), DSS_FAULT_SLOTS (operations at once, default 6), DSS_FAULT_CHECK_MS
 * (faults between two checkpoints of the builds, default 300,000; 0: only at the end), DSS_FAULT_SEED
 * (replays a run's choices; the timing of a real machine varies), DSS_FAULT_STALE_MS, and
 * DSS_FAULT_REPORT (a file for the whole record as JSON; written anyway, in the temp directory, when
 * there are violations). `npm run test:faults` runs 10,000 operations.
 */
import { strict as assert } from 'assert';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { heldLeases } from '../../../src/core/lock/lock';
import { cleanup, isRoot, prng, report, run, sleep, tempDir } from '../../helpers';
import { whyNoSshfs } from '../../sshfs';
import { checkBuild, checkKept, checkSections, checkTokens, spanOfOp, tokensOfLog, type BuildFound, type DestroySeen, type RemovalSeen, type StagingPlan, type TokenSeen, type Violation } from '../../faults/check';
import { FencedLog, readLog, type LogEntry } from '../../faults/log';
import { Nemesis } from '../../faults/nemesis';
import { OP_KINDS, OpRunner, newOp, type Op, type OpKind } from '../../faults/ops';
import { Planner, artifactContent } from '../../faults/plan';
import { reportLines, violationCounts, writeRecord, type RunRecord } from '../../faults/report';
import { Checkpoints } from '../../faults/verdicts';
import { FaultWorld, LOG, STATIC } from '../../faults/world';

const envNumber = (name: string, fallback: number): number => {
  const v = process.env[name];
  return v === undefined || v === '' ? fallback : Number(v);
};

// ---------------------------------------------------------------------------------------------
// The checker itself: each verdict on made-up runs, so that none of them can pass for want of firing.

const entry = (at: number, tag: string, kind: LogEntry['kind'], token: string, fence: number, seq = 0): LogEntry => ({ at, tag, kind, token, fence, op: `o${token}`, seq });
const kinds = (vs: readonly Violation[]): string[] => vs.map((v) => v.kind).sort();

describe('fault checker: its verdicts on made-up runs', () => {
  it('sections: one unbroken run per lock instance among conflicting tags', () => {
    const clean = [entry(1, 'b/x', 'begin', 'A', 1), entry(2, 'b/x', 'write', 'A', 1, 1), entry(3, 'b/y', 'begin', 'C', 1), entry(4, 'b/x', 'end', 'A', 1, 2), entry(5, 'b/x', 'begin', 'B', 2)];
    assert.deepEqual(checkSections(clean), []);
    // B's begin accepted while A's section still had a write to come: both wrote as holders.
    const overlap = [entry(1, 'b/x', 'begin', 'A', 1), entry(2, 'b/x', 'begin', 'B', 2), entry(3, 'b/x', 'write', 'A', 1, 1)];
    assert.deepEqual(kinds(checkSections(overlap)), ['sections-overlap']);
    // Holding b covers b/x.
    const nested = [entry(1, 'b', 'begin', 'A', 1), entry(2, 'b/x', 'begin', 'B', 1), entry(3, 'b', 'end', 'A', 1, 1)];
    assert.deepEqual(kinds(checkSections(nested)), ['sections-overlap']);
    // A section cut off by a takeover, whose later writes were refused: nothing to report.
    const fenced = [entry(1, 'b/x', 'begin', 'A', 1), entry(2, 'b/x', 'begin', 'B', 2), entry(3, 'b/x', 'end', 'B', 2, 1)];
    assert.deepEqual(checkSections(fenced), []);
  });

  it('tokens: growing in the order sections began, never twice, told apart across a destroy', () => {
    const log = [entry(1, 't', 'begin', 'A', 1), entry(2, 't', 'begin', 'B', 2), entry(3, 't', 'begin', 'C', 2), entry(4, 't', 'begin', 'D', 1)];
    assert.deepEqual(kinds(checkTokens(tokensOfLog(log), [])), ['token-not-growing', 'token-not-growing', 'token-repeated', 'token-repeated']);
    // A destroy that may have run between 3 and 4 (it started when the log held 3 entries).
    const destroy: DestroySeen = { tag: 't', op: 'oX', ...spanOfOp(3, 3) };
    assert.deepEqual(kinds(checkTokens(tokensOfLog(log), [destroy])), ['token-not-growing', 'token-not-growing-after-destroy', 'token-repeated', 'token-repeated-after-destroy']);
    // A staging seen only as a span, with a token not above the begin surely before it.
    const staged: TokenSeen = { tag: 't', fence: 2, instance: 'oS', op: 'oS', exact: false, ...spanOfOp(2, 2) };
    assert.deepEqual(kinds(checkTokens([...tokensOfLog(log.slice(0, 2)), staged], [])), ['token-not-growing', 'token-repeated']);
    assert.deepEqual(checkTokens([...tokensOfLog(log.slice(0, 2)), { ...staged, fence: 3 }], []), []);
    assert.deepEqual(checkTokens(tokensOfLog([entry(1, 't', 'begin', 'A', 1), entry(2, 'u', 'begin', 'B', 1)]), []), []);
  });

  const plan = (op: string, kind: 'stage' | 'add', names: string[], end: StagingPlan['end'] = 'ok'): StagingPlan => ({ op, kind, tag: 't', names, end, span: spanOfOp(0, 1), startedMs: 0, endedMs: 1 });
  const plans = new Map([
    ['s1', plan('s1', 'stage', ['a', 'b'])],
    ['s2', plan('s2', 'stage', ['a', 'b'])],
    ['a1', plan('a1', 'add', ['x'])],
  ]);
  const build = (files: [string, string][], more: Partial<BuildFound> = {}): BuildFound => {
    const manifest = Object.fromEntries(files.map(([name, op]) => [name, { source: `/src/src-${op}/${name}`, fence: op === 'a1' ? 2 : 1 }]));
    return { tag: 't', files: files.map(([name, op]) => ({ name, op, namedAs: name })), manifest, manifestProblems: [], verify: { ok: true, problems: [] }, ...more };
  };

  it('builds: whole stagings, one new build, a manifest that matches, and verify agreeing', () => {
    assert.deepEqual(checkBuild(build([['a', 's1'], ['b', 's1'], ['x', 'a1']]), plans), []);
    assert.deepEqual(kinds(checkBuild(build([['a', 's1']]), plans)), ['partial-staging']);
    assert.deepEqual(kinds(checkBuild(build([['a', 's1'], ['b', 's2']]), plans)), ['mixed-build', 'partial-staging', 'partial-staging']);
    assert.deepEqual(kinds(checkBuild({ ...build([['a', 's1'], ['b', 's1']]), files: [{ name: 'a', op: 's1', namedAs: 'a' }, { name: 'b', op: 's1', namedAs: 'b' }, { name: 'z' }] }, plans)), ['foreign-file']);
    const damaged = build([['a', 's1'], ['b', 's1']], { manifestProblems: ['hash mismatch: a'] });
    assert.deepEqual(kinds(checkBuild(damaged, plans)), ['manifest-disagrees', 'verify-disagrees']);
    assert.deepEqual(kinds(checkBuild({ ...damaged, verify: { ok: false, problems: ['a'] } }, plans)), ['manifest-disagrees']);
    const other = build([['a', 's1'], ['b', 's1']]);
    (other.manifest as Record<string, { source: string }>).a.source = '/src/src-s2/a';
    assert.deepEqual(kinds(checkBuild(other, plans)), ['manifest-other-staging']);
    const lower = build([['a', 's1'], ['b', 's1'], ['x', 'a1']]);
    (lower.manifest as Record<string, { fence?: number }>).x.fence = 1;
    assert.deepEqual(kinds(checkBuild(lower, plans)), ['token-not-growing']);
    assert.deepEqual(kinds(checkBuild({ ...build([]), files: [{ name: 'a', op: 's1', namedAs: 'a' }], manifest: undefined }, plans)), ['manifest-missing', 'partial-staging']);
  });

  it('kept: a staging that succeeded is not lost, one that failed left nothing', () => {
    const ok = plan('s1', 'stage', ['a', 'b']);
    const failed = { ...plan('s2', 'stage', ['a', 'b'], 'failed'), code: 'EIO' };
    assert.deepEqual(kinds(checkKept([ok, failed], new Map([['s2', ['a']]]), [])), ['failed-staging-kept', 'staging-lost']);
    // A destroy that ended after the staging began may have removed it.
    const removal: RemovalSeen = { tag: 't', op: 'd1', ...spanOfOp(1, 2), startedMs: 0, endedMs: 5 };
    assert.deepEqual(checkKept([ok], new Map(), [removal]), []);
    assert.deepEqual(kinds(checkKept([ok], new Map(), [{ ...removal, endedMs: -1 }])), ['staging-lost']);
  });

  it('the fenced log: dense numbers from racing writers; refused once the work directory is moved away', async () => {
    const root = tempDir('dss-fault-log-');
    try {
      const logDir = path.join(root, 'log');
      fs.mkdirSync(logDir);
      const works = ['w1', 'w2', 'w3'].map((w) => path.join(root, 'lock', w));
      for (const w of works) fs.mkdirSync(w, { recursive: true });
      const writers = works.map(() => new FencedLog(logDir, logDir));
      const outcomes = await Promise.all(
        writers.flatMap((log, i) => Array.from({ length: 20 }, (_, seq) => log.append(works[i], { tag: 't', kind: 'write', token: `T${i}`, fence: i, op: `o${i}`, seq }))),
      );
      assert.ok(outcomes.every((o) => o.outcome === 'accepted'));
      const read = readLog(logDir);
      assert.deepEqual(read.gaps, []);
      assert.deepEqual(read.entries.map((e) => e.at), Array.from({ length: 60 }, (_, i) => i + 1));
      fs.renameSync(path.join(root, 'lock'), path.join(root, 'taken'));
      const refused = await writers[0].append(works[0], { tag: 't', kind: 'end', token: 'T0', fence: 0, op: 'o0', seq: 20 });
      assert.deepEqual(refused, { outcome: 'refused', step: 'create' });
      assert.equal(readLog(logDir).entries.length, 60);
    } finally {
      cleanup(root);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// The run.

const SEED = process.env.DSS_FAULT_SEED !== undefined && process.env.DSS_FAULT_SEED !== '' ? Number(process.env.DSS_FAULT_SEED) >>> 0 : crypto.randomBytes(4).readUInt32LE(0);
const MAX_OPS = envNumber('DSS_FAULT_OPS', 0);
// Short by default, for every run of the unit tests; a budget of operations alone runs to its end.
const RUN_MS = envNumber('DSS_FAULT_MS', MAX_OPS > 0 ? 0 : 30_000);
const SLOTS = envNumber('DSS_FAULT_SLOTS', 6);
const STALE_MS = envNumber('DSS_FAULT_STALE_MS', 4_000);
const CHECK_EVERY_MS = envNumber('DSS_FAULT_CHECK_MS', 300_000);
/** How many time budgets a run may take to see every attack happen (see `attacked`). */
const MAX_BUDGETS = 6;
const REFRESH_MS = 1_000;
const TAGS = ['board/b0', 'board/b1', 'board/b2'];
const PARENT = 'board';

async function whyNoDisk(): Promise<string | undefined> {
  if (!isRoot) return 'needs root (a loop-mounted ext4 image)';
  for (const tool of ['mkfs.ext4', 'fallocate', 'mount']) {
    const r = await run('sh', ['-c', `command -v ${tool}`]).catch(() => undefined);
    if (r?.code !== 0) return `${tool} is missing (e2fsprogs, util-linux)`;
  }
  return undefined;
}

/** One of each kind, alone: the setup works before anything is broken. */
const FIRST_ROUND: [OpKind, string][] = [
  ['stage', 'board/b1'],
  ['add', 'board/b1'],
  ['hold', 'board/b1'],
  ['lockcmd', 'board/b1'],
  ['destroy', 'board/b1'],
  ['hold', 'board/b2'],
  ['force', 'board/b2'],
  ['destroyw', 'board/b2'],
];

describe('randomized faults: two sshfs clients, kills, pauses past the stale threshold, a full disk', function () {
  this.timeout(RUN_MS > 0 ? MAX_BUDGETS * RUN_MS + 400_000 : 0);
  let base = '';
  let world: FaultWorld | undefined;
  let runner: OpRunner | undefined;

  before(async function () {
    const why = (await whyNoSshfs()) ?? (await whyNoDisk());
    if (why !== undefined) {
      console.log(`      skipped: the fault checker ${why}`);
      this.skip();
    }
  });

  after(async () => {
    for (const p of runner?.procs() ?? []) {
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    await Promise.all(heldLeases().map((l) => l.release().catch(() => undefined)));
    if (base !== '' && (world === undefined || (await world.close()))) cleanup(base);
  });

  it(`a budget is set`, () => {
    assert.ok(RUN_MS > 0 || MAX_OPS > 0, 'DSS_FAULT_MS=0 needs DSS_FAULT_OPS to end the run');
  });

  it(`operations on two clients under kills, pauses and a full disk: no overlap, tokens grow, builds whole, nothing outside touched, every command ends (seed ${SEED})`, async () => {
    base = fs.realpathSync(tempDir('dss-faults-'));
    for (const d of ['sources', 'reports']) fs.mkdirSync(path.join(base, d));
    world = await FaultWorld.make(base, PARENT);
    const w = world;
    w.watch();
    runner = new OpRunner({
      clients: w.clients,
      serverLog: w.serverLog,
      logName: LOG,
      staticName: STATIC,
      sourcesDir: path.join(base, 'sources'),
      reportDir: path.join(base, 'reports'),
      staleMs: STALE_MS,
      refreshMs: REFRESH_MS,
      deadlineMs: 60_000,
    });
    const r = runner;
    const ops: Op[] = [];

    // The first round also finds the protocol's named steps (DEVSERVER_STAGING_STEP_LOG), for the
    // nemesis to pause processes at. What fails there is reported with the rest, after the run.
    const alone: Violation[] = [];
    const stepLog = path.join(base, 'steps.log');
    process.env.DEVSERVER_STAGING_STEP_LOG = stepLog;
    try {
      for (const [i, [kind, tag]] of FIRST_ROUND.entries()) {
        const op = newOp(`w${i}`, kind, w.clients[i % 2], tag, 0);
        if (kind === 'hold' || kind === 'lockcmd' || kind === 'destroyw') op.section = { op: op.id, tag, writes: 1, gapsMs: [0, 0], ...(kind === 'destroyw' ? { destroy: true } : {}) };
        if (kind === 'stage') op.artifacts = { 'image.bin': 4096, 'kernel.bin': 2048, 'rootfs/part.bin': 1024 };
        if (kind === 'add') op.artifacts = { [`add-${op.id}.bin`]: 1024, [`extra/${op.id}.bin`]: 512 };
        ops.push(op);
        await r.run(op, artifactContent);
        // Nobody holds board/b2 when it is force-released; every other first operation succeeds.
        if (kind === 'force' ? op.code !== 'ENOTHELD' : op.end !== 'ok') {
          alone.push({ check: 0, kind: 'failed-alone', detail: `the first ${kind} (op ${op.id}, client ${op.client.name}) ended ${op.end}, exit ${op.exitCode}, ${op.code ?? 'no code'}: ${(op.stderr + op.stdout).trim().slice(0, 600)}` });
        }
      }
    } finally {
      delete process.env.DEVSERVER_STAGING_STEP_LOG;
    }
    const steps = fs.existsSync(stepLog) ? [...new Set(fs.readFileSync(stepLog, 'utf8').split('\n').filter((s) => s !== ''))] : [];

    // Two streams: what the nemesis draws (timed by the machine) does not shift the operations' choices.
    const planner = new Planner(prng(SEED), { clients: w.clients, tags: TAGS, parent: PARENT, staleMs: STALE_MS, steps, exists: (tag) => fs.existsSync(path.join(w.serverStatic, tag)) });
    const nemesis = new Nemesis(prng(SEED ^ 0x9e3779b9), r, w.disk, { staleMs: STALE_MS, everyMs: 1_200, weights: { kill: 35, stop: 45, fill: 20 }, serverStatic: w.serverStatic, tags: TAGS, commitShare: 0.8 });
    report(
      `seed ${SEED} (DSS_FAULT_SEED=${SEED} replays the choices); ${RUN_MS > 0 ? `${RUN_MS} ms` : 'no time limit'}${MAX_OPS > 0 ? `, ${MAX_OPS} operations` : ''}; ${SLOTS} at once; ` +
        `stale ${STALE_MS} ms, heartbeat ${REFRESH_MS} ms; named steps to pause at: ${steps.length > 0 ? steps.join(' ') : 'none (the core names none)'}`,
    );

    const t0 = nemesis.t0;
    const faulted = (): number => ops.length - FIRST_ROUND.length;
    let faultsMs = 0;
    // A run on a time budget goes on, up to `MAX_BUDGETS` budgets, until every attack it names has
    // happened and every kind of operation has run under faults and succeeded once: a short run on
    // a busy machine proves nothing if none did. (A holder taken over in its section and then
    // refused by the fence comes about once in 70 operations, so three budgets of a loaded machine
    // sometimes saw none; the planner now and then plans no destroy in one budget.)
    const attacked = (): boolean => {
      const n = nemesis.summary();
      const underFaults = ops.slice(FIRST_ROUND.length);
      const everyKindOk = OP_KINDS.every((kind) => underFaults.some((o) => o.kind === kind) && ops.some((o) => o.kind === kind && o.end === 'ok'));
      return n.killsSeen > 0 && n.stopsInSection > 0 && n.stopsPastStale > 0 && n.fills > 0 && ops.some((o) => o.refused > 0) && everyKindOk;
    };
    const timeUp = (spent: number): boolean => RUN_MS > 0 && spent >= RUN_MS && (attacked() || spent >= MAX_BUDGETS * RUN_MS);
    const done = (): boolean => timeUp(faultsMs) || (MAX_OPS > 0 && faulted() >= MAX_OPS);
    const checkpoints = new Checkpoints(w, TAGS, PARENT, { staleMs: STALE_MS, refreshMs: REFRESH_MS });
    let lastNote = performance.now();
    // Stretches of faults, each ended by a checkpoint of the builds once everything has stopped.
    while (!done()) {
      const stretchStart = performance.now();
      const stretchOver = (): boolean => {
        const spent = faultsMs + performance.now() - stretchStart;
        return timeUp(spent) || (MAX_OPS > 0 && faulted() >= MAX_OPS) || (CHECK_EVERY_MS > 0 && performance.now() - stretchStart >= CHECK_EVERY_MS);
      };
      nemesis.start();
      const slots = Array.from({ length: SLOTS }, async () => {
        while (!stretchOver()) {
          const op = planner.next(nemesis.targets());
          ops.push(op);
          await r.run(op, artifactContent);
          await checkpoints.sample(ops);
          if (performance.now() - lastNote > 60_000) {
            lastNote = performance.now();
            report(`… ${faulted()} operations after ${Math.round((faultsMs + lastNote - stretchStart) / 1000)} s of faults; log ${r.logNow()} entries; ${checkpoints.violations.length} violations in ${checkpoints.count} checkpoints so far`);
          }
        }
      });
      // Free builds are judged all along, whenever one can be read whole: after each operation,
      // and in between.
      while (!stretchOver()) {
        await checkpoints.sample(ops);
        await sleep(1_000);
      }
      await nemesis.stop();
      await Promise.all(slots);
      await nemesis.end();
      faultsMs += performance.now() - stretchStart;
      await checkpoints.take(ops);
    }
    await w.unwatch();

    const { violations: found, logEntries } = checkpoints.finish(ops);
    const violations = [...alone, ...found];
    const record: RunRecord = { seed: SEED, ops, t0, faultsMs, checkpoints: checkpoints.count, samples: checkpoints.samples, logEntries, nemesis: { actions: nemesis.actions, summary: nemesis.summary() }, crashes: w.crashes, violations };
    for (const line of reportLines(record)) report(line);
    const reportFile = process.env.DSS_FAULT_REPORT ?? (violations.length > 0 ? path.join(os.tmpdir(), `dss-faults-${SEED}-${process.pid}.json`) : undefined);
    if (reportFile !== undefined) {
      writeRecord(reportFile, record, { runMs: RUN_MS, maxOps: MAX_OPS, slots: SLOTS, staleMs: STALE_MS, refreshMs: REFRESH_MS });
      report(`  the whole record: ${reportFile}`);
    }

    assert.equal(violations.length, 0, `${violations.length} violations (seed ${SEED}): ${violationCounts(violations).join('; ')}; each kind is shown above`);
    // None found: that must be because none happened. The operations ran, each kind succeeded at
    // least once (in the first round if not later), and every attack really happened.
    const nem = record.nemesis.summary;
    assert.ok(faulted() >= 3 * SLOTS, `only ${faulted()} operations ran under faults`);
    for (const kind of OP_KINDS) {
      const list = ops.filter((o) => o.kind === kind);
      assert.ok(list.length - FIRST_ROUND.filter(([k]) => k === kind).length > 0, `no ${kind} ran under faults`);
      assert.ok(list.some((o) => o.end === 'ok'), `no ${kind} succeeded in ${list.length}`);
    }
    assert.ok(nem.kills > 0 && nem.killsSeen > 0, `no process was seen killed: ${JSON.stringify(nem)}`);
    assert.equal(nem.killsSeen + nem.killsRaced, nem.kills, 'a process SIGKILLed still ran');
    assert.ok(nem.stopsSeenT > 0 && nem.stopsInSection > 0 && nem.stopsPastStale > 0, `no holder was seen stopped (state T) inside its section past the stale threshold: ${JSON.stringify(nem)}`);
    assert.ok(nem.fills > 0 && nem.fillsEnospc === nem.fills, `the disk was not filled to ENOSPC each time: ${JSON.stringify(nem)}`);
    assert.ok(ops.some((o) => o.refused > 0), 'no write was refused by the fence: no holder stopped in its section was taken over and wrote after');
  });
});
