/**
 * Verifying real staged builds: each kind of damage made on disk as it happens (a file deleted,
 * cut short, a byte flipped, one added), bookkeeping that must never count as damage, and what a
 * hostile co-user plants in place of an artifact (a FIFO, a link out of the static directory).
 */
import { strict as assert } from 'assert';
import { spawnSync } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { VerifyProgressView } from '../../../src/cli/progress';
import { acquire } from '../../../src/core/lock/lock';
import { isBookkeeping } from '../../../src/core/base/protocol';
import { stage } from '../../../src/core/stage/stage';
import { MANIFEST_FILE, TIMESTAMP_FILE } from '../../../src/core/stage/types';
import { verify, type VerifyProblem, type VerifyProgress, type VerifyResult } from '../../../src/core/verify';
import { PYTHON, sha } from '../../fixtures';
import { cleanup, cli, rejectsWith, run, tempDir } from '../../helpers';

const LARGE = 3 * 1024 * 1024 + 17;

/** The problems as `kind path` lines, for assertions that say at once what was found. */
const brief = (r: VerifyResult): string[] => r.problems.map((p) => `${p.kind} ${p.path}`);

describe('verify', () => {
  let root: string;
  let staticDir: string;
  let build: string;
  let area: string;

  beforeEach(async () => {
    root = tempDir('dss-verify-');
    staticDir = path.join(root, 'static');
    build = path.join(root, 'build');
    fs.mkdirSync(staticDir);
    fs.mkdirSync(path.join(build, 'autotest', 'packages'), { recursive: true });
    // Larger than the main thread's limit (hashed in a worker thread) and smaller (hashed on the main thread).
    fs.writeFileSync(path.join(build, 'image.bin'), crypto.randomBytes(LARGE));
    fs.writeFileSync(path.join(build, 'autotest', 'control'), 'control file\n');
    fs.writeFileSync(path.join(build, 'autotest', 'packages', 'client.tar'), crypto.randomBytes(200_000));
    fs.symlinkSync('packages/client.tar', path.join(build, 'autotest', 'client-latest.tar'));
    await stage(staticDir, 'eve/R1', [build]);
    area = path.join(staticDir, 'eve', 'R1');
  });
  afterEach(() => cleanup(root));

  it('a build as staged is OK: every artifact checked, every byte hashed, the lock free, progress to the end', async () => {
    const seen: VerifyProgress[] = [];
    const r = await verify(staticDir, 'eve/R1', { onProgress: (p) => seen.push(p) });
    assert.deepEqual(brief(r), []);
    assert.equal(r.ok, true);
    assert.equal(r.state, 'free');
    assert.equal(r.tag, 'eve/R1');
    assert.equal(r.dir, area);
    assert.equal(r.checkedFiles, 4);
    assert.equal(r.checkedBytes, LARGE + 13 + 200_000);
    const last = seen[seen.length - 1];
    assert.deepEqual(last, { files: 4, totalFiles: 4, bytes: LARGE + 13 + 200_000, totalBytes: LARGE + 13 + 200_000 });
    // Plain data: what JSON gives back is the same.
    assert.deepEqual(JSON.parse(JSON.stringify(r)), r);
  });

  it('a deleted file is missing; a deleted directory makes each artifact in it missing', async () => {
    fs.rmSync(path.join(area, 'image.bin'));
    fs.rmSync(path.join(area, 'autotest', 'packages'), { recursive: true });
    const r = await verify(staticDir, 'eve/R1');
    assert.equal(r.ok, false);
    assert.deepEqual(brief(r), ['missing autotest/packages/client.tar', 'missing image.bin']);
    assert.equal(r.problems[1].expected!.size, LARGE);
    assert.equal(r.problems[1].actual, undefined);
  });

  it('a file cut short is truncated, one made longer grown, with both sizes', async () => {
    fs.truncateSync(path.join(area, 'image.bin'), 1024);
    fs.appendFileSync(path.join(area, 'autotest', 'control'), 'more\n');
    const r = await verify(staticDir, 'eve/R1');
    assert.deepEqual(brief(r), ['grown autotest/control', 'truncated image.bin']);
    const truncated = r.problems[1];
    assert.deepEqual([truncated.expected!.size, truncated.actual!.size], [LARGE, 1024]);
  });

  it('one byte flipped, size unchanged, is changed, in a large file and a small one, with both hashes', async () => {
    for (const [rel, at] of [
      ['image.bin', 2 * 1024 * 1024 + 5],
      ['autotest/packages/client.tar', 99_999],
    ] as const) {
      const fd = fs.openSync(path.join(area, rel), 'r+');
      const b = Buffer.alloc(1);
      fs.readSync(fd, b, 0, 1, at);
      b[0] = b[0] ^ 0x01;
      fs.writeSync(fd, b, 0, 1, at);
      fs.closeSync(fd);
    }
    const r = await verify(staticDir, 'eve/R1');
    assert.deepEqual(brief(r), ['changed autotest/packages/client.tar', 'changed image.bin']);
    const image = r.problems[1];
    assert.equal(image.actual!.sha256, sha(fs.readFileSync(path.join(area, 'image.bin'))));
    assert.equal(image.expected!.sha256, sha(fs.readFileSync(path.join(build, 'image.bin'))));
    assert.equal(image.actual!.size, LARGE);
  });

  it('a link leading elsewhere is changed; a file where a link was is not-a-link', async () => {
    fs.unlinkSync(path.join(area, 'autotest', 'client-latest.tar'));
    fs.symlinkSync('control', path.join(area, 'autotest', 'client-latest.tar'));
    let r = await verify(staticDir, 'eve/R1');
    assert.deepEqual(brief(r), ['changed autotest/client-latest.tar']);
    assert.deepEqual([r.problems[0].expected!.linkTarget, r.problems[0].actual!.linkTarget], ['packages/client.tar', 'control']);
    fs.unlinkSync(path.join(area, 'autotest', 'client-latest.tar'));
    fs.writeFileSync(path.join(area, 'autotest', 'client-latest.tar'), 'a file');
    r = await verify(staticDir, 'eve/R1');
    assert.deepEqual(brief(r), ['not-a-link autotest/client-latest.tar']);
  });

  it('files and links that the manifest does not list are unlisted, at any depth; empty directories are not', async () => {
    fs.writeFileSync(path.join(area, 'extra.bin'), 'extra');
    fs.mkdirSync(path.join(area, 'autotest', 'new', 'deeper'), { recursive: true });
    fs.writeFileSync(path.join(area, 'autotest', 'new', 'deeper', 'x'), 'x');
    fs.symlinkSync('image.bin', path.join(area, 'image-link'));
    fs.mkdirSync(path.join(area, 'empty'));
    const r = await verify(staticDir, 'eve/R1');
    assert.deepEqual(brief(r), ['unlisted autotest/new/deeper/x', 'unlisted extra.bin', 'unlisted image-link']);
    assert.deepEqual(
      r.problems.map((p) => p.actual?.type),
      ['file', 'file', 'symlink'],
    );
  });

  it('bookkeeping is never unlisted: a lock held while verifying (reported as held), the manifest, the fence, staged.timestamp', async () => {
    assert.ok(fs.existsSync(path.join(area, TIMESTAMP_FILE)));
    assert.ok(fs.existsSync(path.join(area, MANIFEST_FILE)));
    const lease = await acquire(staticDir, 'eve/R1', { createOnce: false, purpose: 'staging more' });
    try {
      const r = await verify(staticDir, 'eve/R1');
      assert.deepEqual(brief(r), []);
      assert.equal(r.state, 'held');
    } finally {
      await lease.release();
    }
    assert.equal((await verify(staticDir, 'eve/R1')).state, 'free');
  });

  it("the Python devserver's lock and its unique file are bookkeeping (state legacy); names like them that are artifacts are not", async () => {
    const canPython = fs.existsSync(PYTHON) && (await run(PYTHON, ['-c', 'import lockfile'])).code === 0;
    if (canPython) {
      // The devserver's own lock, left held as a killed devserver leaves it.
      const r = await run(PYTHON, ['-c', 'import lockfile, sys; lockfile.FileLock(sys.argv[1]).acquire(timeout=0)', path.join(area, 'devserver')]);
      assert.equal(r.code, 0, r.stderr);
    } else {
      // Without python3-lockfile: the same two names, made as LinkLockFile makes them.
      fs.writeFileSync(path.join(area, 'buildhost-7f3a2b1c.4242-1311706461754483053'), '');
      fs.linkSync(path.join(area, 'buildhost-7f3a2b1c.4242-1311706461754483053'), path.join(area, 'devserver.lock'));
    }
    const unique = fs.readdirSync(area).filter((n) => /^.+\.\d+-?\d+$/.test(n));
    assert.equal(unique.length, 1, `one unique file: ${fs.readdirSync(area).join(', ')}`);
    const r = await verify(staticDir, 'eve/R1');
    assert.deepEqual(brief(r), []);
    assert.equal(r.state, 'legacy');
    for (const name of ['libc.so.6', 'image.bin.1', 'build.20240101', 'kernel-5.15.0']) {
      assert.equal(isBookkeeping(name), false, name);
    }
    for (const name of ['devserver', 'devserver.lock', 'devserver.lock.claim.1.2.3', '.devserver-staging.fence', MANIFEST_FILE, TIMESTAMP_FILE, unique[0], 'vm.234971701295290597999965']) {
      assert.equal(isBookkeeping(name), true, name);
    }
  });

  it('a FIFO planted in place of an artifact is not-a-file, and is neither waited on nor opened for long', async function () {
    this.timeout(20_000);
    const control = path.join(area, 'autotest', 'control');
    fs.rmSync(control);
    assert.equal(spawnSync('mkfifo', [control]).status, 0);
    // And one beside the artifacts.
    assert.equal(spawnSync('mkfifo', [path.join(area, 'pipe')]).status, 0);
    const t0 = Date.now();
    const r = await verify(staticDir, 'eve/R1');
    assert.ok(Date.now() - t0 < 5_000, `took ${Date.now() - t0} ms`);
    assert.deepEqual(brief(r), ['not-a-file autotest/control', 'unlisted pipe']);
    assert.equal(r.problems[0].actual!.type, 'fifo');
    assert.equal(r.problems[1].actual!.type, 'fifo');
  });

  it('a link out of the static directory planted in place of an artifact, or of a directory, is never followed', async () => {
    // Outside: the very content the build should have, so that following would pass as OK.
    const outside = path.join(root, 'outside');
    fs.cpSync(build, outside, { recursive: true });
    const canary = path.join(outside, 'image.bin');
    const before = sha(fs.readFileSync(canary));
    const beforeStat = fs.statSync(canary);
    fs.rmSync(path.join(area, 'image.bin'));
    fs.symlinkSync(canary, path.join(area, 'image.bin'));
    fs.rmSync(path.join(area, 'autotest'), { recursive: true });
    fs.symlinkSync(path.join(outside, 'autotest'), path.join(area, 'autotest'));
    const r = await verify(staticDir, 'eve/R1');
    assert.deepEqual(brief(r), [
      'unlisted autotest',
      'missing autotest/client-latest.tar',
      'missing autotest/control',
      'missing autotest/packages/client.tar',
      'not-a-file image.bin',
    ]);
    assert.match(r.problems[1].detail ?? '', /autotest is a symbolic link, not a directory/);
    assert.equal(r.problems[4].actual!.type, 'symlink');
    assert.equal(sha(fs.readFileSync(canary)), before);
    const afterStat = fs.statSync(canary);
    assert.equal(afterStat.mtimeMs, beforeStat.mtimeMs);
    assert.equal(afterStat.size, beforeStat.size);
  });

  it('a file this user cannot read is unreadable', async function () {
    if (typeof process.getuid === 'function' && process.getuid() === 0) {
      // Root reads everything: the check runs as nobody instead.
      fs.chmodSync(root, 0o755);
      fs.chmodSync(path.join(area, 'autotest', 'control'), 0o600);
      const core = path.join(__dirname, '..', '..', '..', 'src', 'core', 'verify.js');
      const script = `require(${JSON.stringify(core)}).verify(process.argv[1], 'eve/R1').then((r) => console.log(JSON.stringify(r)))`;
      const r = await run('runuser', ['-u', 'nobody', '--', process.execPath, '-e', script, staticDir]);
      if (r.code === null || /runuser: /.test(r.stderr)) this.skip();
      assert.equal(r.code, 0, r.stderr);
      const body = JSON.parse(r.stdout) as VerifyResult;
      assert.deepEqual(brief(body), ['unreadable autotest/control']);
      assert.match(body.problems[0].detail!, /permission denied/);
      return;
    }
    fs.chmodSync(path.join(area, 'autotest', 'control'), 0o000);
    const r = await verify(staticDir, 'eve/R1');
    assert.deepEqual(brief(r), ['unreadable autotest/control']);
  });

  it('cancelling mid-way rejects with ECANCELED promptly; cancelling before it starts, at once', async function () {
    this.timeout(60_000);
    const big = path.join(root, 'big');
    fs.mkdirSync(big);
    const chunk = crypto.randomBytes(8 * 1024 * 1024);
    for (let i = 0; i < 3; i++) {
      const fd = fs.openSync(path.join(big, `image-${i}.bin`), 'w');
      for (let w = 0; w < 24; w++) {
        chunk.writeUInt32LE(i * 1000 + w, 0);
        fs.writeSync(fd, chunk);
      }
      fs.closeSync(fd);
    }
    await stage(staticDir, 'eve/big', [big]);
    const controller = new AbortController();
    let abortedAt = 0;
    const p = verify(staticDir, 'eve/big', {
      concurrency: 1,
      signal: controller.signal,
      onProgress: (pr) => {
        if (abortedAt === 0 && pr.bytes > 0 && pr.bytes < pr.totalBytes) {
          abortedAt = Date.now();
          controller.abort();
        }
      },
    });
    await rejectsWith(p, 'ECANCELED', 'eve/big');
    assert.ok(abortedAt > 0, 'aborted while it ran');
    assert.ok(Date.now() - abortedAt < 1_000, `rejected ${Date.now() - abortedAt} ms after the abort`);
    await rejectsWith(verify(staticDir, 'eve/R1', { signal: AbortSignal.abort() }), 'ECANCELED');
  });

  it('no such build: ENOENT; no manifest: ENOMANIFEST saying what to do; a damaged manifest: ECORRUPT; a FIFO as manifest: refused, not waited on', async () => {
    await rejectsWith(verify(staticDir, 'eve/R2'), 'ENOENT', 'eve/R2');
    fs.mkdirSync(path.join(staticDir, 'eve', 'R3'));
    fs.writeFileSync(path.join(staticDir, 'eve', 'R3', 'image.bin'), 'x');
    const e = await rejectsWith(verify(staticDir, 'eve/R3'), 'ENOMANIFEST', 'eve/R3');
    assert.deepEqual(e.next, [{ kind: 'add', staticDir, tag: 'eve/R3' }]);
    assert.match(e.message, /stage its sources again/);
    fs.writeFileSync(path.join(area, MANIFEST_FILE), '{"version":1,"artifacts":{"x":null}}');
    await rejectsWith(verify(staticDir, 'eve/R1'), 'ECORRUPT', MANIFEST_FILE);
    fs.rmSync(path.join(area, MANIFEST_FILE));
    assert.equal(spawnSync('mkfifo', [path.join(area, MANIFEST_FILE)]).status, 0);
    await rejectsWith(verify(staticDir, 'eve/R1'), 'EIO', /FIFO/);
    await rejectsWith(verify(staticDir, '../x'), 'EBADTAG');
  });

  describe('devserver-stage verify', () => {
    it('exit 0 and a summary line for a good build', async () => {
      const r = await cli(staticDir, ['verify', 'eve/R1']);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, 'eve/R1: 4 files, 3.2 MiB verified, OK\n');
      assert.equal(r.stderr, '', 'no progress where stderr is not a terminal');
    });

    it('exit 1 with one line per problem and the count for a damaged one; --json gives the result', async () => {
      fs.rmSync(path.join(area, 'autotest', 'control'));
      fs.writeFileSync(path.join(area, 'extra.bin'), 'extra');
      const r = await cli(staticDir, ['verify', 'eve/R1']);
      assert.equal(r.code, 1, r.stderr);
      assert.deepEqual(r.stdout.split('\n'), [
        'missing     autotest/control',
        'unlisted    extra.bin: a file',
        'eve/R1: 4 files, 3.2 MiB verified, DAMAGED: 2 problems',
        '',
      ]);
      const j = await cli(staticDir, ['--json', 'verify', 'eve/R1']);
      assert.equal(j.code, 1, j.stderr);
      const body = JSON.parse(j.stdout) as VerifyResult;
      assert.equal(body.ok, false);
      assert.equal(body.state, 'free');
      assert.equal(body.checkedFiles, 4);
      assert.deepEqual(
        body.problems.map((p: VerifyProblem) => [p.path, p.kind]),
        [
          ['autotest/control', 'missing'],
          ['extra.bin', 'unlisted'],
        ],
      );
      assert.deepEqual(Object.keys(body).sort(), ['checkedBytes', 'checkedFiles', 'dir', 'ok', 'problems', 'state', 'staticDir', 'tag']);
    });

    it('says when the build is held while verified', async () => {
      const lease = await acquire(staticDir, 'eve/R1', { createOnce: false });
      try {
        const r = await cli(staticDir, ['verify', 'eve/R1']);
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stdout, /note: eve\/R1 was held while it was verified: it may be being staged, and these results may change\./);
      } finally {
        await lease.release();
      }
    });

    it('progress on a terminal is one line redrawn in place, cut to its width; elsewhere there is none', () => {
      let out = '';
      const view = new VerifyProgressView({ write: (t: string) => (out += t), draw: (t: string) => (out += t), isTTY: true, columns: 60 });
      view.update({ files: 312, totalFiles: 2014, bytes: 512 * 1024 ** 2, totalBytes: 1024 ** 3, current: 'autotest/packages/a-rather-long-directory/client.tar' });
      const line = out.slice(1, out.indexOf('\x1b[K'));
      assert.ok(out.startsWith('\r'));
      assert.ok(line.startsWith('[312/2,014 files] 512 MiB of 1.0 GiB (50%)  '), line);
      assert.ok(line.length <= 59 && line.endsWith('client.tar'), line);
      view.clear();
      assert.ok(out.endsWith('\r\x1b[K'));
      let piped = '';
      const quiet = new VerifyProgressView({ write: (t: string) => (piped += t), draw: (t: string) => (piped += t), isTTY: false });
      quiet.update({ files: 1, totalFiles: 2, bytes: 1, totalBytes: 2 });
      quiet.clear();
      assert.equal(piped, '');
    });

    it('errors are coded, as JSON with --json: no manifest exit 1, a bad tag exit 2; --help exit 0', async () => {
      fs.mkdirSync(path.join(staticDir, 'eve', 'R3'));
      const r = await cli(staticDir, ['--json', 'verify', 'eve/R3']);
      assert.equal(r.code, 1);
      assert.equal(r.stdout, '');
      const err = (JSON.parse(r.stderr) as { error: { code: string; message: string; path: string } }).error;
      assert.equal(err.code, 'ENOMANIFEST');
      assert.equal(err.path, path.join(staticDir, 'eve', 'R3', MANIFEST_FILE));
      assert.equal((await cli(staticDir, ['verify', '../etc'])).code, 2);
      const none = await cli(staticDir, ['--json', 'verify', 'eve/R9']);
      assert.equal(none.code, 1);
      assert.equal((JSON.parse(none.stderr) as { error: { code: string } }).error.code, 'ENOENT');
      const help = await cli(staticDir, ['verify', '--help']);
      assert.equal(help.code, 0);
      assert.match(help.stdout, /Usage: devserver-stage verify/);
      assert.match((await cli(staticDir, ['--help'])).stdout, /\bverify\b/);
    });
  });
});
