/**
 * `devserver-stage stage`, `du` and `prune` as scripts run them: the built tool in real processes
 * on a real static directory, plus the pieces of their output (sizes, durations, progress).
 */
import { strict as assert } from 'assert';
import { spawn } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as http from 'http';
import type { AddressInfo } from 'net';
import * as path from 'path';
import { StageProgressView } from '../../../src/cli/progress';
import { formatStageResult } from '../../../src/cli/stageCommand';
import { formatBytes, parseDuration, parseSize } from '../../../src/cli/units';
import { inspect } from '../../../src/core/lock/inspect';
import { acquire } from '../../../src/core/lock/lock';
import { META_DIR } from '../../../src/core/base/protocol';
import { MANIFEST_FILE, TIMESTAMP_FILE, type StageProgress, type StageResult } from '../../../src/core/stage/types';
import type { AreaUsage, PruneResult } from '../../../src/core';
import { python } from '../../fixtures';
import { TOOL, cleanup, isRoot, run, snapshot, tempDir, waitFor } from '../../helpers';


const DAY = 86_400_000;

function tool(staticDir: string, args: readonly string[]): ReturnType<typeof run> {
  return run(process.execPath, [TOOL, ...args], { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir } });
}

/** Everything below `dir` but our bookkeeping directory (clock probe, trash, audit log). */
function snapshotWithoutMeta(dir: string): Map<string, string> {
  const all = snapshot(dir);
  for (const p of [...all.keys()]) if (path.relative(dir, p).split(path.sep)[0] === META_DIR) all.delete(p);
  return all;
}

interface Trickle {
  url: string;
  /** Bytes written to responses so far. */
  sent(): number;
  close(): Promise<void>;
}

/** An HTTP server on 127.0.0.1 that sends `total` bytes, `chunk` bytes every `everyMs`: a slow download. */
async function trickleServer(total: number, chunk: number, everyMs: number): Promise<Trickle> {
  let sent = 0;
  const timers = new Set<NodeJS.Timeout>();
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': String(total) });
    let left = total;
    const timer = setInterval(() => {
      const n = Math.min(chunk, left);
      res.write(Buffer.alloc(n, 7));
      sent += n;
      left -= n;
      if (left === 0) {
        clearInterval(timer);
        res.end();
      }
    }, everyMs);
    timers.add(timer);
    req.on('close', () => clearInterval(timer));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    sent: () => sent,
    close: async () => {
      for (const t of timers) clearInterval(t);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('devserver-stage stage, du and prune', () => {
  let root: string;
  let staticDir: string;
  let build: string;

  beforeEach(() => {
    root = tempDir('dss-cli-stage-');
    staticDir = path.join(root, 'static');
    build = path.join(root, 'build');
    fs.mkdirSync(staticDir);
    fs.mkdirSync(path.join(build, 'autotest'), { recursive: true });
    fs.writeFileSync(path.join(build, 'image.bin'), crypto.randomBytes(300_000));
    fs.writeFileSync(path.join(build, 'autotest', 'control'), 'control file\n');
    fs.writeFileSync(path.join(root, 'extra.txt'), 'extra\n');
    fs.writeFileSync(path.join(root, 'notes.txt'), 'notes\n');
  });
  afterEach(() => cleanup(root));

  it('has help for each new command, listed in the tool help', async () => {
    const top = await tool(staticDir, ['--help']);
    assert.equal(top.code, 0);
    for (const c of ['stage', 'du', 'prune']) {
      assert.match(top.stdout, new RegExp(`\\n  ${c} `));
      const r = await tool(staticDir, [c, '--help']);
      assert.equal(r.code, 0, `${c} --help`);
      assert.match(r.stdout, new RegExp(`Usage: devserver-stage ${c}`));
    }
    assert.match((await tool(staticDir, ['stage', '--help'])).stdout, /--max-size <size>[\s\S]*--wait <seconds>[\s\S]*--purpose <text>/);
    assert.match((await tool(staticDir, ['prune', '--help'])).stdout, /--keep <n>[\s\S]*--older-than <duration>[\s\S]*--dry-run/);
  });

  describe('stage', () => {
    it('stages a directory and files into a new tag, then adds, skips the identical and handles a conflict', async () => {
      const first = await tool(staticDir, ['stage', 'eve/R1', build, path.join(root, 'extra.txt')]);
      assert.equal(first.code, 0, first.stderr);
      assert.match(first.stdout, /^Staged eve\/R1 \(new build\): 3 added, 0 skipped as identical, 0 replaced\.$/m);
      assert.match(first.stdout, /29\d KiB written in \d+\.\d s.* to .*eve\/R1\.$/m);
      const dir = path.join(staticDir, 'eve', 'R1');
      assert.deepEqual(fs.readFileSync(path.join(dir, 'image.bin')), fs.readFileSync(path.join(build, 'image.bin')));
      assert.equal(fs.readFileSync(path.join(dir, 'autotest', 'control'), 'utf8'), 'control file\n');
      assert.equal(fs.readFileSync(path.join(dir, 'extra.txt'), 'utf8'), 'extra\n');
      assert.ok(fs.existsSync(path.join(dir, MANIFEST_FILE)) && fs.existsSync(path.join(dir, TIMESTAMP_FILE)));
      assert.equal((await inspect(staticDir, 'eve/R1')).state, 'free', 'the lock is released');

      const again = await tool(staticDir, ['stage', 'eve/R1', path.join(root, 'notes.txt')]);
      assert.equal(again.code, 1, 'a new build is create-once');
      assert.match(again.stderr, /already exists/);

      const added = await tool(staticDir, ['stage', '--add', 'eve/R1', path.join(root, 'notes.txt'), path.join(root, 'extra.txt')]);
      assert.equal(added.code, 0, added.stderr);
      assert.match(added.stdout, /^Staged eve\/R1: 1 added, 1 skipped as identical, 0 replaced\.$/m);

      const identical = await tool(staticDir, ['stage', '--add', 'eve/R1', build]);
      assert.equal(identical.code, 0, identical.stderr);
      assert.match(identical.stdout, /0 added, 2 skipped as identical, 0 replaced/);
      assert.match(identical.stdout, /^0 B written\b/m, 'identical artifacts are not counted as written');

      fs.writeFileSync(path.join(build, 'autotest', 'control'), 'another control file\n');
      const conflict = await tool(staticDir, ['stage', '--add', 'eve/R1', build]);
      assert.equal(conflict.code, 1);
      assert.match(conflict.stderr, /autotest\/control/);
      assert.equal(conflict.stdout, '');
      assert.equal(fs.readFileSync(path.join(dir, 'autotest', 'control'), 'utf8'), 'control file\n', 'the staged artifact stays');

      const replaced = await tool(staticDir, ['stage', '--add', '--overwrite', 'eve/R1', build]);
      assert.equal(replaced.code, 0, replaced.stderr);
      assert.match(replaced.stdout, /0 added, 1 skipped as identical, 1 replaced/);
      assert.match(replaced.stdout, /^Replaced: autotest\/control\.$/m);
      assert.equal(fs.readFileSync(path.join(dir, 'autotest', 'control'), 'utf8'), 'another control file\n');
    });

    it('unpacks each kind of archive with the libraries bundled in the tool: tar, tar.gz, tar.xz, zip', async () => {
      // The bundle, not the sources, is under test: a build step that rewrote a library's code
      // (a UMD wrapper taken for a module helper) once left tar.xz unpackable by the tool alone.
      const archives = path.join(root, 'archives');
      fs.mkdirSync(archives);
      await python(
        [
          'import io, sys, tarfile, zipfile',
          'out = sys.argv[1]',
          'def add(t):',
          '    data = b"unpacked by the tool\\n"',
          '    info = tarfile.TarInfo("image/readme.txt"); info.size = len(data); t.addfile(info, io.BytesIO(data))',
          'for name, mode in (("b.tar", "w"), ("b.tar.gz", "w:gz"), ("b.tar.xz", "w:xz")):',
          '    with tarfile.open(f"{out}/{name}", mode) as t: add(t)',
          'with zipfile.ZipFile(f"{out}/b.zip", "w", zipfile.ZIP_DEFLATED) as z: z.writestr("image/readme.txt", "unpacked by the tool\\n")',
        ].join('\n'),
        archives,
      );
      for (const kind of ['tar', 'tar.gz', 'tar.xz', 'zip']) {
        const tag = `archives/${kind.replace('.', '-')}`;
        const r = await tool(staticDir, ['stage', tag, path.join(archives, `b.${kind}`)]);
        assert.equal(r.code, 0, `${kind}: ${r.stderr}`);
        assert.equal(fs.readFileSync(path.join(staticDir, ...tag.split('/'), 'image', 'readme.txt'), 'utf8'), 'unpacked by the tool\n', kind);
      }
    });

    it('stages a .tar.xz with the built-in decoder where the system has no xz, or an xz that cannot start', async function () {
      if (!isRoot) this.skip(); // a mount namespace (unshare --mount) hides the system's xz, and needs root
      this.timeout(60_000);
      const archives = path.join(root, 'xz-hidden');
      fs.mkdirSync(archives);
      const content = crypto.randomBytes(30_000).toString('hex');
      // CRC64 (what the built-in decoder reads) and SHA-256 (what only the system's xz reads).
      await python(
        [
          'import io, lzma, sys, tarfile',
          'out, text = sys.argv[1], sys.argv[2].encode()',
          'for name, check in (("crc64", lzma.CHECK_CRC64), ("sha256", lzma.CHECK_SHA256)):',
          '    with lzma.open(f"{out}/{name}.tar.xz", "wb", check=check) as raw, tarfile.open(fileobj=raw, mode="w") as t:',
          '        info = tarfile.TarInfo("image/data.txt"); info.size = len(text); t.addfile(info, io.BytesIO(text))',
        ].join('\n'),
        archives,
        content,
      );
      // Executable, but its interpreter is missing: found, and fails to start.
      const broken = path.join(archives, 'broken-xz');
      fs.writeFileSync(broken, '#!/nonexistent/interpreter\n', { mode: 0o755 });
      // Each of the places the tool looks for xz is covered, in a mount namespace of the tool's own,
      // by something that is not a program (/dev/null: not executable, so never found) or by a
      // program that cannot start; PATH holds no xz either. The script first proves that no xz
      // can run there.
      const hidden = (cover: string, args: readonly string[]): ReturnType<typeof run> =>
        run(
          'unshare',
          [
            '--mount',
            'sh',
            '-c',
            'cover=$1; shift; for x in /usr/bin/xz /bin/xz /usr/local/bin/xz; do if [ -e "$x" ]; then mount --bind "$cover" "$x" || exit 91; fi; done; ' +
              'for x in /usr/bin/xz /bin/xz /usr/local/bin/xz; do if "$x" --version >/dev/null 2>&1; then echo "$x still runs" >&2; exit 90; fi; done; ' +
              'exec env PATH=/nonexistent "$@"',
            'sh',
            cover,
            process.execPath,
            TOOL,
            ...args,
          ],
          { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir } },
        );
      for (const [cover, what] of [
        ['/dev/null', 'no xz'],
        [broken, 'an xz that cannot start'],
      ] as const) {
        const tag = `xz/${what.replace(/ /g, '-')}`;
        const r = await hidden(cover, ['stage', tag, path.join(archives, 'crc64.tar.xz')]);
        assert.equal(r.code, 0, `${what}: ${r.stderr}`);
        const dir = path.join(staticDir, ...tag.split('/'));
        assert.equal(fs.readFileSync(path.join(dir, 'image', 'data.txt'), 'utf8'), content, what);
        assert.ok(fs.existsSync(path.join(dir, MANIFEST_FILE)), `${what}: a manifest`);
        const verified = await tool(staticDir, ['verify', tag]);
        assert.equal(verified.code, 0, `${what}: ${verified.stdout}${verified.stderr}`);
        // The built-in decoder really read it: it is the one that refuses a SHA-256 check, which
        // the system's xz reads (below), and the failed new build leaves nothing.
        const refused = await hidden(cover, ['stage', `${tag}-sha256`, path.join(archives, 'sha256.tar.xz')]);
        assert.equal(refused.code, 1, `${what}: ${refused.stderr}`);
        assert.match(refused.stderr, /built-in decoder does not support \(a SHA-256/, what);
        assert.equal(fs.existsSync(path.join(staticDir, 'xz', `${what.replace(/ /g, '-')}-sha256`)), false, `${what}: nothing left of the refused build`);
      }
      const withXz = await tool(staticDir, ['stage', 'xz/system-sha256', path.join(archives, 'sha256.tar.xz')]);
      assert.equal(withXz.code, 0, withXz.stderr);
      assert.equal(fs.readFileSync(path.join(staticDir, 'xz', 'system-sha256', 'image', 'data.txt'), 'utf8'), content);
    });

    it('--json prints the result; progress goes to stderr as plain lines, at most one per artifact', async () => {
      const r = await tool(staticDir, ['--json', 'stage', 'eve/R2', build]);
      assert.equal(r.code, 0, r.stderr);
      const result = JSON.parse(r.stdout) as StageResult;
      assert.equal(result.tag, 'eve/R2');
      assert.equal(result.created, true);
      assert.deepEqual(result.added.map((e) => e.name).sort(), ['autotest/control', 'image.bin']);
      assert.equal(result.bytes, 300_000 + 13);
      const lines = r.stderr.split('\n').filter((l) => l !== '');
      assert.ok(lines.length >= 1 && lines.length <= 2, `one line per artifact at most:\n${r.stderr}`);
      assert.match(lines[lines.length - 1], /^done: .*2 artifacts, 293 KiB so far$/);
      assert.ok(!r.stderr.includes('\r'), 'no terminal redraws when stderr is not a terminal');
      // The option works after the command too.
      const after = await tool(staticDir, ['stage', '--add', 'eve/R2', build, '--json']);
      assert.equal((JSON.parse(after.stdout) as StageResult).skipped.length, 2);
    });

    it('exit codes: 2 for usage and bad tags, 3 when held by another, 1 for source errors and the size limit', async () => {
      assert.equal((await tool(staticDir, ['stage', 'eve/R3'])).code, 2, 'no source');
      const badTag = await tool(staticDir, ['stage', '../outside', build]);
      assert.equal(badTag.code, 2);
      assert.match(badTag.stderr, /Invalid tag/);
      const badSize = await tool(staticDir, ['stage', '--max-size', 'lots', 'eve/R3', build]);
      assert.equal(badSize.code, 2);
      assert.match(badSize.stderr, /500M/);
      const missing = await tool(staticDir, ['stage', 'eve/R3', path.join(root, 'missing')]);
      assert.equal(missing.code, 1);
      assert.match(missing.stderr, /missing/);
      const tooBig = await tool(staticDir, ['stage', '--max-size', '100K', 'eve/R3', build]);
      assert.equal(tooBig.code, 1);
      assert.match(tooBig.stderr, /more than/);
      assert.equal(fs.existsSync(path.join(staticDir, 'eve', 'R3')), false, 'a failed new build is removed');
      const lease = await acquire(staticDir, 'eve/R4', { purpose: 'held by the test' });
      try {
        const held = await tool(staticDir, ['stage', '--add', 'eve/R4', build]);
        assert.equal(held.code, 3);
        assert.match(held.stderr, /held by the test/);
        setTimeout(() => void lease.release(), 300);
        const waited = await tool(staticDir, ['stage', '--add', '--wait', '20', 'eve/R4', build]);
        assert.equal(waited.code, 0, waited.stderr);
        assert.match(waited.stdout, /2 added/);
      } finally {
        if (lease.state === 'held') await lease.release();
      }
    });

    describe('Ctrl-C during a slow download', () => {
      let server: Trickle;
      beforeEach(async () => {
        server = await trickleServer(4 * 1024 * 1024, 2048, 50);
      });
      afterEach(() => server.close());

      async function interrupt(args: readonly string[], before: () => boolean): Promise<{ code: number | null; stderr: string }> {
        const child = spawn(process.execPath, [TOOL, ...args], {
          env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let stderr = '';
        child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
        child.stdout.resume();
        const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
        try {
          await waitFor(() => (before() ? true : undefined), 20_000, 'the download to be under way');
        } catch (err) {
          child.kill('SIGKILL');
          throw new Error(`${(err as Error).message}; stderr:\n${stderr}`);
        }
        child.kill('SIGINT');
        return { code: await exited, stderr };
      }

      it('a new build: exits 130 and leaves nothing but what was there before', async function () {
        this.timeout(60_000);
        const r0 = await tool(staticDir, ['stage', 'eve/R1', build]);
        assert.equal(r0.code, 0, r0.stderr);
        const before = snapshotWithoutMeta(staticDir);
        const r = await interrupt(['stage', 'eve/R5', `${server.url}/slow.bin`], () => server.sent() >= 64 * 1024 && fs.existsSync(path.join(staticDir, 'eve', 'R5')));
        assert.equal(r.code, 130, r.stderr);
        assert.match(r.stderr, /Interrupted: stopping/);
        assert.deepEqual(snapshotWithoutMeta(staticDir), before, 'nothing left but what was there before');
        assert.equal((await inspect(staticDir, 'eve/R5')).exists, false);
      });

      it('adding to a build: exits 130 and the build is as it was, timestamp included', async function () {
        this.timeout(60_000);
        const r0 = await tool(staticDir, ['stage', 'eve/R1', build]);
        assert.equal(r0.code, 0, r0.stderr);
        const stamp = path.join(staticDir, 'eve', 'R1', TIMESTAMP_FILE);
        fs.utimesSync(stamp, (Date.now() - DAY) / 1000, (Date.now() - DAY) / 1000);
        const before = snapshotWithoutMeta(staticDir);
        const r = await interrupt(['stage', '--add', 'eve/R1', `${server.url}/slow.bin`], () => server.sent() >= 64 * 1024);
        assert.equal(r.code, 130, r.stderr);
        assert.deepEqual(snapshotWithoutMeta(staticDir), before);
        assert.equal((await inspect(staticDir, 'eve/R1')).state, 'free');
      });

      it('prints a progress line every ~5 s while one artifact downloads', async function () {
        this.timeout(60_000);
        const started = Date.now();
        const child = spawn(process.execPath, [TOOL, 'stage', 'eve/R6', `${server.url}/slow.bin`], {
          env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir },
          stdio: ['ignore', 'ignore', 'pipe'],
        });
        let stderr = '';
        child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
        const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
        await waitFor(() => (/slow\.bin: [\d.]+ (B|KiB|MiB)/.test(stderr) ? true : undefined), 15_000, `a progress line; stderr so far:\n${stderr}`).catch((err: unknown) => {
          child.kill('SIGKILL');
          throw err;
        });
        // Never sooner than the interval (a lower bound: a slow machine can only make it later).
        assert.ok(Date.now() - started >= 4_500, `the first line came after ${Date.now() - started} ms`);
        assert.equal(stderr.split('\n').filter((l) => l.includes('slow.bin')).length, 1, 'one line, not a flood');
        child.kill('SIGINT');
        assert.equal(await exited, 130);
        assert.match(stderr, /slow\.bin: [\d.]+ (B|KiB|MiB)( of 4\.0 MiB \(\d+%\))?, /);
      });
    });
  });

  describe('du', () => {
    beforeEach(async () => {
      for (const [tag, days] of [
        ['eve/R10', 2],
        ['eve/R9', 4],
        ['kevin/R1', 3],
      ] as const) {
        const r = await tool(staticDir, ['stage', tag, build]);
        assert.equal(r.code, 0, r.stderr);
        const stamp = path.join(staticDir, tag, TIMESTAMP_FILE);
        const t = (Date.now() - days * DAY) / 1000;
        fs.utimesSync(stamp, t, t);
      }
    });

    it('shows a table of areas, least recently used first, with a total', async () => {
      const r = await tool(staticDir, ['du']);
      assert.equal(r.code, 0, r.stderr);
      const lines = r.stdout.trimEnd().split('\n');
      assert.match(lines[0], /^TAG\s+SIZE\s+ARTIFACTS\s+LAST USED\s+STATE$/);
      assert.match(lines[1], /^eve\/R9\s+29\d KiB\s+2\s+4 d ago\s+free$/);
      assert.match(lines[2], /^kevin\/R1\s+.*3 d ago\s+free$/);
      assert.match(lines[3], /^eve\/R10\s+.*2 d ago\s+free$/);
      assert.match(lines[4], /^TOTAL \(3 areas\)\s+\d{3} KiB\s+6$/);
      assert.equal(lines.length, 5);
      const board = await tool(staticDir, ['du', 'kevin']);
      assert.match(board.stdout, /TOTAL \(1 area\)/);
      const json = JSON.parse((await tool(staticDir, ['--json', 'du'])).stdout) as AreaUsage[];
      assert.deepEqual(
        json.map((a) => [a.tag, a.artifacts, a.state]),
        [
          ['eve/R9', 2, 'free'],
          ['eve/R10', 2, 'free'],
          ['kevin/R1', 2, 'free'],
        ],
      );
      assert.ok(json.every((a) => a.bytes > 300_000 && a.lastUsedMs < Date.now() - DAY / 2));
      const missing = await tool(staticDir, ['du', 'nope']);
      assert.equal(missing.code, 1);
      assert.match(missing.stderr, /no directory .*nope/);
    });

    it('prune removes by --keep and --older-than, skips held areas, and --dry-run removes nothing', async () => {
      assert.equal((await tool(staticDir, ['prune'])).code, 2, 'a rule is required');
      assert.match((await tool(staticDir, ['prune'])).stderr, /--keep N or --older-than DURATION/);
      assert.equal((await tool(staticDir, ['prune', '--older-than', '30'])).code, 2, 'a duration needs a unit');
      assert.equal((await tool(staticDir, ['prune', '--keep', 'some'])).code, 2);

      const lease = await acquire(staticDir, 'eve/R9', { createOnce: false, purpose: 'in use by the test' });
      try {
        const before = snapshotWithoutMeta(path.join(staticDir, 'kevin'));
        const dry = await tool(staticDir, ['prune', '--keep', '1', '--dry-run']);
        assert.equal(dry.code, 0, dry.stderr);
        assert.match(dry.stdout, /^would remove\s+kevin\/R1\s+29\d KiB\s+not among the 1 most recently used \(#2\)$/m);
        assert.match(dry.stdout, /^skipped\s+eve\/R9\s+.*held by .*in use by the test/m);
        assert.match(dry.stdout, /^Would remove 1 area, 29\d KiB; skipped 1 area \(see WHY\)\. \(dry run: nothing was removed\)$/m);
        assert.deepEqual(snapshotWithoutMeta(path.join(staticDir, 'kevin')), before);

        const older = await tool(staticDir, ['prune', '--older-than', '60h']);
        assert.equal(older.code, 0, older.stderr);
        assert.match(older.stdout, /^removed\s+kevin\/R1\s+.*last used 3 d ago \(limit 60 h\)$/m);
        assert.match(older.stdout, /^skipped\s+eve\/R9/m);
        assert.match(older.stdout, /^Removed 1 area, /m);
        assert.equal(fs.existsSync(path.join(staticDir, 'kevin', 'R1')), false);
        assert.ok(fs.existsSync(path.join(staticDir, 'eve', 'R9', 'image.bin')), 'the held area is untouched');
        assert.equal(lease.state, 'held');
      } finally {
        await lease.release();
      }
      const json = JSON.parse((await tool(staticDir, ['--json', 'prune', '--keep', '1'])).stdout) as PruneResult;
      assert.deepEqual(
        json.removed.map((c) => [c.tag, c.rules]),
        [['eve/R9', ['keep']]],
      );
      assert.equal(json.dryRun, false);
      const audit = fs.readFileSync(path.join(staticDir, META_DIR, 'audit.log'), 'utf8').trim().split('\n');
      assert.deepEqual(
        audit.map((l) => (JSON.parse(l) as { tag: string }).tag),
        ['kevin/R1', 'eve/R9'],
      );
      const nothing = await tool(staticDir, ['prune', '--keep', '5']);
      assert.match(nothing.stdout, /^Nothing to prune\.\nRemoved 0 areas, 0 B\.$/m);
    });
  });

  describe('output pieces', () => {
    it('parses sizes and durations as people write them', () => {
      assert.equal(parseSize('500M'), 500 * 1024 ** 2);
      assert.equal(parseSize('2G'), 2 * 1024 ** 3);
      assert.equal(parseSize('1.5GiB'), 1.5 * 1024 ** 3);
      assert.equal(parseSize('10MB'), 10_000_000);
      assert.equal(parseSize('4096'), 4096);
      assert.equal(parseSize('12 k'), 12 * 1024);
      for (const bad of ['', 'M', '-1', '1X', '1e3', 'lots']) assert.equal(parseSize(bad), undefined, bad);
      assert.equal(parseDuration('30d'), 30 * DAY);
      assert.equal(parseDuration('12h'), 12 * 3_600_000);
      assert.equal(parseDuration('90m'), 90 * 60_000);
      assert.equal(parseDuration('1d12h'), 1.5 * DAY);
      assert.equal(parseDuration('2w'), 14 * DAY);
      for (const bad of ['', '30', 'd', '-1d', '3 days', '1y']) assert.equal(parseDuration(bad), undefined, bad);
      assert.equal(formatBytes(512), '512 B');
      assert.equal(formatBytes(1536), '1.5 KiB');
      assert.equal(formatBytes(1.2 * 1024 ** 3), '1.2 GiB');
      assert.equal(formatBytes(500 * 1024 ** 2), '500 MiB');
    });

    it("counts in the stage summary are grouped as verify's are, whatever the locale", () => {
      const entry = (i: number): StageResult['added'][number] => ({ name: `a/${i}.bin`, type: 'file', size: 1, sha256: '', source: '', stagedAt: '' });
      const many = (n: number): StageResult['added'] => Array.from({ length: n }, (_, i) => entry(i));
      const result: StageResult = { staticDir: '/s', tag: 'eve/R1', dir: '/s/eve/R1', created: true, added: many(20_000), skipped: many(1_234), replaced: many(1_012), bytes: 22_246 };
      const text = formatStageResult(result, 1_000);
      assert.match(text, /^Staged eve\/R1 \(new build\): 20,000 added, 1,234 skipped as identical, 1,012 replaced\.$/m);
      assert.match(text, /^Replaced: a\/0\.bin, .*, a\/9\.bin and 1,002 more\.$/m);
    });

    it('on a terminal, redraws one line no wider than the terminal, and clears it', () => {
      let out = '';
      let t = 0;
      const view = new StageProgressView({ write: (s: string) => (out += s), draw: (s: string) => (out += s), isTTY: true, columns: 80 }, { now: () => t });
      const p = (over: Partial<StageProgress>): StageProgress => ({ artifact: '', artifactBytes: 0, bytes: 0, artifacts: 0, ...over });
      view.update(p({ artifact: `${'very/long/path/'.repeat(5)}image.bin`, artifactBytes: 1024 ** 2, artifactTotal: 4 * 1024 ** 2, bytes: 1024 ** 2, totalBytes: 8 * 1024 ** 2 }));
      t = 50;
      view.update(p({ artifact: 'image.bin', artifactBytes: 1.5 * 1024 ** 2, bytes: 1.5 * 1024 ** 2 }));
      assert.equal(out.split('\r').length - 1, 1, 'redraws at most every 100 ms');
      t = 1000;
      view.update(p({ artifact: `${'very/long/path/'.repeat(5)}image.bin`, artifactBytes: 2 * 1024 ** 2, artifactTotal: 4 * 1024 ** 2, bytes: 2 * 1024 ** 2, totalBytes: 8 * 1024 ** 2 }));
      const last = out.slice(out.lastIndexOf('\r') + 1).replace('\x1b[K', '');
      assert.ok(last.length <= 79, `fits the terminal: ${JSON.stringify(last)}`);
      assert.match(last, /^\[0 done\] ….*image\.bin {2}2\.0 MiB of 4\.0 MiB \(50%\), all 25% {2}1\.0 MiB\/s$/);
      assert.ok(!out.includes('\n'));
      view.clear();
      assert.ok(out.endsWith('\r\x1b[K'));
    });

    it('without a terminal, writes finished artifacts at most a line a second and a line every 5 s for a long one', () => {
      let out = '';
      let t = 0;
      const view = new StageProgressView({ write: (s: string) => (out += s), draw: (s: string) => (out += s), isTTY: false }, { now: () => t });
      const p = (over: Partial<StageProgress>): StageProgress => ({ artifact: '', artifactBytes: 0, bytes: 0, artifacts: 0, ...over });
      for (t = 0; t <= 12_000; t += 100) view.update(p({ artifact: 'big.bin', artifactBytes: t * 1000, artifactTotal: 12_000_000, bytes: t * 1000 }));
      view.update(p({ artifacts: 1, bytes: 12_000_000 }));
      view.update(p({ artifact: 'small.txt', artifactBytes: 5, artifactTotal: 5, bytes: 12_000_005, artifacts: 2 }));
      view.update(p({ artifacts: 3, bytes: 12_000_005 }));
      assert.equal(out.split('\n').length, 4, 'the two finishes within a second of the last line are held back');
      // A long artifact after them: the held-back finishes go out within a second, not after its 5 s.
      for (t = 12_200; t <= 13_100; t += 100) view.update(p({ artifact: 'late.bin', artifactBytes: 1, bytes: 12_000_006, artifacts: 3 }));
      // Finished 100 ms after the last line: held back until the end.
      view.update(p({ artifact: 'tail.txt', artifactBytes: 7, artifactTotal: 7, bytes: 12_000_013, artifacts: 4 }));
      view.clear();
      assert.deepEqual(out.split('\n'), [
        'big.bin: 4.8 MiB of 11.4 MiB (41%), 977 KiB/s',
        'big.bin: 9.5 MiB of 11.4 MiB (83%), 977 KiB/s',
        'done: big.bin; 1 artifact, 11.4 MiB so far',
        'done: small.txt (5 B) and 1 more; 3 artifacts, 11.4 MiB so far',
        'done: tail.txt (7 B); 4 artifacts, 11.4 MiB so far',
        '',
      ]);
    });

    it('without a terminal, 100,000 quick finishes make a line a second, and the last line has the final count', () => {
      let out = '';
      let t = 0;
      const view = new StageProgressView({ write: (s: string) => (out += s), draw: (s: string) => (out += s), isTTY: false }, { now: () => t });
      for (let i = 1; i <= 100_000; i++) {
        t = i / 10; // 10,000 a second: 10 s in all
        view.update({ artifact: `f/${i}.txt`, artifactBytes: 1, artifactTotal: 1, bytes: i, artifacts: i });
      }
      view.clear();
      const lines = out.split('\n').filter((l) => l !== '');
      assert.equal(lines.length, 10);
      assert.equal(lines[0], 'done: f/10000.txt (1 B) and 9,999 more; 10,000 artifacts, 9.8 KiB so far');
      assert.equal(lines[9], 'done: f/100000.txt (1 B) and 9,999 more; 100,000 artifacts, 97.7 KiB so far');
      // Every finish is counted once: the lines' counts add up to the whole.
      const counted = lines.reduce((n, l) => n + 1 + Number((/ and ([\d,]+) more/.exec(l)?.[1] ?? '0').replaceAll(',', '')), 0);
      assert.equal(counted, 100_000);
    });
  });
});
