/**
 * usage and prune on real directories: what counts as an area, what it takes, and that pruning
 * never removes an area someone holds.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { acquire, type Lease } from '../../../src/core/lock/lock';
import { isStagingError } from '../../../src/core/base/errors';
import { MANIFEST_FILE, TIMESTAMP_FILE } from '../../../src/core/stage/types';
import { usage, type AreaUsage } from '../../../src/core/usage';
import { prune } from '../../../src/core/prune';
import { callsPerTurn, cleanup, snapshot, tempDir } from '../../helpers';

const DAY = 86_400_000;

describe('usage and prune', () => {
  let root: string;
  let staticDir: string;
  const leases: Lease[] = [];
  /** Whole seconds, so mtimes set with utimes compare exactly. */
  const now = Math.floor(Date.now() / 1000) * 1000;

  beforeEach(() => {
    root = tempDir('dss-usage-');
    staticDir = path.join(root, 'static');
    fs.mkdirSync(staticDir);
  });
  afterEach(async () => {
    for (const l of leases.splice(0)) if (l.state === 'held') await l.release().catch(() => undefined);
    cleanup(root);
  });

  function write(rel: string, content: string | Buffer): string {
    const p = path.join(staticDir, rel);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, content);
    return p;
  }

  /** An area with `staged.timestamp` last touched `ageMs` ago and one artifact of `size` bytes. */
  function area(tag: string, ageMs: number, size = 10): void {
    write(`${tag}/artifact.bin`, Buffer.alloc(size, 1));
    const stamp = write(`${tag}/${TIMESTAMP_FILE}`, '');
    const t = (now - ageMs) / 1000;
    fs.utimesSync(stamp, t, t);
  }

  /** A lock directory without holder record, its heartbeat `ageMs` old: stale. */
  function staleLock(tag: string, ageMs: number): void {
    const lock = path.join(staticDir, tag, 'devserver.lock');
    fs.mkdirSync(lock, { recursive: true });
    const t = (now - ageMs) / 1000;
    fs.utimesSync(lock, t, t);
  }

  /** The Python devserver's lock: a regular file hard-linked to its unique file. */
  function legacyLock(tag: string): void {
    const unique = write(`${tag}/buildhost-7f00aa.4242-17`, '');
    fs.linkSync(unique, path.join(staticDir, tag, 'devserver.lock'));
  }

  async function hold(tag: string): Promise<Lease> {
    const lease = await acquire(staticDir, tag, { createOnce: false, purpose: 'held by the test' });
    leases.push(lease);
    return lease;
  }

  const byTag = (areas: readonly AreaUsage[]): Map<string, AreaUsage> => new Map(areas.map((a) => [a.tag, a]));

  function auditLines(): { action: string; tag: string }[] {
    const log = path.join(staticDir, '.devserver-staging', 'audit.log');
    if (!fs.existsSync(log)) return [];
    return fs
      .readFileSync(log, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { action: string; tag: string; failed?: string })
      .map((l) => (l.failed === undefined ? l : { ...l, action: `${l.action} (failed)` }));
  }

  describe('usage', () => {
    it('finds areas below boards and measures size, artifacts, last use and state', async () => {
      // A manifest decides the artifact count; the nested area is part of its parent.
      write('eve/R1/a.bin', Buffer.alloc(1000));
      write('eve/R1/sub/b.bin', Buffer.alloc(24));
      write('eve/R1/nested/staged.timestamp', '');
      const manifest = JSON.stringify({ version: 1, artifacts: { 'a.bin': {}, 'sub/b.bin': {} } });
      write(`eve/R1/${MANIFEST_FILE}`, manifest);
      area('eve/R1', 2 * DAY, 0);
      fs.rmSync(path.join(staticDir, 'eve/R1/artifact.bin'));
      // Without a manifest: regular files, a hard link counted once in bytes but as its own name.
      area('eve/R2', 3 * DAY, 100);
      fs.linkSync(path.join(staticDir, 'eve/R2/artifact.bin'), path.join(staticDir, 'eve/R2/again.bin'));
      write('eve/R2/small', '12345');
      // Held, legacy and stale locks make areas too, with or without a timestamp.
      const held = await hold('eve/R3');
      write('eve/R3/partial.bin', Buffer.alloc(7));
      legacyLock('eve/R4');
      staleLock('eve/R5', 60_000);
      // The Python devserver's lock target alone, as a build.
      write('eve/R6/devserver', '');
      // A directory without markers only groups; an area below it is found.
      write('eve/plain/loose.txt', 'x');
      area('eve/plain/sub2', DAY);
      // Never: links, our bookkeeping, lock artefacts.
      fs.symlinkSync(path.join(staticDir, 'eve/R1'), path.join(staticDir, 'alias'));
      fs.symlinkSync(path.join(staticDir, 'eve'), path.join(staticDir, 'eve-link'));
      write('.devserver-staging/trash/old/staged.timestamp', '');
      fs.mkdirSync(path.join(staticDir, 'eve/R1/devserver.lock.claim.1.2.0'));

      const areas = byTag(await usage(staticDir));
      assert.deepEqual([...areas.keys()].sort(), ['eve/R1', 'eve/R2', 'eve/R3', 'eve/R4', 'eve/R5', 'eve/R6', 'eve/plain/sub2']);

      const r1 = areas.get('eve/R1')!;
      assert.equal(r1.artifacts, 2);
      assert.equal(r1.bytes, 1000 + 24 + Buffer.byteLength(manifest));
      assert.equal(r1.lastUsedMs, now - 2 * DAY);
      assert.equal(r1.state, 'free');
      assert.equal(r1.lock, undefined);
      assert.equal(r1.dir, path.join(staticDir, 'eve', 'R1'));

      const r2 = areas.get('eve/R2')!;
      assert.equal(r2.artifacts, 3);
      assert.equal(r2.bytes, 105);
      assert.equal(r2.lastUsedMs, now - 3 * DAY);

      const r3 = areas.get('eve/R3')!;
      assert.equal(r3.state, 'held');
      assert.equal(r3.lock?.holder?.token, held.holder.token);
      assert.equal(r3.bytes, 7, 'the lock and its holder record are not part of the build');
      assert.equal(r3.lastUsedMs, fs.statSync(path.join(staticDir, 'eve/R3')).mtimeMs, 'no timestamp: the directory mtime');

      assert.equal(areas.get('eve/R4')!.state, 'legacy');
      assert.equal(areas.get('eve/R4')!.lock?.legacy?.hostname, 'buildhost');
      assert.equal(areas.get('eve/R4')!.artifacts, 0, "the Python devserver's lock file is bookkeeping, not an artifact");
      assert.equal(areas.get('eve/R6')!.artifacts, 0);
      assert.equal(areas.get('eve/R5')!.state, 'stale');
      assert.equal(areas.get('eve/plain/sub2')!.lastUsedMs, now - DAY);
    });

    it('lists in natural order, limits itself to a subpath, and names what is missing', async () => {
      for (const t of ['b/R10', 'b/R9', 'a/R1', 'c/R2']) area(t, DAY);
      assert.deepEqual(
        (await usage(staticDir)).map((a) => a.tag),
        ['a/R1', 'b/R9', 'b/R10', 'c/R2'],
      );
      assert.deepEqual(
        (await usage(staticDir, { subpath: 'b', concurrency: 1 })).map((a) => a.tag),
        ['b/R9', 'b/R10'],
      );
      assert.deepEqual(
        (await usage(staticDir, { subpath: 'b/R9' })).map((a) => a.tag),
        ['b/R9'],
        'a subpath that is itself an area',
      );
      await assert.rejects(usage(staticDir, { subpath: 'nope' }), (err: unknown) => isStagingError(err, 'ENOENT') && /nope/.test(err.message));
      await assert.rejects(usage(staticDir, { subpath: '../x' }), (err: unknown) => isStagingError(err, 'EBADTAG'));
      await assert.rejects(usage(path.join(root, 'missing')), (err: unknown) => isStagingError(err, 'EBADSTATICDIR'));
      const empty = path.join(root, 'empty');
      fs.mkdirSync(empty);
      assert.deepEqual(await usage(empty), [], 'an empty static directory has no areas');
    });

    it('lstats the files of a large build a slice at a time, the event loop turning between slices', async () => {
      // A local filesystem is read with synchronous calls: all of one directory's lstats in one
      // piece would hold the loop for the whole directory.
      const files = 30_000;
      area('eve/big', DAY);
      const big = path.join(staticDir, 'eve/big');
      for (let i = 0; i < files; i++) fs.writeFileSync(path.join(big, `f${i}`), '');
      const { result: areas, most, total } = await callsPerTurn(require('fs') as object, 'lstatSync', (p) => String(p).includes('/f'), () => usage(staticDir));
      assert.equal(areas.find((a) => a.tag === 'eve/big')?.artifacts, files + 1);
      assert.ok(total >= files, `the files were lstat'ed with synchronous calls (${total} of ${files})`);
      assert.ok(most < files / 2, `at most ${most} of ${files} lstats in one turn of the event loop`);
    });
  });

  describe('prune', () => {
    beforeEach(() => {
      for (let d = 1; d <= 5; d++) area(`eve/R${d}`, d * DAY, d * 100);
    });

    it('keep N removes the least recently used beyond N, oldest first, through destroy', async () => {
      const r = await prune(staticDir, { keep: 2 });
      assert.deepEqual(
        r.removed.map((c) => c.tag),
        ['eve/R5', 'eve/R4', 'eve/R3'],
      );
      assert.ok(r.removed.every((c) => c.rules.join() === 'keep' && /not among the 2 most recently used/.test(c.reason)));
      assert.equal(r.bytes, 500 + 400 + 300 + 3 * 0);
      assert.deepEqual(r.skipped, []);
      assert.deepEqual(r.failed, []);
      assert.deepEqual(fs.readdirSync(path.join(staticDir, 'eve')).sort(), ['R1', 'R2']);
      assert.deepEqual(
        auditLines().map((l) => `${l.action} ${l.tag}`),
        ['destroy eve/R5', 'destroy eve/R4', 'destroy eve/R3'],
      );
    });

    it('ranks builds last used at the same instant by tag, in natural order', async () => {
      // Made in an order that is neither the tags' nor their natural order.
      for (const tag of ['eve/R10', 'arc/R2', 'eve/R9', 'arc/R10', 'eve/R1-b']) area(tag, 0);
      const r = await prune(staticDir, { keep: 2, dryRun: true });
      // Kept: arc/R2 and arc/R10, first in that order; the rest go least recently used first.
      assert.deepEqual(
        r.removed.map((c) => c.tag),
        ['eve/R5', 'eve/R4', 'eve/R3', 'eve/R2', 'eve/R1', 'eve/R10', 'eve/R9', 'eve/R1-b'],
      );
    });

    it('olderThan removes what was last used before the limit; with keep, either rule selects', async () => {
      const older = await prune(staticDir, { olderThan: 3.5 * DAY });
      assert.deepEqual(
        older.removed.map((c) => [c.tag, c.rules.join()]),
        [
          ['eve/R5', 'older-than'],
          ['eve/R4', 'older-than'],
        ],
      );
      assert.match(older.removed[0].reason, /last used 5 d ago \(limit 84 h\)/);
      area('eve/R4', 4 * DAY);
      area('eve/R5', 5 * DAY);
      const both = await prune(staticDir, { keep: 3, olderThan: 1.5 * DAY });
      assert.deepEqual(
        both.removed.map((c) => [c.tag, c.rules.join()]),
        [
          ['eve/R5', 'keep,older-than'],
          ['eve/R4', 'keep,older-than'],
          ['eve/R3', 'older-than'],
          ['eve/R2', 'older-than'],
        ],
      );
      assert.deepEqual(fs.readdirSync(path.join(staticDir, 'eve')), ['R1']);
      const none = await prune(staticDir, {});
      assert.deepEqual([none.removed, none.skipped, none.failed], [[], [], []], 'with no rule nothing is selected');
    });

    it('never removes a held, stale or legacy area, nor one with a held lock inside', async () => {
      const lease = await hold('eve/R5');
      staleLock('eve/R4', 60_000);
      legacyLock('eve/R3');
      await hold('eve/R2/inner');
      const before = snapshot(path.join(staticDir, 'eve'));
      const r = await prune(staticDir, { keep: 0 });
      assert.deepEqual(
        r.removed.map((c) => c.tag),
        ['eve/R1'],
      );
      const skipped = new Map(r.skipped.map((c) => [c.tag, c.skippedBecause]));
      assert.deepEqual([...skipped.keys()], ['eve/R5', 'eve/R4', 'eve/R3', 'eve/R2']);
      assert.match(skipped.get('eve/R5')!, /held by .*held by the test/);
      assert.match(skipped.get('eve/R4')!, /stale; kept in case its holder comes back/);
      assert.match(skipped.get('eve/R3')!, /Python devserver on buildhost/);
      assert.match(skipped.get('eve/R2')!, /eve\/R2\/inner inside it is held by/);
      assert.equal(lease.state, 'held', 'the holder keeps its lock');
      const after = snapshot(path.join(staticDir, 'eve'));
      for (const [p, sig] of before) {
        // R1 is gone; held locks' heartbeats move their mtimes.
        if (p.startsWith(path.join(staticDir, 'eve', 'R1')) || p.includes('devserver.lock')) continue;
        assert.equal(after.get(p), sig, `${p} is unchanged`);
      }
      // Each destroy is recorded before it acts; the one refused its lock (a lock inside is held) does nothing.
      assert.deepEqual(
        auditLines().map((l) => `${l.action} ${l.tag}`),
        ['destroy eve/R1'],
      );
    });

    it('dryRun reports what would go and removes nothing', async () => {
      await hold('eve/R5');
      await usage(staticDir); // creates the bookkeeping directory (clock probe) before the snapshot
      const before = snapshot(path.join(staticDir, 'eve'));
      const r = await prune(staticDir, { keep: 1, dryRun: true });
      assert.equal(r.dryRun, true);
      assert.deepEqual(
        r.removed.map((c) => c.tag),
        ['eve/R4', 'eve/R3', 'eve/R2'],
      );
      assert.deepEqual(
        r.skipped.map((c) => c.tag),
        ['eve/R5'],
      );
      assert.equal(r.bytes, 400 + 300 + 200);
      const after = snapshot(path.join(staticDir, 'eve'));
      for (const [p, sig] of before) if (!p.includes('devserver.lock')) assert.equal(after.get(p), sig, p);
      assert.deepEqual(auditLines(), []);
    });

    it('a failed removal does not stop the others; each failure is reported', async () => {
      // The trash cannot be made: every destroy fails, and each is still tried.
      write('.devserver-staging/trash', 'in the way');
      const r = await prune(staticDir, { olderThan: 2.5 * DAY });
      assert.deepEqual(r.removed, []);
      assert.deepEqual(
        r.failed.map((c) => c.tag),
        ['eve/R5', 'eve/R4', 'eve/R3'],
      );
      for (const f of r.failed) {
        assert.equal(f.error.code, 'EIO');
        assert.ok(f.error.message.includes(f.dir), f.error.message);
      }
      assert.deepEqual(fs.readdirSync(path.join(staticDir, 'eve')).sort(), ['R1', 'R2', 'R3', 'R4', 'R5']);
      for (const t of ['R3', 'R4', 'R5']) assert.equal(fs.existsSync(path.join(staticDir, 'eve', t, 'devserver.lock')), false, 'no lock left behind');
    });

    it('refuses nonsense limits', async () => {
      await assert.rejects(prune(staticDir, { keep: -1 }), RangeError);
      await assert.rejects(prune(staticDir, { keep: 1.5 }), RangeError);
      await assert.rejects(prune(staticDir, { olderThan: Number.NaN }), RangeError);
      assert.equal(fs.readdirSync(path.join(staticDir, 'eve')).length, 5);
    });
  });
});
