/**
 * Undoing a cut-off commit by name (src/core/lock/commit.ts), on one host:
 * - a stager stopped and SIGKILLed at every named step of its commit: the next holder (another
 *   process) finds exactly the old build before the commit point and exactly the new one after it;
 * - an undo cut off itself at each of its own steps, the next holder's and the stager's own (a
 *   staging refused by its last check), is finished by whoever comes next;
 * - a cut-off commit under a lock that is foreign (its record no longer names its work directory)
 *   is kept in a fenced directory when that lock is taken apart, and undone;
 * - a commit record that was tampered with (`..`, absolute places, the lock's own name, links on
 *   the way or in place) never makes an undo act outside the area; one that is not a record this
 *   tool writes keeps the area locked (EUNFINISHED) with everything kept, until a person removes it.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { undoCommit, undoFencedDir } from '../../../src/core/lock/commit';
import { openDir } from '../../../src/core/fs/anchored';
import { StagingError } from '../../../src/core/base/errors';
import { acquire } from '../../../src/core/lock/lock';
import { COMMIT_FILE, FENCE_FILE, LOCK_FENCED_PREFIX, LOCK_NAME } from '../../../src/core/base/protocol';
import { verify } from '../../../src/core/verify';
import { areaJunk, changes, fingerprint, plantCanaries } from '../../attack';
import { type Builds, areaBytes, instantsOf, killStopped, makeBuilds, runCli, startCli, stopped, whichBuild, writeRefusedAddition } from '../../commit';
import { cleanup, killAll, rejectsWith, report, tempDir } from '../../helpers';

describe('commit: undone by name, resumed by whoever comes next', function () {
  this.timeout(300_000);
  let root = '';
  let staticDir = '';
  let builds: Builds;
  /** An addition refused by the commit's last check: the stager undoes its own commit. */
  let refused = '';
  let serial = 0;

  before(async () => {
    root = tempDir('dss-commit-undo-');
    staticDir = path.join(root, 'static');
    fs.mkdirSync(staticDir);
    builds = makeBuilds(root);
    refused = path.join(root, 'refused.tar');
    await writeRefusedAddition(refused);
  });
  after(() => root && cleanup(root));
  afterEach(() => killAll());

  /** A fresh area holding the old build. */
  async function oldBuild(): Promise<string> {
    const tag = `b/t${serial++}`;
    const r = await runCli(['stage', tag, builds.old], { staticDir });
    assert.equal(r.code, 0, r.stderr);
    return tag;
  }

  const stageArgs = (tag: string, source: string): string[] => ['stage', tag, source, '--add', '--overwrite'];

  /** The steps one run passes, by name and passage. */
  async function instants(args: string[], prefix: string, expectCode: number): Promise<string[]> {
    const log = path.join(root, `steps.${serial++}.log`);
    const r = await runCli(args, { staticDir, stepLog: log });
    assert.equal(r.code, expectCode, r.stderr);
    return instantsOf(log, prefix);
  }

  /** The next holder, in another process: takes the lock (undoing first) and lets it go. */
  async function nextHolder(tag: string, pauseAt?: string): Promise<{ code: number | null; stderr: string }> {
    return runCli(['lock', tag, '--', 'true'], { staticDir, ...(pauseAt !== undefined ? { pauseAt } : {}) });
  }

  /** The area holds exactly `which` build, verifies, and nothing of the lock protocol is left but the counter. */
  async function assertBuild(tag: string, which: 'old' | 'new', what: string): Promise<void> {
    const area = path.join(staticDir, tag);
    assert.equal(whichBuild(area, builds), which, what);
    const verdict = await verify(staticDir, tag);
    assert.ok(verdict.ok, `${what}: verify: ${JSON.stringify(verdict.problems)}`);
    assert.deepEqual(areaJunk(area), [], `${what}: litter left`);
    assert.equal(fs.existsSync(path.join(area, LOCK_NAME)), false, `${what}: a lock left`);
  }

  it('a stager killed at every step of its commit: the next holder finds the old build before the commit point, the new one after', async () => {
    const all = await instants(stageArgs(await oldBuild(), builds.addition), 'commit.', 0);
    const commit = all.filter((i) => !i.startsWith('commit.undo.'));
    // The record, two new directories, a file added, two replaced, the manifest and timestamp replaced, the check, the commit point.
    assert.equal(commit.length, 25, commit.join(' '));
    const seen: Record<string, number> = {};
    for (const at of commit) {
      const tag = await oldBuild();
      const stager = startCli(stageArgs(tag, builds.addition), { staticDir, pauseAt: at });
      await stopped(stager, at);
      await killStopped(stager, at);
      const next = await nextHolder(tag);
      assert.equal(next.code, 0, `${at}: ${next.stderr}`);
      const expected = at.startsWith('commit.committed') ? 'new' : 'old';
      await assertBuild(tag, expected, `killed at ${at}`);
      seen[expected] = (seen[expected] ?? 0) + 1;
    }
    report(`stager killed at ${commit.length} steps of its commit: ${JSON.stringify(seen)}`);
    assert.deepEqual(seen, { old: 24, new: 1 });
  });

  it('the next holder killed at every step of its undo: the one after it finishes the undo', async () => {
    // Everything placed, checked, not committed: the undo has every kind of step to do.
    const cut = 'commit.checked#1';
    const cutOff = async (): Promise<string> => {
      const tag = await oldBuild();
      const stager = startCli(stageArgs(tag, builds.addition), { staticDir, pauseAt: cut });
      await stopped(stager, cut);
      await killStopped(stager, cut);
      return tag;
    };
    const log = path.join(root, `undo-steps.${serial++}.log`);
    const probe = await cutOff();
    const r = await runCli(['lock', probe, '--', 'true'], { staticDir, stepLog: log });
    assert.equal(r.code, 0, r.stderr);
    await assertBuild(probe, 'old', 'undone without a kill');
    const undo = instantsOf(log, 'commit.undo.');
    // 7 places taken back, 4 asides put back, begin, done, the record cleared.
    assert.equal(undo.length, 3 + 2 * 7 + 2 * 4, undo.join(' '));
    for (const at of undo) {
      const tag = await cutOff();
      const undoer = startCli(['lock', tag, '--', 'true'], { staticDir, pauseAt: at });
      await stopped(undoer, at);
      await killStopped(undoer, at);
      const next = await nextHolder(tag);
      assert.equal(next.code, 0, `undo killed at ${at}: ${next.stderr}`);
      await assertBuild(tag, 'old', `undo killed at ${at}`);
    }
    report(`the next holder's undo killed at each of its ${undo.length} steps, then finished by the one after`);
  });

  it('a stager killed mid-commit under a lock without its work directory’s token (an older client’s): taken apart into a fenced directory through its descriptor, and undone', async () => {
    const tag = await oldBuild();
    const cut = 'commit.checked#1';
    const stager = startCli(stageArgs(tag, builds.addition), { staticDir, pauseAt: cut });
    await stopped(stager, cut);
    await killStopped(stager, cut);
    // The record no longer names the work directory: the lock is foreign, taken apart as one.
    const record = path.join(staticDir, tag, LOCK_NAME, 'owner.json');
    fs.writeFileSync(record, JSON.stringify({ ...(JSON.parse(fs.readFileSync(record, 'utf8')) as object), token: 'older-client' }));
    const log = path.join(root, `foreign-steps.${serial++}.log`);
    const next = await runCli(['lock', tag, '--', 'true'], { staticDir, stepLog: log });
    assert.equal(next.code, 0, next.stderr);
    const passed = fs.readFileSync(log, 'utf8').split('\n');
    assert.ok(passed.includes('takeover.foreignChecked') && passed.includes('commit.undo.done'), `taken over as a foreign lock, and its commit undone: ${passed.join(' ')}`);
    await assertBuild(tag, 'old', 'the foreign lock’s commit undone');
  });

  it('a stager whose last check fails undoes its own commit; killed at every step of that undo, the next holder finishes it', async () => {
    const tag0 = await oldBuild();
    const all = await instants(stageArgs(tag0, refused), 'commit.undo.', 1);
    await assertBuild(tag0, 'old', 'refused by its check');
    // A directory moved in whole, a file added, the two replaced and the manifest and timestamp: 6
    // places taken back and 4 asides put back; begin, done, the record cleared.
    assert.equal(all.length, 3 + 2 * 6 + 2 * 4, all.join(' '));
    for (const at of all) {
      const tag = await oldBuild();
      const stager = startCli(stageArgs(tag, refused), { staticDir, pauseAt: at });
      await stopped(stager, at);
      await killStopped(stager, at);
      const next = await nextHolder(tag);
      assert.equal(next.code, 0, `own undo killed at ${at}: ${next.stderr}`);
      await assertBuild(tag, 'old', `own undo killed at ${at}`);
    }
    report(`the stager's own undo killed at each of its ${all.length} steps, then finished by the next holder`);
  });

  it('undoing twice, or a record of steps that never ran, changes nothing more', async () => {
    const tag = await oldBuild();
    const area = path.join(staticDir, tag);
    const stager = startCli(stageArgs(tag, builds.addition), { staticDir, pauseAt: 'commit.placed#4' });
    await stopped(stager, 'commit.placed#4');
    await killStopped(stager, 'commit.placed#4');
    const lock = path.join(area, LOCK_NAME);
    const work = fs.readdirSync(lock).find((n) => n.startsWith('work.'))!;
    const record = (JSON.parse(fs.readFileSync(path.join(lock, work, COMMIT_FILE), 'utf8')) as { steps: { to: string; from: string; aside?: string }[] }).steps;
    // Moved out of the way as a taker would (the lock is dead), then undone directly, twice.
    const fenced = `${LOCK_FENCED_PREFIX}test`;
    fs.renameSync(lock, path.join(area, fenced));
    const dir = await openDir(area, false);
    try {
      const workDir = await openDir(path.join(area, fenced, work), false);
      try {
        for (let i = 0; i < 2; i++) {
          const undone = await undoCommit(dir, workDir, record);
          assert.equal(undone.complete, true, `undo ${i + 1}`);
          assert.equal(whichBuild(area, builds), 'old', `after undo ${i + 1}`);
        }
      } finally {
        workDir.close();
      }
      // The record is gone once the whole fenced directory is undone; after that it holds nothing to undo.
      assert.equal((await undoFencedDir(dir, fenced)).complete, true);
      assert.equal(fs.existsSync(path.join(area, fenced, work, COMMIT_FILE)), false, 'the record is removed once undone');
      assert.equal((await undoFencedDir(dir, fenced)).complete, true);
    } finally {
      dir.close();
    }
    assert.equal(whichBuild(area, builds), 'old');
  });

  it('a record of the first version, half undone by the undo of that version (which took entries back as undone.<i>), is finished without taking back what it put back', async () => {
    const tag = await oldBuild();
    const area = path.join(staticDir, tag);
    const before = areaBytes(area);
    const work = path.join(area, `${LOCK_FENCED_PREFIX}v1`, 'work.t');
    fs.mkdirSync(work, { recursive: true });
    // Step 0 replaced top.txt and was taken back and its aside put back; step 1 placed newfile.txt,
    // not yet taken back.
    fs.writeFileSync(path.join(work, 'undone.0'), 'top, new\n');
    fs.writeFileSync(path.join(area, 'newfile.txt'), 'new\n');
    const steps = [
      { to: 'top.txt', from: 'part.a', ino: 11, aside: 'aside.0' },
      { to: 'newfile.txt', from: 'part.b', ino: 12 },
    ];
    fs.writeFileSync(path.join(work, COMMIT_FILE), JSON.stringify({ version: 1, steps }));
    const lease = await acquire(staticDir, tag, { createOnce: false });
    await lease.release();
    assert.deepEqual(areaBytes(area), before);
    assert.equal(whichBuild(area, builds), 'old');
  });

  it('a tampered record never acts outside the area; one this tool would not write keeps the area locked and everything kept', async () => {
    const outside = path.join(root, 'outside');
    plantCanaries(outside, { 'victim.txt': 'outside, named by a record\n', 'dir/victim.txt': 'outside, below a link\n' });
    const before = fingerprint(outside);
    const cases: { name: string; steps: unknown; aside?: boolean; link?: 'parent' | 'place' | 'fenced' | 'work'; complete: boolean }[] = [
      { name: 'a place with ..', steps: [{ to: '../../../outside/victim.txt', from: 'gone' }], complete: false },
      { name: 'an absolute place', steps: [{ to: `${outside}/victim.txt`, from: 'gone' }], complete: false },
      { name: 'a from with ..', steps: [{ to: 'top.txt', from: '../../../../outside/victim.txt' }], complete: false },
      { name: 'an aside that is a path', steps: [{ to: 'top.txt', from: 'gone', aside: '../x' }], complete: false },
      { name: 'the record as its own aside', steps: [{ to: 'top.txt', from: 'gone', aside: COMMIT_FILE }], complete: false },
      { name: 'the lock as a place', steps: [{ to: LOCK_NAME, from: 'gone' }], complete: false },
      { name: 'the counter as a place', steps: [{ to: FENCE_FILE, from: 'gone' }], complete: false },
      { name: 'not a record', steps: 'rm -rf /', complete: false },
      // Well formed, through a link planted in the area: nothing is taken from beyond it, and
      // what should go back through it stays kept.
      { name: 'a directory on the way that is a link', steps: [{ to: 'sub/victim.txt', from: 'gone' }], link: 'parent', complete: true },
      { name: 'an aside to put back through a link', steps: [{ to: 'sub/victim.txt', from: 'gone', aside: 'aside.0' }], aside: true, link: 'parent', complete: false },
      // A link in the place itself is what is taken back (the link, not what it leads to).
      { name: 'a link in the place', steps: [{ to: 'victim.txt', from: 'gone' }], link: 'place', complete: true },
      // A fenced directory, or a work directory in it, that is a link: not ours, never entered.
      { name: 'the fenced directory a link', steps: [{ to: 'top.txt', from: 'gone' }], link: 'fenced', complete: true },
      { name: 'a work directory a link', steps: [{ to: 'top.txt', from: 'gone' }], link: 'work', complete: true },
    ];
    const outcomes: string[] = [];
    for (const c of cases) {
      const tag = await oldBuild();
      const area = path.join(staticDir, tag);
      const fenced = path.join(area, `${LOCK_FENCED_PREFIX}tampered`);
      const holder = path.join(root, `holder-${serial++}`);
      const work = path.join(c.link === 'fenced' ? holder : fenced, 'work.t');
      fs.mkdirSync(c.link === 'work' ? holder : work, { recursive: true });
      if (c.link === 'work') fs.mkdirSync(path.join(holder, 'work.t'));
      const workDir = c.link === 'work' ? path.join(holder, 'work.t') : work;
      fs.writeFileSync(path.join(workDir, COMMIT_FILE), typeof c.steps === 'string' ? c.steps : JSON.stringify({ version: 2, steps: c.steps }));
      if (c.aside === true) fs.writeFileSync(path.join(workDir, 'aside.0'), 'set aside\n');
      if (c.link === 'parent') fs.symlinkSync(path.join(outside, 'dir'), path.join(area, 'sub'));
      if (c.link === 'place') fs.symlinkSync(path.join(outside, 'victim.txt'), path.join(area, 'victim.txt'));
      if (c.link === 'fenced') fs.symlinkSync(holder, fenced);
      if (c.link === 'work') {
        fs.mkdirSync(fenced, { recursive: true });
        fs.symlinkSync(path.join(holder, 'work.t'), path.join(fenced, 'work.t'));
      }
      // The area directory's own times move with every lock taken in it: what is inside it counts.
      const inside = (): Map<string, string> => {
        const m = fingerprint(area);
        m.delete('.');
        return m;
      };
      const areaBefore = inside();
      const bytesBefore = areaBytes(area);
      const outcome = await acquire(staticDir, tag, { createOnce: false }).then(
        async (lease) => {
          await lease.release();
          return 'acquired';
        },
        (err: unknown) => (err instanceof StagingError ? err.code : String(err)),
      );
      outcomes.push(`${c.name}: ${outcome}`);
      assert.deepEqual(changes(outside, before, fingerprint(outside)), [], `${c.name}: changed outside the area`);
      if (c.complete) {
        assert.equal(outcome, 'acquired', c.name);
        assert.equal(fs.existsSync(fenced), false, `${c.name}: the fenced directory is removed`);
        if (c.link === 'place') assert.equal(fs.existsSync(path.join(area, 'victim.txt')), false, 'the link was taken back');
      } else {
        assert.equal(outcome, 'EUNFINISHED', c.name);
        // Nothing in the area changed but the fencing counter, which the refused holder advanced.
        assert.deepEqual(
          changes(area, areaBefore, inside()).filter((p) => !p.includes(FENCE_FILE)),
          [],
          `${c.name}: the refused acquire changed the area`,
        );
        assert.deepEqual(areaBytes(area), bytesBefore);
        if (c.aside === true) assert.equal(fs.readFileSync(path.join(workDir, 'aside.0'), 'utf8'), 'set aside\n', `${c.name}: the aside is kept`);
        // Once a person has looked and removed the record, the area is usable again.
        fs.unlinkSync(path.join(workDir, COMMIT_FILE));
        const lease = await acquire(staticDir, tag, { createOnce: false });
        await lease.release();
      }
      if (c.link === 'parent') fs.unlinkSync(path.join(area, 'sub'));
      assert.deepEqual(changes(outside, before, fingerprint(outside)), [], `${c.name}: changed outside the area`);
    }
    report(outcomes.join('; '));
    const message = await rejectsWith(
      (async () => {
        const tag = await oldBuild();
        const work = path.join(staticDir, tag, `${LOCK_FENCED_PREFIX}x`, 'work.t');
        fs.mkdirSync(work, { recursive: true });
        fs.writeFileSync(path.join(work, COMMIT_FILE), '{');
        await acquire(staticDir, tag, { createOnce: false });
      })(),
      'EUNFINISHED',
    );
    assert.match(message.message, /could not be undone yet: its record .* is not one this tool writes/);
    assert.match(message.message, /Nothing is lost/);
  });
});
