/**
 * Deleting through descriptors: destroy never enters another filesystem mounted inside an area,
 * and never follows a link out of it.
 */
import { strict as assert } from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
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
    const mountPoint = path.join(staticDir, 'b', 'R1', 'sub');
    const r = spawnSync('mount', ['--bind', outside, mountPoint], { encoding: 'utf8' });
    assert.equal(r.status, 0, `mount --bind failed as root: ${r.stderr}`);
    mounted = mountPoint;
    const before = fingerprint(outside);
    await assert.rejects(destroy(staticDir, 'b/R1'), (err: Error) => err.message.includes(`another filesystem is mounted at ${mountPoint}`));
    assert.equal(fingerprint(outside), before, 'nothing in the mounted directory was touched');
  });
});
