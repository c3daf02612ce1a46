/**
 * The safety margin of free space: one staging never fills the filesystem, whatever its size
 * limit. Proven on a real small tmpfs (root only), with the kernel's statfs and a co-user's
 * writes as referees.
 */
import { strict as assert } from 'assert';
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { MARGIN_MIN_BYTES, limitOf, safetyMargin, sizeLimit } from '../../../src/core/stage/space';
import { flushHistory } from '../../../src/core/log/history';
import { stage } from '../../../src/core/stage/stage';
import { HISTORY_DIR, META_DIR } from '../../../src/core/base/protocol';
import { python } from '../../fixtures';
import { CLI, cleanup, isRoot, rejectsWith, report, run, snapshot, tempDir, waitFor } from '../../helpers';

const MiB = 1024 ** 2;

/** Everything below `dir` but the tool's bookkeeping directory (an empty trash after a destroy). */
function areas(dir: string): Map<string, string> {
  const all = snapshot(dir);
  for (const p of [...all.keys()]) if (path.relative(dir, p).split(path.sep)[0] === META_DIR) all.delete(p);
  return all;
}
const GiB = 1024 ** 3;

describe('staging keeps a safety margin of free space', () => {
  it('the margin: 5% of the filesystem, at least 256 MiB, at most a quarter of it and 10 GiB', () => {
    assert.equal(safetyMargin(64 * MiB), 16 * MiB, 'a small filesystem stays usable');
    assert.equal(safetyMargin(1 * GiB), 256 * MiB);
    assert.equal(safetyMargin(4 * GiB), MARGIN_MIN_BYTES);
    assert.equal(safetyMargin(100 * GiB), 5 * GiB);
    assert.equal(safetyMargin(1024 * GiB), 10 * GiB);
  });

  it('the limit is the lower of max-size and the free space above the margin; the error says which', () => {
    const byFree = limitOf(64 * GiB, { freeBytes: 100 * MiB, marginBytes: 16 * MiB });
    assert.equal(byFree.bytes, 84 * MiB);
    assert.equal(byFree.by, 'free-space');
    const e1 = byFree.tooBig('bomb.tar.gz#zeros', '/srv/static/eve/R1');
    assert.equal(e1.code, 'ETOOBIG');
    assert.match(e1.message, /would write more than 84\.0 MiB into \/srv\/static\/eve\/R1; stopped before the filesystem fills: it had 100 MiB free, and staging always leaves 16\.0 MiB of it free/);
    assert.deepEqual([e1.reason, e1.next], ['free-space', [{ kind: 'free-space', dir: '/srv/static/eve/R1' }]]);
    assert.match(e1.message, /Free some space or stage onto a larger filesystem\./);
    const byMax = limitOf(10 * MiB, { freeBytes: 100 * MiB, marginBytes: 16 * MiB });
    assert.equal(byMax.by, 'max-size');
    const e2 = byMax.tooBig('x', '/d');
    assert.match(e2.message, /more than the size limit of 10\.0 MiB into \/d; stopped\. Raise the size limit/);
    assert.deepEqual([e2.reason, e2.next], ['max-size', [{ kind: 'raise-size-limit', maxBytes: 10 * MiB }]]);
    const full = limitOf(10 * MiB, { freeBytes: 5 * MiB, marginBytes: 16 * MiB });
    assert.equal(full.bytes, 0, 'below the margin already: nothing may be written');
    assert.equal(limitOf(10 * MiB, undefined).bytes, 10 * MiB, 'without statfs, only max-size');
  });

  describe('on a real 64 MiB tmpfs', function () {
    let root: string;
    let mnt: string;
    let staticDir: string;
    let mounted = false;

    before(async function () {
      if (!isRoot) {
        report('skipped: mounting a tmpfs needs root');
        this.skip();
      }
      root = tempDir('dss-space-');
      mnt = path.join(root, 'mnt');
      fs.mkdirSync(mnt);
      const m = await run('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', mnt]);
      if (m.code !== 0) cleanup(root);
      assert.equal(m.code, 0, `mount -t tmpfs failed as root: ${m.stderr}`);
      mounted = true;
      staticDir = path.join(mnt, 'static');
      fs.mkdirSync(staticDir);
    });
    /**
     * Free space as the builds leave it: the history keeps a record of each staging, failed ones
     * included, which is bookkeeping rather than what a staging gives back (and a record left open
     * by a leaked descriptor would keep its space after the removal, and show).
     */
    const freeBytesBuildsOnly = (): number => {
      fs.rmSync(path.join(staticDir, META_DIR, HISTORY_DIR), { recursive: true, force: true });
      return freeBytes();
    };
    after(async () => {
      // A history record of the last in-process staging may still be on its way to the mount.
      await flushHistory();
      for (let i = 0; mounted && i < 10; i++) {
        if ((await run('umount', [mnt])).code === 0) mounted = false;
        else await new Promise((r) => setTimeout(r, 200));
      }
      if (mounted) await run('umount', ['-l', mnt]);
      if (root !== undefined) cleanup(root);
    });

    const freeBytes = (): number => {
      const st = fs.statfsSync(mnt);
      return st.bavail * st.bsize;
    };

    /**
     * Runs the tool while the test samples the free space and a co-user writes 1 MiB files into the
     * same filesystem over and over: a full disk would show as the co-user's ENOSPC.
     */
    async function underWatch(args: readonly string[]): Promise<{ code: number | null; stderr: string; minFree: number; coUserWrites: number; coUserFull: number }> {
      const before = freeBytes();
      let minFree = before;
      const sampler = setInterval(() => (minFree = Math.min(minFree, freeBytes())), 2);
      const other = path.join(mnt, 'co-user');
      fs.mkdirSync(other, { recursive: true });
      // The co-user writes in its own process, so the tool's run is not slowed by the test's loop.
      const coUser = spawn(
        process.execPath,
        [
          '-e',
          `const fs = require('fs'); let writes = 0, full = 0; const buf = Buffer.alloc(1 << 20, 1);
           const stop = () => { process.stdout.write(JSON.stringify({ writes, full })); process.exit(0); };
           process.on('SIGTERM', stop);
           process.stdout.write('ready\\n');
           (function loop() { try { fs.writeFileSync(process.argv[1] + '/f', buf); fs.unlinkSync(process.argv[1] + '/f'); writes++; } catch (e) { if (e.code === 'ENOSPC') full++; else throw e; } setImmediate(loop); })();`,
          other,
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      let coOut = '';
      coUser.stdout.on('data', (d: Buffer) => (coOut += d.toString()));
      const coDone = new Promise<void>((resolve) => coUser.once('close', () => resolve()));
      try {
        // Once it writes (its SIGTERM handler is in place): a tool that ends sooner would otherwise kill it silent.
        await waitFor(() => (coOut.startsWith('ready\n') || coUser.exitCode !== null ? true : undefined), 30_000, 'the co-user to start');
        const r = await run(process.execPath, [CLI, ...args], { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir } });
        coUser.kill('SIGTERM');
        await coDone;
        const co = JSON.parse(coOut.slice('ready\n'.length)) as { writes: number; full: number };
        return { code: r.code, stderr: r.stderr, minFree, coUserWrites: co.writes, coUserFull: co.full };
      } finally {
        clearInterval(sampler);
        if (coUser.exitCode === null) coUser.kill('SIGKILL');
        fs.rmSync(other, { recursive: true, force: true });
      }
    }

    it('an archive bomb (190 KB unpacking to 200 MB) fails with ETOOBIG before the disk fills, and leaves nothing', async () => {
      const bomb = path.join(root, 'bomb.tar.gz');
      // A stream of zeros, never a 200 MB file on disk.
      await python(
        [
          'import io, sys, tarfile',
          'class Zeros(io.RawIOBase):',
          '    def readable(self):',
          '        return True',
          '    def readinto(self, b):',
          '        b[:] = bytes(len(b)); return len(b)',
          'with tarfile.open(sys.argv[1], "w:gz") as t:',
          '    info = tarfile.TarInfo("zeros.bin"); info.size = 200_000_000',
          '    t.addfile(info, io.BufferedReader(Zeros()))',
        ].join('\n'),
        bomb,
      );
      const start = freeBytesBuildsOnly();
      const before = areas(staticDir);
      const r = await underWatch(['stage', 'eve/bomb', bomb]);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /would write more than .* stopped before the filesystem fills: it had .* free, and staging always leaves 16\.0 MiB of it free/);
      report(`bomb of ${fs.statSync(bomb).size} B: lowest free space seen ${(r.minFree / MiB).toFixed(1)} MiB of 64 MiB; co-user: ${r.coUserWrites} writes, ${r.coUserFull} ENOSPC`);
      assert.equal(r.coUserFull, 0, 'the co-user never found the disk full');
      assert.ok(r.coUserWrites > 0);
      assert.ok(r.minFree > 0, `free space seen ${r.minFree}`);
      assert.deepEqual(areas(staticDir), before, 'the new build is gone, nothing left behind');
      assert.equal(freeBytesBuildsOnly(), start, 'all the space is given back');
    });

    it('a directory larger than the free space fails the same way, before filling the disk; one that fits is staged', async () => {
      const big = path.join(root, 'big');
      fs.mkdirSync(big);
      for (let i = 0; i < 10; i++) fs.writeFileSync(path.join(big, `part-${i}.bin`), Buffer.alloc(8 * MiB, i));
      const start = freeBytesBuildsOnly();
      const before = areas(staticDir);
      const r = await underWatch(['stage', 'eve/big', big]);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /stopped before the filesystem fills/);
      report(`80 MiB directory: lowest free space seen ${(r.minFree / MiB).toFixed(1)} MiB; co-user: ${r.coUserWrites} writes, ${r.coUserFull} ENOSPC`);
      assert.equal(r.coUserFull, 0);
      assert.deepEqual(areas(staticDir), before);
      assert.equal(freeBytesBuildsOnly(), start);

      // 24 MiB fits above the margin of 16 MiB: the small filesystem stays usable.
      for (let i = 3; i < 10; i++) fs.rmSync(path.join(big, `part-${i}.bin`));
      const ok = await run(process.execPath, [CLI, 'stage', 'eve/fits', big], { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir } });
      assert.equal(ok.code, 0, ok.stderr);
      // Now less is free: 36 MiB more would leave less than the margin, though --max-size allows it.
      const more = path.join(root, 'more');
      fs.mkdirSync(more);
      for (let i = 0; i < 3; i++) fs.writeFileSync(path.join(more, `more-${i}.bin`), Buffer.alloc(12 * MiB, i));
      const beforeAdd = areas(staticDir);
      const added = await run(process.execPath, [CLI, '--json', 'stage', '--add', '--max-size', '1G', 'eve/fits', more], {
        env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir },
      });
      assert.equal(added.code, 1, added.stderr);
      const body = JSON.parse(added.stderr.trimEnd().split('\n').pop()!) as { error: { code: string; message: string } };
      assert.equal(body.error.code, 'ETOOBIG');
      assert.match(body.error.message, /stopped before the filesystem fills/);
      assert.deepEqual(areas(staticDir), beforeAdd, 'the build is as it was');
      // And where --max-size is the lower limit, the error names it.
      const capped = await run(process.execPath, [CLI, 'stage', '--add', '--max-size', '5M', 'eve/fits', more], { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir } });
      assert.equal(capped.code, 1);
      assert.match(capped.stderr, /size limit of 5\.0 MiB into .*Raise the size limit \(--max-size\)/);
    });

    it('the core reads the free space of the area’s own filesystem', async () => {
      const limit = await sizeLimit(staticDir, 64 * GiB);
      assert.equal(limit.by, 'free-space');
      assert.equal(limit.marginBytes, 16 * MiB);
      assert.ok(limit.bytes <= freeBytes() - 16 * MiB && limit.bytes > 0);
      const src = path.join(root, 'src.bin');
      fs.writeFileSync(src, Buffer.alloc(60 * MiB));
      await rejectsWith(stage(staticDir, 'eve/core', [src]), 'ETOOBIG', 'stopped before the filesystem fills');
      assert.equal(fs.existsSync(path.join(staticDir, 'eve/core')), false);
    });
  });
});
