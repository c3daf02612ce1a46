/**
 * Deleting through descriptors: destroy never enters another filesystem mounted inside an area,
 * and never follows a link out of it.
 */
import { strict as assert } from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { mountIdOf } from '../../../src/core/fs/anchored/mounts';
import { openDir, removeTree } from '../../../src/core/fs/anchored';
import { destroy } from '../../../src/core/remove';
import { cleanup, fingerprint, isRoot, report, tempDir } from '../../helpers';

describe('destroy through descriptors', function () {
  this.timeout(30_000);
  let root: string;
  let staticDir: string;
  let outside: string;
  let mounted: string | undefined;

  beforeEach(() => {
    root = tempDir('dss-anchored-');
    staticDir = path.join(root, 'static');
    outside = path.join(root, 'outside');
    fs.mkdirSync(path.join(staticDir, 'b', 'R1', 'sub'), { recursive: true });
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(outside, 'precious.txt'), 'must stay\n');
    fs.writeFileSync(path.join(staticDir, 'b', 'R1', 'a.bin'), 'artifact\n');
  });
  afterEach(() => {
    // The mount moves with the area into the trash: unmount whatever is mounted below the test's root.
    if (mounted !== undefined) {
      const points = fs
        .readFileSync('/proc/self/mounts', 'utf8')
        .split('\n')
        .map((l) => l.split(' ')[1] ?? '')
        .filter((p) => p.startsWith(`${root}/`))
        .sort((a, b) => b.length - a.length);
      for (const p of points) spawnSync('umount', [p]);
    }
    mounted = undefined;
    cleanup(root);
  });

  /** Mounts the outside directory on `mountPoint` (root only), for afterEach to unmount. */
  function bindOutsideOn(mountPoint: string): string {
    const r = spawnSync('mount', ['--bind', outside, mountPoint], { encoding: 'utf8' });
    assert.equal(r.status, 0, `mount --bind failed as root: ${r.stderr}`);
    mounted = mountPoint;
    return mountPoint;
  }

  it('unlinks a link inside the area and leaves what it points to', async () => {
    fs.symlinkSync(outside, path.join(staticDir, 'b', 'R1', 'sub', 'to-outside'));
    const before = fingerprint(outside);
    await destroy(staticDir, 'b/R1');
    assert.equal(fs.existsSync(path.join(staticDir, 'b', 'R1')), false);
    assert.equal(fingerprint(outside), before);
  });

  it('refuses to enter a filesystem mounted inside the area, naming it, and leaves it whole', async function () {
    if (!isRoot) {
      report('skipped: a bind mount needs root');
      return this.skip();
    }
    const mountPoint = bindOutsideOn(path.join(staticDir, 'b', 'R1', 'sub'));
    const before = fingerprint(outside);
    await assert.rejects(destroy(staticDir, 'b/R1'), (err: Error) => err.message.includes(`another filesystem is mounted at ${mountPoint}`));
    assert.equal(fingerprint(outside), before, 'nothing in the mounted directory was touched');
  });

  it('refuses to empty a directory that is itself a mount point of the same filesystem, and leaves it whole', async function () {
    if (!isRoot) {
      report('skipped: a bind mount needs root');
      return this.skip();
    }
    // The same filesystem: the device number cannot tell; only the mount can.
    const mountPoint = bindOutsideOn(path.join(staticDir, 'b', 'R1', 'sub'));
    assert.equal(fs.statSync(mountPoint).dev, fs.statSync(path.dirname(mountPoint)).dev, 'the bind mount kept the device number');
    const before = fingerprint(outside);
    for (const sync of [true, false]) {
      const parent = await openDir(path.dirname(mountPoint));
      try {
        await assert.rejects(removeTree(parent, 'sub', { sync }), /another filesystem is mounted there/);
      } finally {
        parent.close();
      }
      assert.equal(fingerprint(outside), before, 'nothing in the mounted directory was touched');
    }
  });

  it("tells a descriptor's mount by the kernel's id: another across a bind mount, the same within one", async function () {
    const a = fs.openSync(path.join(staticDir, 'b'), 'r');
    const b = fs.openSync(path.join(staticDir, 'b', 'R1'), 'r');
    try {
      const id = mountIdOf(a);
      assert.equal(typeof id, 'number');
      assert.equal(mountIdOf(b), id);
      if (!isRoot) return;
      const mountPoint = bindOutsideOn(path.join(staticDir, 'b', 'R1', 'sub'));
      const c = fs.openSync(mountPoint, 'r');
      try {
        assert.notEqual(mountIdOf(c), id);
      } finally {
        fs.closeSync(c);
      }
    } finally {
      fs.closeSync(a);
      fs.closeSync(b);
    }
  });

  it('with no descriptor left to read a mount with, says it cannot tell rather than "not a mount"', () => {
    // In a process of its own whose descriptors are then used up: the removal's check must throw.
    const script = `
      const fs = require('fs');
      const { mountBoundary } = require(${JSON.stringify(require.resolve('../../../src/core/fs/anchored/mounts'))});
      const { openDir } = require(${JSON.stringify(require.resolve('../../../src/core/fs/anchored/dir'))});
      (async () => {
        const top = await openDir(process.argv[1], true, true);
        const dir = await openDir(process.argv[2], false, true);
        const crosses = mountBoundary(top);
        const held = [];
        try { for (;;) held.push(fs.openSync('/dev/null', 'r')); } catch (err) { if (err.code !== 'EMFILE') throw err; }
        let answer;
        try { answer = String(crosses(dir)); } catch (err) { answer = 'threw ' + err.code; }
        console.log(JSON.stringify({ held: held.length, answer }));
      })();`;
    const r = spawnSync('prlimit', ['--nofile=64:64', process.execPath, '-e', script, path.join(staticDir, 'b'), path.join(staticDir, 'b', 'R1')], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { held: number; answer: string };
    assert.ok(out.held > 0, 'the descriptors were used up');
    assert.equal(out.answer, 'threw EMFILE');
  });
});
