/**
 * Staging into real areas from real files: what lands, the manifest, conflicts, progress,
 * cancellation, and failure at every step leaving earlier artifacts byte for byte.
 */
import { strict as assert } from 'assert';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { FENCE_FILE } from '../../../src/core/base/protocol';
import { inspect } from '../../../src/core/lock/inspect';
import { acquire } from '../../../src/core/lock/lock';
import { stage } from '../../../src/core/stage/stage';
import { MANIFEST_FILE, TIMESTAMP_FILE, type Manifest, type StageProgress } from '../../../src/core/stage/types';
import { cleanup, rejectsWith, snapshot, tempDir } from '../../helpers';

const sha = (b: Buffer | string): string => crypto.createHash('sha256').update(b).digest('hex');

/** Every regular file and link under `dir` (protocol files excluded) with its hash. */
function contents(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string): void => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      const rel = path.relative(dir, p);
      if (e.name === FENCE_FILE) continue;
      if (e.isDirectory()) walk(p);
      else if (e.isSymbolicLink()) out.set(rel, `-> ${fs.readlinkSync(p)}`);
      else out.set(rel, sha(fs.readFileSync(p)));
    }
  };
  walk(dir);
  return out;
}

function artifactsOf(dir: string): Map<string, string> {
  const all = contents(dir);
  for (const k of [...all.keys()]) if (k === MANIFEST_FILE || k === TIMESTAMP_FILE) all.delete(k);
  return all;
}

describe('stage', () => {
  let root: string;
  let staticDir: string;
  let build: string;

  beforeEach(() => {
    root = tempDir('dss-stage-');
    staticDir = path.join(root, 'static');
    build = path.join(root, 'build');
    fs.mkdirSync(staticDir);
    fs.mkdirSync(path.join(build, 'autotest', 'packages'), { recursive: true });
    fs.writeFileSync(path.join(build, 'image.bin'), crypto.randomBytes(3 * 1024 * 1024 + 17));
    fs.writeFileSync(path.join(build, 'autotest', 'control'), 'control file\n');
    fs.writeFileSync(path.join(build, 'autotest', 'packages', 'client.tar'), crypto.randomBytes(200_000));
    fs.symlinkSync('packages/client.tar', path.join(build, 'autotest', 'client-latest.tar'));
  });
  afterEach(() => cleanup(root));

  it('stages a directory into a new area: every artifact, a manifest with hashes, a timestamp, the lock released', async () => {
    const result = await stage(staticDir, 'eve/R1', [build]);
    const dir = path.join(staticDir, 'eve', 'R1');
    assert.equal(result.created, true);
    assert.deepEqual(artifactsOf(dir), contents(build));
    const manifest = JSON.parse(fs.readFileSync(path.join(dir, MANIFEST_FILE), 'utf8')) as Manifest;
    assert.deepEqual(Object.keys(manifest.artifacts).sort(), ['autotest/client-latest.tar', 'autotest/control', 'autotest/packages/client.tar', 'image.bin']);
    const image = manifest.artifacts['image.bin'];
    assert.equal(image.size, fs.statSync(path.join(build, 'image.bin')).size);
    assert.equal(image.sha256, sha(fs.readFileSync(path.join(build, 'image.bin'))));
    assert.equal(image.source, path.join(build, 'image.bin'));
    assert.ok(Date.parse(image.stagedAt) > 0);
    assert.equal(manifest.artifacts['autotest/client-latest.tar'].type, 'symlink');
    assert.ok(fs.existsSync(path.join(dir, TIMESTAMP_FILE)));
    assert.equal(result.added.length, 4);
    assert.equal((await inspect(staticDir, 'eve/R1')).state, 'free');
    assert.deepEqual(
      fs.readdirSync(dir).filter((n) => n.startsWith('.devserver-staging.part')),
      [],
      'no temporary files left',
    );
  });

  it('a new build is create-once; --add stages into an existing one; identical artifacts are skipped', async () => {
    await stage(staticDir, 'b', [path.join(build, 'image.bin')]);
    await rejectsWith(stage(staticDir, 'b', [path.join(build, 'autotest')]), 'EEXIST', 'already exists');
    const second = await stage(staticDir, 'b', [path.join(build, 'autotest'), path.join(build, 'image.bin')], { add: true });
    assert.equal(second.created, false);
    assert.deepEqual(second.skipped.map((e) => e.name), ['image.bin']);
    assert.deepEqual(second.added.map((e) => e.name).sort(), ['client-latest.tar', 'control', 'packages/client.tar']);
    const again = await stage(staticDir, 'b', [path.join(build, 'autotest')], { add: true });
    assert.equal(again.added.length, 0);
    assert.equal(again.skipped.length, 3);
  });

  it('a different artifact of the same name is a conflict unless overwriting; the original stays byte for byte', async () => {
    await stage(staticDir, 'c', [build]);
    const dir = path.join(staticDir, 'c');
    const before = artifactsOf(dir);
    const other = path.join(root, 'other');
    fs.mkdirSync(other);
    fs.writeFileSync(path.join(other, 'image.bin'), 'a different image');
    await rejectsWith(stage(staticDir, 'c', [other], { add: true }), 'ECONFLICT', 'image.bin');
    assert.deepEqual(artifactsOf(dir), before);
    // Same size, different bytes: found by the hash, not the size.
    fs.writeFileSync(path.join(other, 'image.bin'), crypto.randomBytes(fs.statSync(path.join(build, 'image.bin')).size));
    await rejectsWith(stage(staticDir, 'c', [other], { add: true }), 'ECONFLICT', 'image.bin');
    assert.deepEqual(artifactsOf(dir), before);
    const replaced = await stage(staticDir, 'c', [other], { add: true, overwrite: true });
    assert.deepEqual(replaced.replaced.map((e) => e.name), ['image.bin']);
    assert.equal(sha(fs.readFileSync(path.join(dir, 'image.bin'))), sha(fs.readFileSync(path.join(other, 'image.bin'))));
  });

  it('a failed new staging is destroyed so that a later run can retry', async () => {
    await rejectsWith(stage(staticDir, 'fresh', [build, path.join(root, 'missing')]), 'ESOURCE', 'missing');
    assert.equal(fs.existsSync(path.join(staticDir, 'fresh')), false);
    await stage(staticDir, 'fresh', [build]);
  });

  it('refuses a symlink in a source directory that leads outside the area, and keeps nothing', async () => {
    fs.symlinkSync('/etc/passwd', path.join(build, 'passwd'));
    await rejectsWith(stage(staticDir, 'evil', [build]), 'EUNSAFE', /"passwd".*\/etc\/passwd/);
    assert.equal(fs.existsSync(path.join(staticDir, 'evil')), false);
  });

  it('refuses a source file that changes while it is being staged, and keeps nothing', async () => {
    const growing = path.join(root, 'growing');
    fs.mkdirSync(growing);
    const file = path.join(growing, 'still-being-built.bin');
    fs.writeFileSync(file, crypto.randomBytes(40 * 1024 * 1024));
    let appended = false;
    const staging = stage(staticDir, 'moving', [growing], {
      onProgress: (p) => {
        if (!appended && p.artifact === 'still-being-built.bin' && p.done === undefined) {
          appended = true;
          fs.appendFileSync(file, 'more output from the build');
        }
      },
    });
    await rejectsWith(staging, 'ESOURCE', /still-being-built\.bin changed while it was being staged/);
    assert.ok(appended, 'the file was changed mid-staging');
    assert.equal(fs.existsSync(path.join(staticDir, 'moving')), false);
  });

  it('reports progress with bytes and totals, at most about every 100 ms while bytes flow', async () => {
    const events: StageProgress[] = [];
    const result = await stage(staticDir, 'p', [build], { onProgress: (p) => events.push(p) });
    assert.ok(events.length >= 4, 'one event per finished artifact at least');
    const last = events[events.length - 1];
    assert.equal(last.bytes, result.bytes);
    assert.equal(last.artifacts, 4);
    assert.equal(last.totalBytes, result.bytes, 'the total of local sources is known up front');
    for (let i = 1; i < events.length; i++) assert.ok(events[i].bytes >= events[i - 1].bytes, 'bytes never go back');
  });

  it('keeps progress per artifact while several large files are copied at once', async () => {
    const big = path.join(root, 'big');
    fs.mkdirSync(big);
    // Over the size copied in one call, so they go in chunks, several at a time.
    for (let i = 0; i < 4; i++) fs.writeFileSync(path.join(big, `image-${i}.bin`), crypto.randomBytes(20 * 1024 * 1024 + i));
    const events: StageProgress[] = [];
    // Many small files beside them: the total is summed while they are looked at in parallel.
    for (let i = 0; i < 200; i++) fs.writeFileSync(path.join(big, `small-${i}.txt`), `${i}`.repeat(100));
    const expected = fs.readdirSync(big).reduce((sum, n) => sum + fs.statSync(path.join(big, n)).size, 0);
    const result = await stage(staticDir, 'many', [big], { onProgress: (p) => events.push({ ...p }) });
    assert.equal(events[0].totalBytes, expected, 'the total is known, and right, from the first event');
    for (const ev of events) {
      if (ev.artifactTotal !== undefined) assert.ok(ev.artifactBytes <= ev.artifactTotal, `${ev.artifact}: ${ev.artifactBytes} of ${ev.artifactTotal}`);
      assert.ok(ev.bytes <= ev.totalBytes!, `${ev.bytes} of ${ev.totalBytes} in all`);
    }
    const finished = events.filter((e) => e.done !== undefined);
    assert.deepEqual(finished.filter((e) => e.artifact.startsWith('image')).map((e) => e.artifact).sort(), ['image-0.bin', 'image-1.bin', 'image-2.bin', 'image-3.bin']);
    assert.equal(finished.length, 204);
    for (const e of finished) assert.equal(e.artifactBytes, fs.statSync(path.join(big, e.artifact)).size);
    assert.equal(events[events.length - 1].bytes, result.bytes);
  });

  it('stops copying at a cancel, and keeps nothing of a new area', async function () {
    this.timeout(60_000);
    const big = path.join(root, 'big');
    fs.mkdirSync(big);
    for (let i = 0; i < 4; i++) fs.writeFileSync(path.join(big, `part${i}.bin`), Buffer.alloc(128 * 1024 * 1024, i));
    const ac = new AbortController();
    let abortedAt = 0;
    let bytesAtAbort = 0;
    let lastBytes = 0;
    const staging = stage(staticDir, 'cancel', [big], {
      signal: ac.signal,
      onProgress: (p) => {
        lastBytes = p.bytes;
        if (abortedAt === 0 && p.bytes > 32 * 1024 * 1024) {
          abortedAt = performance.now();
          bytesAtAbort = p.bytes;
          ac.abort();
        }
      },
    });
    await rejectsWith(staging, 'ECANCELED');
    const took = performance.now() - abortedAt;
    assert.ok(abortedAt > 0, 'the cancel happened mid-copy');
    // The kernel's account, not the clock's: copying stopped within a few chunks of the cancel,
    // far from the 512 MiB it had to copy. (The latency is printed; the benchmark measures it.)
    assert.ok(lastBytes - bytesAtAbort <= 3 * 4 * 1024 * 1024 * 8, `copied ${lastBytes - bytesAtAbort} bytes after the cancel`);
    console.log(`      stopped ${took.toFixed(1)} ms after the cancel, ${lastBytes - bytesAtAbort} bytes after it`);
    assert.equal(fs.existsSync(path.join(staticDir, 'cancel')), false);
    assert.equal((await inspect(staticDir, 'cancel')).state, 'free');
  });

  describe('failure at every step of adding to an area that already holds artifacts', () => {
    let dir: string;
    let before: Map<string, string>;
    let addition: string;

    beforeEach(async () => {
      await stage(staticDir, 'eve/R2', [build]);
      dir = path.join(staticDir, 'eve', 'R2');
      before = artifactsOf(dir);
      addition = path.join(root, 'addition');
      fs.mkdirSync(path.join(addition, 'autotest', 'new'), { recursive: true });
      for (let i = 0; i < 6; i++) fs.writeFileSync(path.join(addition, 'autotest', 'new', `f${i}.bin`), crypto.randomBytes(300_000 + i));
      fs.writeFileSync(path.join(addition, 'extra.bin'), crypto.randomBytes(2 * 1024 * 1024 + 3));
      // Large enough to be copied in chunks over several progress intervals.
      fs.writeFileSync(path.join(addition, 'large.bin'), crypto.randomBytes(40 * 1024 * 1024));
      // Overwriting one earlier artifact: on failure it must come back.
      fs.writeFileSync(path.join(addition, 'autotest', 'control'), 'a new control file\n');
    });

    const unchanged = (why: string): void => {
      assert.deepEqual(artifactsOf(dir), before, `earlier artifacts changed after ${why}`);
      assert.deepEqual(
        fs.readdirSync(dir).filter((n) => n.startsWith('.devserver-staging.part')),
        [],
        `temporary files left after ${why}`,
      );
    };

    it('cancelled after each artifact, and in the middle of one', async function () {
      this.timeout(120_000);
      // Each finished artifact sends one event with `done` set, whatever the throttle.
      const finishedEvents = 9; // six new files, extra.bin, large.bin and the replaced control file
      for (let k = 0; k <= finishedEvents; k++) {
        const ac = new AbortController();
        let finished = 0;
        const p = stage(staticDir, 'eve/R2', [addition], {
          add: true,
          overwrite: true,
          signal: ac.signal,
          onProgress: (ev) => {
            // k = 0: at the first report of an artifact in progress; else after the k-th finished.
            if (k === 0 ? ev.done === undefined : ev.done !== undefined && ++finished === k) ac.abort();
          },
        });
        await rejectsWith(p, 'ECANCELED');
        unchanged(k === 0 ? 'a cancel mid-artifact' : `a cancel after artifact ${k} of ${finishedEvents}`);
        assert.equal((await inspect(staticDir, 'eve/R2')).state, 'free');
      }
      // And without a cancel the same staging goes through: the steps above were real.
      const done = await stage(staticDir, 'eve/R2', [addition], { add: true, overwrite: true });
      assert.equal(done.added.length + done.replaced.length, finishedEvents);
    });

    it('stopped by the size limit at every artifact boundary', async () => {
      const sizes = [
        ...fs.readdirSync(path.join(addition, 'autotest', 'new')).map((n) => fs.statSync(path.join(addition, 'autotest', 'new', n)).size),
        fs.statSync(path.join(addition, 'extra.bin')).size,
        fs.statSync(path.join(addition, 'large.bin')).size,
      ];
      const total = sizes.reduce((a, b) => a + b, 0) + 'a new control file\n'.length;
      const limits = new Set<number>([1, total - 1]);
      let acc = 0;
      for (const s of sizes) {
        acc += s;
        limits.add(acc - 1).add(acc + 1);
      }
      for (const maxBytes of limits) {
        if (maxBytes >= total) continue;
        await rejectsWith(stage(staticDir, 'eve/R2', [addition], { add: true, overwrite: true, maxBytes }), 'ETOOBIG', 'eve');
        unchanged(`a size limit of ${maxBytes} bytes`);
      }
    });

    it('failing on a later source, or on a conflict, after earlier artifacts were placed', async () => {
      await rejectsWith(stage(staticDir, 'eve/R2', [addition, path.join(root, 'nope')], { add: true, overwrite: true }), 'ESOURCE', 'nope');
      unchanged('a missing second source');
      const clash = path.join(root, 'clash');
      fs.mkdirSync(clash);
      fs.writeFileSync(path.join(clash, 'image.bin'), 'clash');
      await rejectsWith(stage(staticDir, 'eve/R2', [addition, clash], { add: true, overwrite: false }), 'ECONFLICT');
      unchanged('a conflict');
      fs.symlinkSync('../../../../etc', path.join(clash, 'escape'));
      fs.rmSync(path.join(clash, 'image.bin'));
      await rejectsWith(stage(staticDir, 'eve/R2', [addition, clash], { add: true, overwrite: true }), 'EUNSAFE', 'escape');
      unchanged('an unsafe entry');
    });

    it('while another holds the lock: refused, nothing touched', async () => {
      const lease = await acquire(staticDir, 'eve/R2', { createOnce: false });
      const snap = snapshot(dir);
      await rejectsWith(stage(staticDir, 'eve/R2', [addition], { add: true }), 'ELOCKED');
      assert.deepEqual(snapshot(dir), snap);
      await lease.release();
    });
  });
});
