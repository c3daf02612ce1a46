/**
 * The count of an area outlives its destroy. Destroying an area removes its fencing counter with
 * it; the next holder of a build made again by that name starts above the last token the area had,
 * even where the history (best effort) could not record it: a file planted in the history's place,
 * or a full disk. The destroy keeps that token in `.devserver-staging/floors/` first, and where
 * that cannot be written either, it does not destroy: it says why, the lock is released and the
 * build kept.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import type { StagingError } from '../../../src/core/base/errors';
import { FLOOR_DIR, HISTORY_DIR, META_DIR, TRASH_DIR, historyDirOf } from '../../../src/core/base/protocol';
import { inspect } from '../../../src/core/lock/inspect';
import { acquire } from '../../../src/core/lock/lock';
import { flushHistory } from '../../../src/core/log/history';
import { destroy } from '../../../src/core/remove';
import { SmallDisk } from '../../disk';
import { cleanup, cli, isRoot, rejectsWith, report, tempDir } from '../../helpers';

/** Every warning the core gave, to assert that the history really could not be written. */
function warnings(): { warn: (w: StagingError) => void; seen: string[] } {
  const seen: string[] = [];
  return { warn: (w) => seen.push(w.message), seen };
}

/** Two holders in turn, so the area counts to 2 and its history says so; then its history can no longer be written. */
async function countedArea(staticDir: string, tag: string, plant: readonly string[]): Promise<void> {
  for (let i = 0; i < 2; i++) await (await acquire(staticDir, tag, { createOnce: false, warn: () => undefined })).release();
  fs.writeFileSync(path.join(staticDir, tag, 'artifact.bin'), 'the build');
  // Segments kept open for the next record would still reach the history moved away.
  await flushHistory();
  for (const name of plant) {
    const p = path.join(staticDir, META_DIR, name);
    fs.renameSync(p, `${p}.kept`);
    fs.writeFileSync(p, 'planted');
  }
}

function restore(staticDir: string, plant: readonly string[]): void {
  for (const name of plant) {
    const p = path.join(staticDir, META_DIR, name);
    fs.rmSync(p);
    fs.renameSync(`${p}.kept`, p);
  }
}

async function nextToken(staticDir: string, tag: string): Promise<number> {
  const next = await acquire(staticDir, tag, { createOnce: false, warn: () => undefined });
  await next.release();
  return next.fence;
}

describe('fence: the count of a destroyed area outlives its history', function () {
  this.timeout(60_000);
  let root = '';
  let staticDir = '';

  beforeEach(() => {
    root = tempDir('dss-floor-');
    staticDir = path.join(root, 'static');
    fs.mkdirSync(staticDir);
    // Made up front so the files planted below have a place to stand.
    fs.mkdirSync(path.join(staticDir, META_DIR, HISTORY_DIR), { recursive: true });
    fs.mkdirSync(path.join(staticDir, META_DIR, FLOOR_DIR), { recursive: true });
  });
  afterEach(() => cleanup(root));

  it('history unwritable: after a release with destroy, core destroy and the CLI destroy, the next holder counts on', async () => {
    const removers: [string, (tag: string, warn: (w: StagingError) => void) => Promise<number>][] = [
      [
        'release with destroy',
        async (tag, warn) => {
          const lease = await acquire(staticDir, tag, { createOnce: false, warn });
          await lease.release({ destroy: true });
          return lease.fence;
        },
      ],
      [
        'destroy',
        async (tag, warn) => {
          await destroy(staticDir, tag, { warn });
          return 3;
        },
      ],
      [
        'the CLI destroy',
        async (tag) => {
          const r = await cli(staticDir, ['destroy', tag]);
          assert.equal(r.code, 0, r.stderr);
          assert.match(r.stderr, /Could not record the history/);
          return 3;
        },
      ],
    ];
    for (const [name, remove] of removers) {
      const tag = `b/${name.replace(/ /g, '-')}`;
      await countedArea(staticDir, tag, [HISTORY_DIR]);
      const { warn, seen } = warnings();
      const destroyed = await remove(tag, warn);
      await flushHistory();
      if (name !== 'the CLI destroy') assert.ok(seen.some((m) => m.includes('Could not record the history')), `${name}: the history was written: ${seen.join('; ')}`);
      assert.equal(destroyed, 3, name);
      assert.ok(!fs.existsSync(path.join(staticDir, tag)), `${name}: the area was not destroyed`);
      restore(staticDir, [HISTORY_DIR]);
      // The history knows no token above 2: only what the destroy kept can make the next one 4.
      assert.equal(await nextToken(staticDir, tag), destroyed + 1, `${name}: the destroyed holder's token was handed out again`);
    }
  });

  it('the token cannot be kept either: destroy, the CLI destroy and release with destroy refuse, release the lock and keep the build', async () => {
    const plant = [HISTORY_DIR, FLOOR_DIR];
    const floors = path.join(staticDir, META_DIR, FLOOR_DIR);

    await countedArea(staticDir, 'b/core', plant);
    const byCore = await rejectsWith(destroy(staticDir, 'b/core', { warn: () => undefined }), 'EIO', floors);
    assert.match(byCore.message, /could not record its last fencing token \(3\)/);

    const lease = await acquire(staticDir, 'b/core', { createOnce: false, warn: () => undefined });
    assert.equal(lease.fence, 4);
    const byLease = await rejectsWith(lease.release({ destroy: true }), 'EIO', /The lock was released; the build is kept\./);
    assert.ok(byLease.message.includes(floors));
    assert.equal(lease.state, 'released');

    const r = await cli(staticDir, ['destroy', 'b/core']);
    assert.notEqual(r.code, 0);
    assert.ok(r.stderr.includes(floors), r.stderr);

    assert.equal((await inspect(staticDir, 'b/core')).state, 'free');
    assert.equal(fs.readFileSync(path.join(staticDir, 'b/core/artifact.bin'), 'utf8'), 'the build');
    restore(staticDir, plant);
    assert.equal(await nextToken(staticDir, 'b/core'), 6);
  });
});

describe('fence: the count of an area destroyed on a full disk (ext4)', function () {
  this.timeout(120_000);
  let base = '';
  let small: SmallDisk | undefined;
  let disk = '';
  let staticDir = '';

  before(async function () {
    if (!isRoot) {
      console.log('      skipped: mounting an ext4 image needs root');
      this.skip();
    }
    base = tempDir('dss-floor-space-');
    small = await SmallDisk.inside(base, { sizeMiB: 16 });
    disk = small.dir;
    staticDir = path.join(disk, 'static');
    fs.mkdirSync(staticDir);
  });
  after(async () => {
    if (small !== undefined && !(await small.unmount())) return;
    if (base !== '') cleanup(base);
  });

  it('a destroy that cannot keep the token on a full disk does not happen, ends, and the count goes on once there is room', async () => {
    // An earlier destroy made the trash; this tag's history cannot be written (a file where its
    // directory would be), so the disk decides whether its token is kept.
    await (await acquire(staticDir, 'b/other', { createOnce: false, warn: () => undefined })).release({ destroy: true });
    const tag = 'b/full';
    const hist = path.join(staticDir, META_DIR, HISTORY_DIR, ...historyDirOf(tag));
    fs.mkdirSync(path.dirname(hist), { recursive: true });
    fs.writeFileSync(hist, 'planted');
    for (let i = 0; i < 2; i++) await (await acquire(staticDir, tag, { createOnce: false, warn: () => undefined })).release();
    fs.writeFileSync(path.join(staticDir, tag, 'artifact.bin'), 'the build');
    assert.ok(fs.existsSync(path.join(staticDir, META_DIR, TRASH_DIR)));
    const { warn, seen } = warnings();
    const lease = await acquire(staticDir, tag, { createOnce: false, warn });
    assert.equal(lease.fence, 3);
    await small!.fillLeaving(1);
    assert.ok(fs.statfsSync(disk).bavail <= 1, 'the disk is not full');
    let outcome: StagingError | undefined;
    await lease.release({ destroy: true }).catch((err: StagingError) => (outcome = err));
    await flushHistory();
    assert.ok(seen.some((m) => m.includes('Could not record the history')), `the history was written: ${seen.join('; ')}`);
    report(`full disk: the destroy ${outcome === undefined ? 'went through (the token kept in an empty file)' : 'was refused'}`);
    if (outcome !== undefined) {
      // Refused: the floor's directories found no room. Said, released, nothing lost.
      assert.equal(outcome.code, 'EIO');
      assert.match(outcome.message, /ENOSPC/);
      assert.ok(outcome.next?.some((s) => s.kind === 'free-space'));
      assert.equal(fs.readFileSync(path.join(staticDir, tag, 'artifact.bin'), 'utf8'), 'the build');
      assert.equal((await inspect(staticDir, tag)).state, 'free');
    } else {
      assert.ok(!fs.existsSync(path.join(staticDir, tag)), 'the destroy went through but the area is still there');
    }
    small!.free();
    if (outcome !== undefined) {
      await destroy(staticDir, tag, { warn: () => undefined });
      assert.ok(!fs.existsSync(path.join(staticDir, tag)));
    }
    const next = await nextToken(staticDir, tag);
    assert.ok(next > (outcome !== undefined ? 4 : 3), `token ${next} handed out again after the destroy`);
  });
});
