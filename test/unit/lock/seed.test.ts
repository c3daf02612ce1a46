/**
 * The Chromium OS devserver's locking cases (AcquireLock/ReleaseLock with create_once and
 * destroy, SafeSandboxAccess), translated to the core, plus the rules the core adds to them.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { acquire, release, withLock } from '../../../src/core/lock/lock';
import { inspect } from '../../../src/core/lock/inspect';
import { destroy, forceRelease } from '../../../src/core/remove';
import { StagingError } from '../../../src/core/base/errors';
import { cleanup, rejectsWith, snapshot, tempDir } from '../../helpers';

describe('devserver locking cases', () => {
  let root: string;
  let staticDir: string;

  beforeEach(() => {
    root = tempDir('dss-seed-');
    staticDir = path.join(root, 'static');
    fs.mkdirSync(staticDir);
  });
  afterEach(() => cleanup(root));

  it('acquires a lock, creating the directory with a lock inside it', async () => {
    const lease = await acquire(staticDir, 'test');
    assert.equal(lease.dir, path.join(staticDir, 'test'));
    assert.ok(fs.statSync(lease.dir).isDirectory());
    assert.ok(fs.statSync(path.join(lease.dir, 'devserver.lock')).isDirectory());
    assert.equal(lease.created, true);
    assert.equal((await inspect(staticDir, 'test')).state, 'held');
    await lease.release();
    assert.ok(fs.existsSync(lease.dir), 'a plain release keeps the directory');
    assert.equal(fs.existsSync(path.join(lease.dir, 'devserver.lock')), false);
    assert.equal((await inspect(staticDir, 'test')).state, 'free');
  });

  it('create_once: a second acquisition of an existing directory fails, even after release', async () => {
    const lease = await acquire(staticDir, 'test');
    await rejectsWith(acquire(staticDir, 'test'), 'EEXIST', path.join(staticDir, 'test'));
    await lease.release();
    await rejectsWith(acquire(staticDir, 'test'), 'EEXIST');
  });

  it('without create_once an existing directory can be locked again, but not while held (double acquire)', async () => {
    const first = await acquire(staticDir, 'test');
    const err = await rejectsWith(acquire(staticDir, 'test', { createOnce: false }), 'ELOCKED', 'test');
    assert.equal(err.lock?.state, 'held');
    assert.equal(err.lock?.holder?.pid, process.pid);
    await first.release();
    const second = await acquire(staticDir, 'test', { createOnce: false });
    assert.equal(second.created, false);
    await second.release();
  });

  it('release with destroy removes the directory; a later run can then create it again', async () => {
    const lease = await acquire(staticDir, 'board/build');
    fs.writeFileSync(path.join(lease.dir, 'artifact.bin'), 'x');
    await lease.release({ destroy: true });
    assert.equal(fs.existsSync(path.join(staticDir, 'board', 'build')), false);
    const again = await acquire(staticDir, 'board/build');
    await again.release();
  });

  it('ReleaseLock by tag: only the holder may release, and only once', async () => {
    await rejectsWith(release(staticDir, 'test'), 'ENOTHELD', 'test');
    const lease = await acquire(staticDir, 'test');
    await release(staticDir, 'test');
    await rejectsWith(release(staticDir, 'test'), 'ENOTHELD');
    await rejectsWith(lease.release(), 'ENOTHELD');
  });

  it('a refused acquisition leaves an existing area exactly as it was', async () => {
    const other = await acquire(staticDir, 'board/existing');
    fs.writeFileSync(path.join(other.dir, 'kept.bin'), 'keep me');
    const before = snapshot(staticDir);
    await rejectsWith(acquire(staticDir, 'board/existing', { createOnce: false }), 'ELOCKED');
    await rejectsWith(acquire(staticDir, 'board/existing'), 'EEXIST');
    assert.deepEqual(snapshot(staticDir), before);
    await other.release();
  });

  it('a wait for a held lock ends when the holder releases, and a cancelled wait removes what it created', async () => {
    const holder = await acquire(staticDir, 'board/build');
    const waiting = acquire(staticDir, 'board/build', { createOnce: false, waitMs: 10_000 });
    setTimeout(() => void holder.release(), 200);
    const next = await waiting;
    assert.equal(next.state, 'held');
    await next.release();

    // Another holder inside a parent this call creates: the cancelled waiter must not remove it.
    const blocker = await acquire(staticDir, 'fresh/build');
    const ac = new AbortController();
    const cancelled = acquire(staticDir, 'fresh/build', { createOnce: false, waitMs: 10_000, signal: ac.signal });
    setTimeout(() => ac.abort(), 100);
    await rejectsWith(cancelled, 'ECANCELED');
    assert.ok(fs.existsSync(blocker.lockPath));
    await blocker.release();
  });

  it('withLock runs under the lock, destroys an area it created when the work fails, keeps one that existed', async () => {
    const seen = await withLock(staticDir, 'ok', async (signal) => {
      assert.equal(signal.aborted, false);
      return (await inspect(staticDir, 'ok')).state;
    });
    assert.equal(seen, 'held');
    assert.equal((await inspect(staticDir, 'ok')).state, 'free');

    await assert.rejects(withLock(staticDir, 'fails', () => Promise.reject(new Error('download failed'))), /download failed/);
    assert.equal(fs.existsSync(path.join(staticDir, 'fails')), false, 'a failed new staging is destroyed so a later run can retry');

    fs.mkdirSync(path.join(staticDir, 'existing'));
    fs.writeFileSync(path.join(staticDir, 'existing', 'earlier.bin'), 'earlier');
    await assert.rejects(
      withLock(staticDir, 'existing', () => Promise.reject(new Error('adding failed')), { createOnce: false }),
      /adding failed/,
    );
    assert.equal(fs.readFileSync(path.join(staticDir, 'existing', 'earlier.bin'), 'utf8'), 'earlier');
    assert.equal((await inspect(staticDir, 'existing')).state, 'free');
  });

  it('a lease whose lock was taken away reports ECOMPROMISED on release and leaves the new holder alone', async () => {
    const timing = { staleMs: 4_000, refreshMs: 1_000 };
    const old = await acquire(staticDir, 'contested', timing);
    fs.writeFileSync(path.join(old.dir, 'artifact'), 'kept');
    await forceRelease(staticDir, 'contested');
    // The same process takes the place again before the old lease's next heartbeat.
    const fresh = await acquire(staticDir, 'contested', { ...timing, createOnce: false });
    const err = await rejectsWith(old.release({ destroy: true }), 'ECOMPROMISED', 'contested');
    assert.equal(old.signal.aborted, true);
    assert.equal(old.signal.reason, err);
    assert.equal(fs.readFileSync(path.join(old.dir, 'artifact'), 'utf8'), 'kept', 'the old lease must not destroy the new holder\'s area');
    const mtime = fs.statSync(fresh.lockPath).mtimeMs;
    // Two refresh intervals: the new lease must still be refreshing its heartbeat, not stopped by the old one.
    await new Promise((r) => setTimeout(r, 2_200));
    const info = await inspect(staticDir, 'contested', timing);
    assert.equal(info.state, 'held');
    assert.equal(info.holder?.token, fresh.holder.token);
    assert.ok(fs.statSync(fresh.lockPath).mtimeMs > mtime, 'the new lease kept refreshing');
    assert.equal(fresh.state, 'held');
    await fresh.release();
    assert.equal((await inspect(staticDir, 'contested')).state, 'free');
  });

  describe('sandbox (SafeSandboxAccess)', () => {
    it('rejects tags that are empty, absolute, escaping, NUL-bearing or the static directory itself', async () => {
      for (const tag of ['', '/etc', '..', '../static2', 'a/../../x', 'a/..', '.', './', 'a/./b', 'a//b', 'x\0y', 'devserver.lock', 'b/devserver']) {
        await rejectsWith(acquire(staticDir, tag), 'EBADTAG');
      }
      assert.deepEqual(fs.readdirSync(root), ['static']);
    });

    it('compares path segments, not string prefixes: a sibling sharing a prefix is outside', async () => {
      fs.mkdirSync(path.join(root, 'static2'));
      fs.symlinkSync(path.join(root, 'static2'), path.join(staticDir, 'sneaky'));
      await rejectsWith(acquire(staticDir, 'sneaky/build'), 'EBADTAG', 'outside');
      assert.deepEqual(fs.readdirSync(path.join(root, 'static2')), []);
    });

    it('rejects a tag whose existing parts are symlinks leading outside, accepts links that stay inside', async () => {
      fs.symlinkSync('/', path.join(staticDir, 'rootlink'));
      await rejectsWith(acquire(staticDir, 'rootlink/tmp/x'), 'EBADTAG');
      fs.mkdirSync(path.join(staticDir, 'real'));
      fs.symlinkSync('real', path.join(staticDir, 'alias'));
      const lease = await acquire(staticDir, 'alias/build');
      assert.ok(fs.existsSync(path.join(staticDir, 'real', 'build', 'devserver.lock')));
      await lease.release();
    });

    it('destroy removes the area but never follows a symlink out of it', async () => {
      const outside = path.join(root, 'outside');
      fs.mkdirSync(outside);
      fs.writeFileSync(path.join(outside, 'precious'), 'do not delete');
      const lease = await acquire(staticDir, 'build');
      fs.symlinkSync(outside, path.join(lease.dir, 'link-out'));
      await lease.release();
      await destroy(staticDir, 'build');
      assert.equal(fs.existsSync(path.join(staticDir, 'build')), false);
      assert.equal(fs.readFileSync(path.join(outside, 'precious'), 'utf8'), 'do not delete');
    });

    it('refuses to destroy an area held by someone else unless forced', async () => {
      const lease = await acquire(staticDir, 'busy');
      await rejectsWith(destroy(staticDir, 'busy'), 'ELOCKED', 'busy');
      assert.ok(fs.existsSync(lease.dir));
      const lost = new Promise((resolve) => lease.once('lost', resolve));
      await destroy(staticDir, 'busy', { force: true });
      assert.equal(fs.existsSync(lease.dir), false);
      await Promise.race([lost, new Promise((_, reject) => setTimeout(() => reject(new Error('holder never learned it lost the lock')), 5_000))]);
      assert.equal(lease.signal.aborted, true);
      assert.equal((lease.signal.reason as StagingError).code, 'ECOMPROMISED');
    });
  });
});
