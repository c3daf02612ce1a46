/**
 * Builds are not staged inside builds: `findBuildAbove` names the build a tag would land in, and
 * `stage` refuses such a tag (ENESTED) before it writes anything, leaving no directory behind.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { acquire } from '../../../src/core/lock/lock';
import { findBuildAbove } from '../../../src/core/lock/nesting';
import { LOCK_NAME, LOCK_TARGET } from '../../../src/core/base/protocol';
import { stage } from '../../../src/core/stage/stage';
import { MANIFEST_FILE, TIMESTAMP_FILE } from '../../../src/core/stage/types';
import { cleanup, cli, rejectsWith, staticContents, tempDir } from '../../helpers';

describe('builds inside builds', () => {
  let root: string;
  let staticDir: string;
  let source: string;

  beforeEach(() => {
    root = tempDir('dss-build-above-');
    staticDir = path.join(root, 'static');
    source = path.join(root, 'src');
    fs.mkdirSync(staticDir);
    fs.mkdirSync(source);
    fs.writeFileSync(path.join(source, 'image.bin'), 'image');
  });
  afterEach(() => cleanup(root));

  it('findBuildAbove names the nearest build strictly above a tag, by each of its markers', async () => {
    fs.mkdirSync(path.join(staticDir, 'eve', 'R1', 'sub', 'deeper'), { recursive: true });
    assert.equal(await findBuildAbove(staticDir, 'eve'), undefined);
    assert.equal(await findBuildAbove(staticDir, 'eve/R1/sub/deeper'), undefined, 'boards and plain directories are not builds');
    assert.equal(await findBuildAbove(staticDir, 'nowhere/at/all'), undefined);
    for (const marker of [MANIFEST_FILE, TIMESTAMP_FILE, LOCK_TARGET]) {
      fs.writeFileSync(path.join(staticDir, 'eve', 'R1', marker), '');
      assert.equal(await findBuildAbove(staticDir, 'eve/R1/sub/deeper'), 'eve/R1', marker);
      assert.equal(await findBuildAbove(staticDir, 'eve/R1/new'), 'eve/R1', `${marker}, below it a tag not there yet`);
      assert.equal(await findBuildAbove(staticDir, 'eve/R1'), undefined, `${marker}: the build itself is not above itself`);
      fs.rmSync(path.join(staticDir, 'eve', 'R1', marker));
    }
    // A lock alone makes a build (held now by a lock taken on it).
    const lease = await acquire(staticDir, 'eve/R1', { createOnce: false });
    try {
      assert.ok(fs.existsSync(path.join(staticDir, 'eve', 'R1', LOCK_NAME)));
      assert.equal(await findBuildAbove(staticDir, 'eve/R1/sub'), 'eve/R1');
    } finally {
      await lease.release();
    }
    // The nearest of two.
    fs.writeFileSync(path.join(staticDir, 'eve', TIMESTAMP_FILE), '');
    fs.writeFileSync(path.join(staticDir, 'eve', 'R1', 'sub', TIMESTAMP_FILE), '');
    assert.equal(await findBuildAbove(staticDir, 'eve/R1/sub/deeper'), 'eve/R1/sub');
    assert.equal(await findBuildAbove(staticDir, 'eve/R1'), 'eve');
    await rejectsWith(findBuildAbove(staticDir, '../etc/x'), 'EBADTAG');
  });

  it('findBuildAbove never follows a link: areas nest by their tags', async () => {
    fs.mkdirSync(path.join(staticDir, 'eve', 'R1'), { recursive: true });
    fs.writeFileSync(path.join(staticDir, 'eve', 'R1', MANIFEST_FILE), '');
    fs.symlinkSync('R1', path.join(staticDir, 'eve', 'latest'));
    assert.equal(await findBuildAbove(staticDir, 'eve/latest/sub'), undefined);
    // A link to a build outside the static directory, too.
    const outside = path.join(root, 'outside', 'build');
    fs.mkdirSync(outside, { recursive: true });
    fs.writeFileSync(path.join(outside, MANIFEST_FILE), '');
    fs.symlinkSync(outside, path.join(staticDir, 'away'));
    assert.equal(await findBuildAbove(staticDir, 'away/sub'), undefined);
  });

  it('stage refuses a tag inside a build with ENESTED naming both, and leaves nothing behind; beside it is fine', async () => {
    await stage(staticDir, 'eve/R1', [source]);
    const before = staticContents(staticDir);
    const e = await rejectsWith(stage(staticDir, 'eve/R1/extra/more', [source]), 'ENESTED');
    assert.match(e.message, /eve\/R1\/extra\/more/);
    assert.match(e.message, /inside the build eve\/R1 /);
    assert.match(e.message, /beside eve\/R1 \(in eve\)/);
    assert.deepEqual(staticContents(staticDir), before, 'no directory made, nothing changed');
    // An existing directory inside the build, added to: refused as well.
    fs.mkdirSync(path.join(staticDir, 'eve', 'R1', 'sub'));
    const inside = staticContents(staticDir);
    await rejectsWith(stage(staticDir, 'eve/R1/sub', [source], { add: true }), 'ENESTED', 'eve/R1/sub');
    assert.deepEqual(staticContents(staticDir), inside);
    await stage(staticDir, 'eve/R2', [source]);
    // At the top of the static directory, the message says so.
    await stage(staticDir, 'top', [source]);
    await rejectsWith(stage(staticDir, 'top/inner', [source]), 'ENESTED', 'at the top of the static directory');
  });

  it('devserver-stage stage exits 1 with ENESTED under --json', async () => {
    await stage(staticDir, 'eve/R1', [source]);
    const r = await cli(staticDir, ['--json', 'stage', 'eve/R1/sub', source]);
    assert.equal(r.code, 1, r.stderr);
    const err = (JSON.parse(r.stderr) as { error: { code: string; message: string } }).error;
    assert.equal(err.code, 'ENESTED');
    assert.ok(!fs.existsSync(path.join(staticDir, 'eve', 'R1', 'sub')));
  });
});
