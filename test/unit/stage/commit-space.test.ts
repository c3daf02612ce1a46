/**
 * A full disk in the middle of a commit, and in the middle of its undo, on a small ext4 image
 * (where, unlike tmpfs, even a rename back into a directory can need a new block). The stager is
 * stopped at a named step (`DEVSERVER_STAGING_PAUSE_AT`), the disk is filled (fallocate, then
 * writes until ENOSPC) and so is the free room of the work directory's own blocks (empty files
 * until ENOSPC), so that the next name moved into the work directory needs a block that is not
 * there; then the stager continues. Whatever step it was:
 * - the staging stands whole, or fails and is undone whole, or fails with EUNFINISHED saying why
 *   and that nothing is lost: then the record and everything set aside are kept (the lock moved
 *   aside as `devserver.lock.fenced.*`, or left in place), and every byte of the old build is
 *   still on the disk;
 * - once space is freed, the next holder finishes the undo: exactly the old build, which verifies.
 * The same for the stager's own undo (a staging refused by its last check) stopped at each of its
 * steps, and for the next holder's undo of a cut-off commit: its acquire fails with EUNFINISHED,
 * changing nothing, until space is freed. With the area's own directory full too, the lock cannot
 * be moved aside when it is let go of: it stays in place, whole, and the next holder finishes.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { COMMIT_FILE, FENCE_FILE, LOCK_FENCED_PREFIX, LOCK_NAME } from '../../../src/core/base/protocol';
import { verify } from '../../../src/core/verify';
import { areaJunk, changes, fingerprint, sha256 } from '../../attack';
import { type Builds, type Running, instantsOf, killStopped, makeBuilds, runCli, startCli, stopped, whichBuild, writeRefusedAddition } from '../../commit';
import { SmallDisk } from '../../disk';
import { cleanup, isRoot, killAll, report, tempDir } from '../../helpers';

describe('commit: a full disk during the commit and during its undo (ext4)', function () {
  this.timeout(600_000);
  let base = '';
  let small: SmallDisk | undefined;
  let disk = '';
  let staticDir = '';
  let builds: Builds;
  let refused = '';
  let serial = 0;

  before(async function () {
    if (!isRoot) {
      console.log('      skipped: mounting an ext4 image needs root');
      this.skip();
    }
    base = tempDir('dss-commit-space-');
    small = await SmallDisk.inside(base, { sizeMiB: 24 });
    disk = small.dir;
    staticDir = path.join(disk, 'static');
    fs.mkdirSync(staticDir);
    builds = makeBuilds(base);
    refused = path.join(base, 'refused.tar');
    await writeRefusedAddition(refused);
  });
  after(async () => {
    await killAll();
    if (small !== undefined && !(await small.unmount())) return;
    if (base !== '') cleanup(base);
  });

  /** Fills the disk to its last block. */
  async function fillDisk(): Promise<void> {
    assert.ok((await small!.fill()).enospc, 'the disk filled');
  }

  const fillEntries = (dir: string): number => small!.fillEntries(dir);
  const freeSpace = (): void => small!.free();

  /** A fresh area holding the old build. */
  async function oldBuild(): Promise<string> {
    const tag = `b/t${serial++}`;
    const r = await runCli(['stage', tag, builds.old], { staticDir });
    assert.equal(r.code, 0, r.stderr);
    return tag;
  }

  /** The work directory of the lock in `area` (the stopped process's). */
  function workDirIn(area: string): string {
    const lock = path.join(area, LOCK_NAME);
    const work = fs.readdirSync(lock).find((n) => n.startsWith('work.'));
    assert.ok(work !== undefined, `no work directory in ${lock}`);
    return path.join(lock, work);
  }

  /** Where an unfinished commit is kept now: the lock in place or moved aside as fenced, holding the record. */
  function keptCommit(area: string): string | undefined {
    for (const name of fs.readdirSync(area)) {
      if (name !== LOCK_NAME && !name.startsWith(LOCK_FENCED_PREFIX)) continue;
      for (const dir of [path.join(area, name), ...fs.readdirSync(path.join(area, name)).filter((n) => n.startsWith('work.')).map((n) => path.join(area, name, n))]) {
        if (fs.existsSync(path.join(dir, COMMIT_FILE))) return dir;
      }
    }
    return undefined;
  }

  /** Every byte of the old build is still somewhere in the area (in place, or set aside in what is kept). */
  function nothingLost(area: string, what: string): void {
    const found = new Set<string>();
    const walk = (d: string): void => {
      for (const name of fs.readdirSync(d)) {
        const p = path.join(d, name);
        const st = fs.lstatSync(p);
        if (st.isDirectory()) walk(p);
        else if (st.isSymbolicLink()) found.add(`-> ${fs.readlinkSync(p)}`);
        else if (st.isFile()) found.add(sha256(fs.readFileSync(p)));
      }
    };
    walk(area);
    for (const [name, bytes] of builds.oldBytes) assert.ok(found.has(bytes), `${what}: ${name} of the old build is nowhere in ${area}`);
  }

  /** The area, once the next holder took and let go of its lock: exactly the old build, verified, no litter. */
  async function finishedOld(tag: string, what: string): Promise<void> {
    const area = path.join(staticDir, tag);
    assert.equal(whichBuild(area, builds), 'old', what);
    const verdict = await verify(staticDir, tag);
    assert.ok(verdict.ok, `${what}: verify: ${JSON.stringify(verdict.problems)}`);
    assert.deepEqual(areaJunk(area), [], `${what}: litter left`);
    assert.equal(fs.existsSync(path.join(area, LOCK_NAME)), false, `${what}: a lock left`);
  }

  const stageArgs = (tag: string, source: string): string[] => ['stage', tag, source, '--add', '--overwrite'];

  /**
   * The stager, stopped at `at`, continues on a full disk. Returns how it ended: 'new' (the staging
   * stands), 'undone' (it failed and was undone), 'unfinished' (EUNFINISHED, with all kept); and
   * leaves the area with the old build or the new one, space freed.
   */
  async function onFullDisk(source: string, at: string): Promise<'new' | 'undone' | 'unfinished'> {
    const tag = await oldBuild();
    const area = path.join(staticDir, tag);
    const stager = startCli(stageArgs(tag, source), { staticDir, pauseAt: at });
    await stopped(stager, at);
    await fillDisk();
    fillEntries(workDirIn(area));
    const end = await continued(stager);
    try {
      if (end.code === 0) {
        assert.equal(whichBuild(area, builds), 'new', `${at}: staged, but ${stager.stderr}`);
        return 'new';
      }
      assert.equal(end.code, 1, `${at}: ${stager.stderr}`);
      if (!/EUNFINISHED|could not be undone yet/.test(stager.stderr)) {
        assert.equal(whichBuild(area, builds), 'old', `${at}: failed (${stager.stderr.trim()}) and undone, but`);
        assert.equal(keptCommit(area), undefined, `${at}: undone, but a commit record kept`);
        return 'undone';
      }
      assert.match(stager.stderr, /failed .* and could not be undone yet: could not move .*no space left on device/is, at);
      assert.match(stager.stderr, /Nothing is lost/, at);
      assert.match(stager.stderr, /the next holder of the area finishes undoing it once the cause is gone \(a full disk: once space is freed\)/, at);
      assert.ok(keptCommit(area) !== undefined, `${at}: the commit record is not kept:\n${fs.readdirSync(area).join(' ')}`);
      nothingLost(area, at);
      return 'unfinished';
    } finally {
      freeSpace();
      const next = await runCli(['lock', tag, '--', 'true'], { staticDir });
      assert.equal(next.code, 0, `${at}: the next holder, once space was freed: ${next.stderr}`);
    }
  }

  async function continued(r: Running): Promise<{ code: number | null }> {
    r.child.kill('SIGCONT');
    return r.done;
  }

  /** The instants with `prefix` one run of the stager passes. */
  async function instants(source: string, prefix: string, expectCode: number): Promise<string[]> {
    const log = path.join(base, `steps.${serial++}.log`);
    const r = await runCli(stageArgs(await oldBuild(), source), { staticDir, stepLog: log });
    assert.equal(r.code, expectCode, r.stderr);
    return instantsOf(log, prefix);
  }

  it('the disk full from each step of the commit on: the staging stands whole, or is undone whole, or is kept unfinished and finished by the next holder', async () => {
    const all = (await instants(builds.addition, 'commit.', 0)).filter((i) => !i.startsWith('commit.undo.'));
    assert.equal(all.length, 25, all.join(' '));
    const seen: Record<string, string[]> = {};
    for (const at of all) {
      const outcome = await onFullDisk(builds.addition, at);
      (seen[outcome] ??= []).push(at);
      const tag = `b/t${serial - 1}`;
      if (outcome === 'new') assert.equal(whichBuild(path.join(staticDir, tag), builds), 'new');
      else await finishedOld(tag, `${at}, then the next holder`);
      fs.rmSync(path.join(staticDir, tag), { recursive: true });
    }
    report(`disk full from each of ${all.length} commit steps: ${Object.entries(seen).map(([k, v]) => `${k} ${v.length}`).join(', ')}; unfinished at ${(seen.unfinished ?? []).join(' ')}`);
    assert.equal(Object.values(seen).flat().length, 25, 'every trial ran');
    // Right before a set-aside into the full work directory, the commit fails there, and its undo
    // fails at once too: putting back what it placed needs room in the work directory.
    for (const at of all.filter((i) => i.startsWith('commit.aside#'))) assert.ok(seen.unfinished?.includes(at), `${at}: not unfinished`);
  });

  it('the disk full from each step of the stager’s own undo on: kept unfinished when a move fails, finished by the next holder', async () => {
    const all = await instants(refused, 'commit.undo.', 1);
    assert.equal(all.length, 3 + 2 * 6 + 2 * 4, all.join(' '));
    const seen: Record<string, string[]> = {};
    for (const at of all) {
      const outcome = await onFullDisk(refused, at);
      (seen[outcome] ??= []).push(at);
      const tag = `b/t${serial - 1}`;
      assert.notEqual(outcome, 'new', `${at}: refused, yet staged`);
      await finishedOld(tag, `${at}, then the next holder`);
      fs.rmSync(path.join(staticDir, tag), { recursive: true });
    }
    report(`disk full from each of ${all.length} steps of the stager's own undo: ${Object.entries(seen).map(([k, v]) => `${k} ${v.length}`).join(', ')}`);
    assert.equal(Object.values(seen).flat().length, all.length, 'every trial ran');
    // Right before taking something back into the full work directory, the undo stops there.
    for (const at of all.filter((i) => i.startsWith('commit.undo.take#'))) assert.ok(seen.unfinished?.includes(at), `${at}: not unfinished`);
  });

  it('the disk full and the area’s own directory too: the lock cannot even be moved aside, so it stays in place, and the next holder finishes the undo', async () => {
    const tag = await oldBuild();
    const area = path.join(staticDir, tag);
    const at = 'commit.aside#1';
    const stager = startCli(stageArgs(tag, builds.addition), { staticDir, pauseAt: at });
    await stopped(stager, at);
    await fillDisk();
    fillEntries(workDirIn(area));
    const junk = fillEntries(area);
    const end = await continued(stager);
    assert.equal(end.code, 1, stager.stderr);
    assert.match(stager.stderr, /could not be undone yet: could not move .*no space left on device/is);
    // Letting go of it would have renamed it beside itself: no room for the name.
    assert.equal(keptCommit(area), workDirIn(area), 'the lock with the record stays in place');
    assert.deepEqual(
      fs.readdirSync(area).filter((n) => n.startsWith(`${LOCK_NAME}.`)),
      [],
      'nothing beside the lock',
    );
    nothingLost(area, 'the lock left in place');
    freeSpace();
    for (let n = 0; n < junk; n++) fs.unlinkSync(path.join(area, `~${n.toString(36)}`));
    const next = await runCli(['lock', tag, '--', 'true'], { staticDir });
    assert.equal(next.code, 0, next.stderr);
    await finishedOld(tag, 'once space was freed');
  });

  it('the disk full during the next holder’s undo: its acquire fails with EUNFINISHED, changing nothing, until space is freed', async () => {
    const tag = await oldBuild();
    const area = path.join(staticDir, tag);
    const cut = 'commit.checked#1';
    const stager = startCli(stageArgs(tag, builds.addition), { staticDir, pauseAt: cut });
    await stopped(stager, cut);
    await killStopped(stager, cut);
    const undoer = startCli(['lock', tag, '--', 'true'], { staticDir, pauseAt: 'commit.undo.begin' });
    await stopped(undoer, 'commit.undo.begin');
    // By now the dead stager's lock is moved aside as fenced and the undoer holds a lock of its own.
    const fenced = fs.readdirSync(area).filter((n) => n.startsWith(LOCK_FENCED_PREFIX));
    assert.equal(fenced.length, 1, fs.readdirSync(area).join(' '));
    // The work directory kept on its own, or (a lock moved whole) inside it.
    const work = fs.existsSync(path.join(area, fenced[0], COMMIT_FILE)) ? '.' : fs.readdirSync(path.join(area, fenced[0])).find((n) => n.startsWith('work.'))!;
    await fillDisk();
    fillEntries(path.join(area, fenced[0], work));
    // What is inside the area, but for the lock the undoer holds and lets go of, and the counter.
    const inside = (): Map<string, string> => {
      const m = fingerprint(area);
      for (const k of [...m.keys()]) if (k === '.' || k === FENCE_FILE || k === LOCK_NAME || k.startsWith(`${LOCK_NAME}/`) || k.startsWith(`${fenced[0]}/`)) m.delete(k);
      return m;
    };
    const before = inside();
    const end = await continued(undoer);
    assert.equal(end.code, 1, undoer.stderr);
    assert.match(undoer.stderr, /holds a staging that was cut off and could not be undone yet: could not move .*no space left on device/is);
    assert.match(undoer.stderr, /Nothing is lost/);
    assert.deepEqual(changes(area, before, inside()), [], 'the refused acquire changed the area');
    assert.ok(fs.existsSync(path.join(area, fenced[0], work, COMMIT_FILE)), 'the record is kept');
    assert.equal(fs.existsSync(path.join(area, LOCK_NAME)), false, 'the undoer let go of its lock');
    nothingLost(area, 'the next holder refused');
    // Still full: the next acquire fails again, and changes nothing.
    const again = await runCli(['lock', tag, '--', 'true'], { staticDir });
    assert.equal(again.code, 1, again.stderr);
    assert.deepEqual(changes(area, before, inside()), [], 'the second refused acquire changed the area');
    freeSpace();
    const next = await runCli(['lock', tag, '--', 'true'], { staticDir });
    assert.equal(next.code, 0, next.stderr);
    await finishedOld(tag, 'once space was freed');
  });
});
