/**
 * Staging sources against real directories, real archives (made here with the tar package and
 * Python's tarfile and zipfile) and a real HTTP server on 127.0.0.1.
 */
import { strict as assert } from 'assert';
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as http from 'http';
import type { AddressInfo } from 'net';
import * as path from 'path';
import { pathToFileURL } from 'url';
import * as tar from 'tar';
import { StagingError, isStagingError } from '../../../src/core/base/errors';
import { CopyPool } from '../../../src/core/stage/pool';
import { SOURCES, openSource, sourcesSize } from '../../../src/core/stage/sources';
import { DEFAULT_MAX_BYTES, PART_PREFIX, type EntrySource, type IncomingEntry, type MeasureTree, type SourceContext } from '../../../src/core/stage/types';
import { hashStream, python, sha, startServer, writeArchives, type TestServer } from '../../fixtures';
import { cleanup, isRoot, run, sleep, tempDir, waitFor } from '../../helpers';

/** The stated cancellation requirement. */
const CANCEL_MS = 100;
/** Added to it in assertions: timers and the event loop of a busy two-core CI machine. */
const CANCEL_SLACK_MS = 50;

interface Seen {
  name: string;
  type: IncomingEntry['type'];
  size?: number;
  sha256?: string;
  linkTarget?: string;
  what?: string;
}

/** What an entry says, with its content (read fully) as a hash. */
async function seenOf(e: IncomingEntry): Promise<Seen> {
  const s: Seen = { name: e.name, type: e.type };
  if (e.size !== undefined) s.size = e.size;
  if (e.linkTarget !== undefined) s.linkTarget = e.linkTarget;
  if (e.what !== undefined) s.what = e.what;
  if (e.content) s.sha256 = await hashStream(e.content);
  else if (e.localPath) s.sha256 = sha(fs.readFileSync(e.localPath));
  return s;
}

async function collect(source: EntrySource, sources?: string[]): Promise<Seen[]> {
  const out: Seen[] = [];
  for await (const e of source) {
    sources?.push(e.source);
    out.push(await seenOf(e));
  }
  return out;
}

async function rejection(p: Promise<unknown>): Promise<StagingError> {
  try {
    await p;
  } catch (err) {
    if (isStagingError(err)) return err;
    throw err;
  }
  throw new Error('expected a rejection');
}

function openFds(): number {
  return fs.readdirSync('/proc/self/fd').length;
}

describe('staging sources', function () {
  let root: string;
  let area: string;
  let tree: string;
  let fixtures: string;
  const bin = Buffer.alloc(100_000);
  for (let i = 0; i < bin.length; i++) bin[i] = (i * 7919 + (i >> 8)) & 0xff;
  const files = {
    'B.txt': Buffer.from('upper\n'),
    'a.txt': Buffer.from('hello\n'),
    'sub/b.bin': bin,
    'sub/deeper/c.txt': Buffer.from('deep\n'),
  };
  const h = (name: keyof typeof files): string => sha(files[name]);

  let partCount = 0;
  function context(options: { signal?: AbortSignal; maxBytes?: number } = {}): { ctx: SourceContext; parts: string[]; progress: number[] } {
    const parts: string[] = [];
    const progress: number[] = [];
    const ctx: SourceContext = {
      dir: area,
      partPath: () => {
        const p = path.join(area, `${PART_PREFIX}${++partCount}`);
        parts.push(p);
        return p;
      },
      signal: options.signal ?? new AbortController().signal,
      maxBytes: options.maxBytes ?? DEFAULT_MAX_BYTES,
      onPartBytes: (bytes) => progress.push(bytes),
    };
    return { ctx, parts, progress };
  }

  /** The tree as every tar made from it lists it (tar marks the second name of an inode as a link). */
  const treeInTar = (): Seen[] => [
    { name: 'B.txt', type: 'file', size: 6, sha256: h('B.txt') },
    { name: 'a.txt', type: 'file', size: 6, sha256: h('a.txt') },
    { name: 'empty', type: 'directory' },
    { name: 'hard.txt', type: 'hardlink', linkTarget: 'a.txt' },
    { name: 'link', type: 'symlink', linkTarget: 'sub/b.bin' },
    { name: 'sub', type: 'directory' },
    { name: 'sub/b.bin', type: 'file', size: 100_000, sha256: h('sub/b.bin') },
    { name: 'sub/deeper', type: 'directory' },
    { name: 'sub/deeper/c.txt', type: 'file', size: 5, sha256: h('sub/deeper/c.txt') },
  ];
  const treeOrder = ['B.txt', 'a.txt', 'empty', 'hard.txt', 'link', 'sub', 'sub/b.bin', 'sub/deeper', 'sub/deeper/c.txt'];

  before(async function () {
    this.timeout(30_000);
    root = tempDir('dss-sources-');
    fs.chmodSync(root, 0o755);
    area = path.join(root, 'area');
    fs.mkdirSync(area);
    tree = path.join(root, 'tree');
    fixtures = path.join(root, 'fixtures');
    fs.mkdirSync(fixtures);
    for (const [name, data] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(tree, name)), { recursive: true });
      fs.writeFileSync(path.join(tree, name), data);
    }
    fs.mkdirSync(path.join(tree, 'empty'));
    fs.linkSync(path.join(tree, 'a.txt'), path.join(tree, 'hard.txt'));
    fs.symlinkSync('sub/b.bin', path.join(tree, 'link'));

    // The tree's archives: tar, tar.gz (as .tar.gz and .tgz), tar.xz (python's lzma: CRC64, LZMA2).
    // sync: tar 7.5's asynchronous create stalls on this list (noDirRecurse, a directory after four entries).
    const tarOptions = { cwd: tree, portable: true, noDirRecurse: true, sync: true } as const;
    tar.c({ ...tarOptions, file: path.join(fixtures, 'tree.tar') }, treeOrder);
    tar.c({ ...tarOptions, file: path.join(fixtures, 'tree.tar.gz'), gzip: true }, treeOrder);
    fs.copyFileSync(path.join(fixtures, 'tree.tar.gz'), path.join(fixtures, 'tree.tgz'));
    await python(
      'import lzma, sys\nd = open(sys.argv[1], "rb").read()\nopen(sys.argv[2], "wb").write(lzma.compress(d))\nopen(sys.argv[3], "wb").write(lzma.compress(d, check=lzma.CHECK_SHA256))',
      path.join(fixtures, 'tree.tar'),
      path.join(fixtures, 'tree.tar.xz'),
      path.join(fixtures, 'sha256.tar.xz'),
    );
    fs.copyFileSync(path.join(fixtures, 'tree.tar.xz'), path.join(fixtures, 'tree.txz'));

    // A hostile tar: names that leave the area, devices, a FIFO, links out, a long GNU name.
    const hostile = [
      { name: '../evil.txt', data: 'evil' },
      { name: '/etc/abs.txt', data: 'abs' },
      { name: 'ok/fine.txt', data: 'fine' },
      { name: 'ok/empty.txt' },
      { name: 'dev/null', type: 'chr', devmajor: 1, devminor: 3 },
      { name: 'dev/sda', type: 'blk', devmajor: 8, devminor: 0 },
      { name: 'pipe', type: 'fifo' },
      { name: 'hl', type: 'hardlink', linkname: '../../etc/passwd' },
      { name: 'sl', type: 'symlink', linkname: '/etc/shadow' },
      { name: `long/${'x'.repeat(150)}.txt`, data: 'long name' },
    ] as const;
    // Zips: a symlink (S_IFLNK in the external attributes), a directory, stored and deflated
    // files, an empty file, names that leave the area, a character device; and a big one.
    const zipEntries = [
      { name: 'dir/', type: 'dir', mode: 0o040755 },
      { name: 'dir/file.txt', data: 'hello zip\n'.repeat(100) },
      { name: 'dir/stored.bin', base64: Buffer.concat(Array.from({ length: 10 }, () => Buffer.from([...Array(256).keys()]))).toString('base64'), method: 'stored' },
      { name: 'dir/empty.txt' },
      { name: 'dir/link', type: 'symlink', linkname: 'file.txt' },
      { name: '../up.txt', data: 'up' },
      { name: '/abs.txt', data: 'abs' },
      { name: 'dev/tty0', type: 'chr', mode: 0o020620 },
    ] as const;
    await writeArchives([
      { file: path.join(fixtures, 'hostile.tar'), kind: 'tar', entries: [...hostile] },
      { file: path.join(fixtures, 'hostile.tar.xz'), kind: 'tar.xz', entries: [...hostile] },
      { file: path.join(fixtures, 'build.zip'), kind: 'zip', entries: [...zipEntries] },
      { file: path.join(fixtures, 'big.zip'), kind: 'zip', entries: [{ name: 'random.bin', random: 300_000, method: 'stored' }] },
    ]);
  });

  after(() => {
    if (root) cleanup(root);
  });

  afterEach(() => {
    for (const name of fs.readdirSync(area)) fs.rmSync(path.join(area, name), { recursive: true, force: true });
  });

  const zipListing = (): Seen[] => [
    { name: 'dir', type: 'directory' },
    { name: 'dir/file.txt', type: 'file', size: 1000, sha256: sha('hello zip\n'.repeat(100)) },
    { name: 'dir/stored.bin', type: 'file', size: 2560, sha256: sha(Buffer.concat(Array.from({ length: 10 }, () => Buffer.from([...Array(256).keys()])))) },
    { name: 'dir/empty.txt', type: 'file', size: 0, sha256: sha('') },
    { name: 'dir/link', type: 'symlink', linkTarget: 'file.txt' },
    { name: '../up.txt', type: 'file', size: 2, sha256: sha('up') },
    { name: '/abs.txt', type: 'file', size: 3, sha256: sha('abs') },
    { name: 'dev/tty0', type: 'other', what: 'character device' },
  ];

  const hostileListing = (): Seen[] => [
    { name: '../evil.txt', type: 'file', size: 4, sha256: sha('evil') },
    { name: '/etc/abs.txt', type: 'file', size: 3, sha256: sha('abs') },
    { name: 'ok/fine.txt', type: 'file', size: 4, sha256: sha('fine') },
    { name: 'ok/empty.txt', type: 'file', size: 0, sha256: sha('') },
    { name: 'dev/null', type: 'other', what: 'character device' },
    { name: 'dev/sda', type: 'other', what: 'block device' },
    { name: 'pipe', type: 'other', what: 'FIFO (named pipe)' },
    { name: 'hl', type: 'hardlink', linkTarget: '../../etc/passwd' },
    { name: 'sl', type: 'symlink', linkTarget: '/etc/shadow' },
    { name: `long/${'x'.repeat(150)}.txt`, type: 'file', size: 9, sha256: sha('long name') },
  ];

  describe('local directories and files', () => {
    it('walks a directory in sorted order, reporting links and special files without following them', async () => {
      await python('import os, sys; os.mkfifo(sys.argv[1])', path.join(tree, 'fifo'));
      try {
        const sources: string[] = [];
        const got: Seen[] = [];
        const localPaths: (string | undefined)[] = [];
        for await (const e of openSource(tree, context().ctx)) {
          sources.push(e.source);
          localPaths.push(e.localPath);
          assert.equal(e.content, undefined, `${e.name}: a local file is copied from localPath, without a stream`);
          got.push(await seenOf(e));
        }
        assert.deepEqual(got, [
          { name: 'B.txt', type: 'file', size: 6, sha256: h('B.txt') },
          { name: 'a.txt', type: 'file', size: 6, sha256: h('a.txt') },
          { name: 'empty', type: 'directory' },
          { name: 'fifo', type: 'other', what: 'FIFO (named pipe)' },
          { name: 'hard.txt', type: 'file', size: 6, sha256: h('a.txt') },
          { name: 'link', type: 'symlink', linkTarget: 'sub/b.bin' },
          { name: 'sub', type: 'directory' },
          { name: 'sub/b.bin', type: 'file', size: 100_000, sha256: h('sub/b.bin') },
          { name: 'sub/deeper', type: 'directory' },
          { name: 'sub/deeper/c.txt', type: 'file', size: 5, sha256: h('sub/deeper/c.txt') },
        ]);
        assert.deepEqual(
          sources,
          got.map((e) => path.join(tree, e.name)),
        );
        assert.equal(localPaths[7], path.join(tree, 'sub', 'b.bin'));
      } finally {
        fs.rmSync(path.join(tree, 'fifo'));
      }
    });

    it('walks the same with the asynchronous calls taken on network filesystems as with the synchronous local ones', async () => {
      await python('import os, sys; os.mkfifo(sys.argv[1])', path.join(tree, 'fifo'));
      try {
        const script = `
          const { localEntries } = require(${JSON.stringify(path.join(__dirname, '..', '..', '..', 'src', 'core', 'stage', 'sources', 'local.js'))});
          (async () => {
            const out = [];
            for await (const e of localEntries(${JSON.stringify(tree)}, new AbortController().signal)) out.push([e.name, e.type, e.size, e.linkTarget, e.what, e.localStat?.ino]);
            process.stdout.write(JSON.stringify(out));
          })();`;
        const walked = async (env: NodeJS.ProcessEnv): Promise<unknown> => {
          const r = await run(process.execPath, ['-e', script], { env: { ...process.env, ...env } });
          assert.equal(r.code, 0, r.stderr);
          return JSON.parse(r.stdout);
        };
        const synchronous = await walked({});
        assert.equal((synchronous as unknown[]).length, 10);
        assert.deepEqual(await walked({ DEVSERVER_STAGING_ASYNC_IO: '1' }), synchronous);
      } finally {
        fs.rmSync(path.join(tree, 'fifo'));
      }
    });

    it('follows a symbolic link given as the source itself, but none inside it', async () => {
      const latest = path.join(root, 'latest');
      fs.symlinkSync(path.join(tree, 'sub'), latest);
      try {
        const sources: string[] = [];
        const got = await collect(openSource(latest, context().ctx), sources);
        assert.deepEqual(
          got.map((e) => `${e.type} ${e.name}`),
          ['file b.bin', 'directory deeper', 'file deeper/c.txt'],
        );
        assert.deepEqual(sources, [path.join(latest, 'b.bin'), path.join(latest, 'deeper'), path.join(latest, 'deeper', 'c.txt')]);
      } finally {
        fs.unlinkSync(latest);
      }
    });

    it('gives a plain file as one entry named by its basename', async () => {
      const file = path.join(tree, 'sub', 'b.bin');
      const entries: IncomingEntry[] = [];
      for await (const e of openSource(file, context().ctx)) entries.push(e);
      assert.equal(entries.length, 1);
      assert.deepEqual(await seenOf(entries[0]), { name: 'b.bin', type: 'file', size: 100_000, sha256: h('sub/b.bin') });
      assert.equal(entries[0].localPath, file);
      assert.equal(entries[0].source, file);
    });

    it('reports a missing path as ESOURCE "does not exist", naming it', async () => {
      const missing = path.join(root, 'no', 'such', 'build');
      const err = await rejection(collect(openSource(missing, context().ctx)));
      assert.equal(err.code, 'ESOURCE');
      assert.match(err.message, /does not exist/);
      assert.ok(err.message.includes(missing), err.message);
    });

    it('reports an unreadable directory as ESOURCE naming it and the permission problem', async function () {
      this.timeout(20_000);
      const locked = path.join(root, 'locked');
      fs.mkdirSync(path.join(locked, 'inner'), { recursive: true });
      fs.writeFileSync(path.join(locked, 'inner', 'x'), 'x');
      fs.chmodSync(path.join(locked, 'inner'), 0o000);
      try {
        // Root reads every directory, so the check runs as an unprivileged user when we are root.
        const script = `
          let openSource;
          try {
            ({ openSource } = require(${JSON.stringify(path.join(__dirname, '..', '..', '..', 'src', 'core', 'stage', 'sources'))}));
          } catch (err) {
            console.log(JSON.stringify({ loadError: err.message }));
            process.exit(0);
          }
          (async () => {
            const ctx = { dir: '/nonexistent', partPath: () => '/nonexistent/p', signal: new AbortController().signal, maxBytes: 1, onPartBytes() {} };
            const names = [];
            try {
              for await (const e of openSource(process.argv[1], ctx)) names.push(e.name);
              console.log(JSON.stringify({ names }));
            } catch (err) {
              console.log(JSON.stringify({ names, code: err.code, message: err.message }));
            }
          })();`;
        const child = spawn(process.execPath, ['-e', script, locked], {
          stdio: ['ignore', 'pipe', 'pipe'],
          ...(isRoot ? { uid: 65534, gid: 65534 } : {}),
        });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
        child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
        await new Promise((resolve) => child.once('close', resolve));
        let result: { names: string[]; code?: string; message?: string; loadError?: string };
        try {
          result = JSON.parse(stdout) as typeof result;
        } catch {
          assert.fail(`the child printed no result: ${stdout}${stderr}`);
        }
        if (result.loadError !== undefined) {
          console.log(`      skipped: the unprivileged user cannot load the compiled sources here (${result.loadError})`);
          this.skip();
        }
        assert.deepEqual(result.names, ['inner'], stderr);
        assert.equal(result.code, 'ESOURCE');
        assert.match(result.message!, /permission denied/);
        assert.ok(result.message!.includes(path.join(locked, 'inner')), result.message);
      } finally {
        fs.chmodSync(path.join(locked, 'inner'), 0o755);
      }
    });

    it('refuses URL schemes it cannot fetch, and an empty source, saying what it takes', async () => {
      const err = await rejection(collect(openSource('ftp://example.invalid/x.tar', context().ctx)));
      assert.equal(err.code, 'ESOURCE');
      assert.match(err.message, /ftp:\/\/example\.invalid\/x\.tar uses the scheme ftp:, which is not supported; give an http\(s\) URL, a file: URL or a local path\./);
      const empty = await rejection(collect(openSource('', context().ctx)));
      assert.equal(empty.code, 'ESOURCE');
      assert.match(empty.message, /^A staging source is empty; give an http\(s\) URL, a file: URL or a local path\.$/);
    });

    it('takes a file: URL as the local path it names, and refuses one that names no local path', async () => {
      const file = path.join(tree, 'sub', 'b.bin');
      assert.deepEqual(await collect(openSource(pathToFileURL(file).href, context().ctx)), await collect(openSource(file, context().ctx)));
      assert.deepEqual(await collect(openSource(pathToFileURL(tree).href, context().ctx)), await collect(openSource(tree, context().ctx)));
      const err = await rejection(collect(openSource('file://elsewhere.invalid/x', context().ctx)));
      assert.equal(err.code, 'ESOURCE');
      assert.match(err.message, /file:\/\/elsewhere\.invalid\/x is not a usable file URL/);
    });

    it('opens nothing before the iteration starts', async () => {
      const before = openFds();
      const src = openSource(path.join(fixtures, 'tree.tar'), context().ctx);
      await sleep(20);
      assert.equal(openFds(), before);
      assert.equal((await collect(src)).length, 9);
    });
  });

  describe('the table of kinds', () => {
    it('gives each source to the first kind that takes it; a local path takes whatever names no scheme', () => {
      const kindOf = (spec: string): string | undefined => SOURCES.find((s) => s.matches(spec))?.name;
      const expected: [string, string | undefined][] = [
        ['http://example.invalid/a.tar', 'an http(s) URL'],
        ['HTTPS://example.invalid/a', 'an http(s) URL'],
        ['file:///srv/build', 'a file: URL'],
        ['file:/srv/build', 'a file: URL'],
        ['/srv/build', 'a local path'],
        ['build/out', 'a local path'],
        ['weird:name.bin', 'a local path'],
        ['ftp://example.invalid/a', undefined],
        ['', undefined],
      ];
      assert.deepEqual(expected.map(([spec]) => [spec, kindOf(spec)]), expected);
      for (const s of SOURCES) assert.equal(typeof s.open, 'function', s.name);
    });

    // The stager's measurer: a copying worker walks the tree.
    let pool: CopyPool;
    let measureTree: MeasureTree;
    before(() => {
      pool = new CopyPool();
      measureTree = (dir) => pool.measure([dir]);
    });
    after(() => pool.close());

    it('knows what local sources bring before reading them, and nothing of archives and downloads', async () => {
      // Files by lstat, links not followed, a hard link counted by each name (as it is staged).
      const inTree = 6 + 6 + 6 + 100_000 + 5;
      assert.equal(await sourcesSize([tree], measureTree), inTree);
      assert.equal(await sourcesSize([tree, path.join(tree, 'a.txt'), pathToFileURL(path.join(tree, 'sub')).href], measureTree), inTree + 6 + 100_005);
      assert.equal(await sourcesSize([], measureTree), 0);
      for (const unknown of [path.join(fixtures, 'tree.tar.gz'), 'http://example.invalid/a.bin', path.join(root, 'missing'), 'ftp://example.invalid/a', 'file://elsewhere.invalid/x']) {
        assert.equal(await sourcesSize([tree, unknown], measureTree), undefined, unknown);
      }
    });

    it('measures without following a link out of the source or waiting on a FIFO in it', async () => {
      const hostile = path.join(root, 'measured');
      fs.mkdirSync(path.join(hostile, 'sub'), { recursive: true });
      fs.writeFileSync(path.join(hostile, 'sub', 'one.bin'), Buffer.alloc(1_000));
      fs.symlinkSync('/', path.join(hostile, 'root'));
      fs.symlinkSync('..', path.join(hostile, 'sub', 'up'));
      await python('import os, sys; os.mkfifo(sys.argv[1])', path.join(hostile, 'fifo'));
      try {
        const started = Date.now();
        assert.equal(await sourcesSize([hostile], measureTree), 1_000, 'only the file inside counts');
        assert.equal(await sourcesSize([path.join(hostile, 'fifo')], measureTree), 0, 'a FIFO is stat-ed, never opened');
        assert.ok(Date.now() - started < 5_000, `measured in ${Date.now() - started} ms`);
      } finally {
        fs.rmSync(hostile, { recursive: true });
      }
    });
  });

  describe('archives', () => {
    for (const file of ['tree.tar', 'tree.tar.gz', 'tree.tgz', 'tree.tar.xz', 'tree.txz']) {
      it(`lists ${file} entry by entry with contents, links and types`, async () => {
        const archive = path.join(fixtures, file);
        const sources: string[] = [];
        assert.deepEqual(await collect(openSource(archive, context().ctx), sources), treeInTar());
        assert.equal(sources[0], `${archive}#B.txt`);
        assert.equal(sources[2], `${archive}#empty/`);
      });
    }

    it('reports hostile tar entries as they are: ../, absolute names, devices, FIFOs, links out', async () => {
      for (const file of ['hostile.tar', 'hostile.tar.xz']) {
        assert.deepEqual(await collect(openSource(path.join(fixtures, file), context().ctx)), hostileListing(), file);
      }
    });

    it('reads a zip: directories, stored and deflated files, symlinks from their mode bits, devices, raw names', async () => {
      const archive = path.join(fixtures, 'build.zip');
      const sources: string[] = [];
      assert.deepEqual(await collect(openSource(archive, context().ctx), sources), zipListing());
      assert.equal(sources[1], `${archive}#dir/file.txt`);
      assert.equal(sources[5], `${archive}#../up.txt`);
    });

    it('takes an empty tar (only the end marker) as no entries', async () => {
      const empty = path.join(root, 'empty.tar');
      fs.writeFileSync(empty, Buffer.alloc(10240));
      assert.deepEqual(await collect(openSource(empty, context().ctx)), []);
    });

    it('fails with ESOURCE naming the archive when it is truncated, corrupt or not an archive', async () => {
      const half = (file: string): Buffer => {
        const data = fs.readFileSync(path.join(fixtures, file));
        return data.subarray(0, data.length >> 1);
      };
      const tarData = fs.readFileSync(path.join(fixtures, 'tree.tar'));
      const cases: [string, Buffer, RegExp][] = [
        ['cut.tar.gz', half('tree.tar.gz'), /tar\.gz archive.*unexpected end of file/],
        ['mid-entry.tar', tarData.subarray(0, 3072 + 5000), /tar archive.*Truncated input/],
        // Cut between two entries: only the missing end-of-archive marker tells.
        ['between.tar', tarData.subarray(0, 3072), /tar archive.*truncated/],
        ['cut.tar.xz', half('tree.tar.xz'), /ends too early/],
        ['text.tar.gz', Buffer.from('this is not gzip at all, just some text that goes on for a while. '.repeat(20)), /tar\.gz archive/],
        ['text.tar.xz', Buffer.from('not xz'.repeat(100)), /not in the xz format/],
        ['text.zip', Buffer.from('not a zip'.repeat(100)), /zip archive/],
        ['cut.zip', fs.readFileSync(path.join(fixtures, 'build.zip')).subarray(0, 300), /zip archive/],
      ];
      for (const [name, data, pattern] of cases) {
        const file = path.join(root, name);
        fs.writeFileSync(file, data);
        const err = await rejection(collect(openSource(file, context().ctx))).catch((e: Error) => assert.fail(`${name}: ${e.message}`));
        assert.equal(err.code, 'ESOURCE', `${name}: ${err.message}`);
        assert.ok(err.message.includes(file), `${name}: ${err.message}`);
        assert.match(err.message, pattern, name);
      }
    });

    it('says clearly when a .tar.xz uses an xz option the built-in decoder lacks (SHA-256 check); the system xz reads it', async () => {
      const file = path.join(fixtures, 'sha256.tar.xz');
      process.env.DEVSERVER_STAGING_BUILTIN_XZ = '1';
      let err: StagingError;
      try {
        err = await rejection(collect(openSource(file, context().ctx)));
      } finally {
        delete process.env.DEVSERVER_STAGING_BUILTIN_XZ;
      }
      assert.equal(err.code, 'ESOURCE');
      assert.ok(err.message.includes(file), err.message);
      assert.match(err.message, /SHA-256/);
      // This machine has xz (CI installs it): the same archive is read whole.
      assert.ok(fs.existsSync('/usr/bin/xz') || fs.existsSync('/bin/xz'), 'xz is not installed here');
      assert.deepEqual(await collect(openSource(file, context().ctx)), treeInTar());
    });

    it('refuses a zip entry whose content does not match its CRC-32 or its size, small or large', async () => {
      // Small entries are read and inflated whole, large ones streamed: both are checked.
      for (const [size, method] of [
        [5_000, 'ZIP_STORED'],
        [5_000, 'ZIP_DEFLATED'],
        [3_000_000, 'ZIP_STORED'],
        [3_000_000, 'ZIP_DEFLATED'],
      ] as const) {
        const file = path.join(root, `crc-${size}-${method}.zip`);
        await python(
          `import zipfile, sys\nz = zipfile.ZipFile(sys.argv[1], "w", zipfile.${method})\nz.writestr("ok.txt", b"fine\\n")\nz.writestr("bad.bin", bytes(i * 7 % 251 for i in range(${size})))\nz.close()`,
          file,
        );
        const sound = await collect(openSource(file, context().ctx));
        assert.deepEqual(
          sound.map((e) => e.name),
          ['ok.txt', 'bad.bin'],
        );
        const data = fs.readFileSync(file);
        // The first byte of bad.bin's data, after its local header and name: changed, so its CRC-32 (or the deflate stream) no longer matches.
        const header = data.indexOf(Buffer.from('bad.bin'));
        const at = header + 'bad.bin'.length + data.readUInt16LE(header - 2);
        data[at + 10] ^= 0x55;
        fs.writeFileSync(file, data);
        const err = await rejection(collect(openSource(file, context().ctx)));
        assert.equal(err.code, 'ESOURCE', `${size} ${method}: ${err.message}`);
        assert.match(err.message, /bad\.bin is corrupt/, `${size} ${method}`);
      }
    });

    it('refuses a large deflated zip entry (streamed, past the size read whole) that inflates to more or less than its entry declares, in both headers', async () => {
      for (const [declared, words] of [
        [2_000_000, /bad\.bin is corrupt: it is longer than the 2000000 bytes its entry declares/],
        [5_000_000, /bad\.bin is corrupt: it holds 3000000 bytes where its entry declares 5000000/],
      ] as const) {
        const file = path.join(root, `size-${declared}.zip`);
        await python(
          `import zipfile, sys\nz = zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED)\nz.writestr("ok.txt", b"fine\\n")\nz.writestr("bad.bin", bytes(i * 7 % 251 for i in range(3000000)))\nz.close()`,
          file,
        );
        const data = fs.readFileSync(file);
        // The uncompressed size of bad.bin, in its local header (offset 22) and its central directory record (offset 24).
        let patched = 0;
        for (const [signature, offset] of [
          [0x04034b50, 22],
          [0x02014b50, 24],
        ] as const) {
          for (let at = data.indexOf(Buffer.from('bad.bin')); at > 0; at = data.indexOf(Buffer.from('bad.bin'), at + 1)) {
            const start = signature === 0x04034b50 ? at - 30 : at - 46;
            if (start >= 0 && data.readUInt32LE(start) === signature && data.readUInt32LE(start + offset) === 3_000_000) {
              data.writeUInt32LE(declared, start + offset);
              patched++;
            }
          }
        }
        assert.equal(patched, 2, 'both headers now declare another size');
        fs.writeFileSync(file, data);
        const err = await rejection(collect(openSource(file, context().ctx)));
        assert.equal(err.code, 'ESOURCE', err.message);
        assert.match(err.message, words);
      }
    });

    it('reads every tar.xz with the built-in decoder too, where the system has no xz', async () => {
      process.env.DEVSERVER_STAGING_BUILTIN_XZ = '1';
      try {
        assert.deepEqual(await collect(openSource(path.join(fixtures, 'tree.tar.xz'), context().ctx)), treeInTar());
        const cut = path.join(root, 'cut-builtin.tar.xz');
        const data = fs.readFileSync(path.join(fixtures, 'tree.tar.xz'));
        fs.writeFileSync(cut, data.subarray(0, data.length >> 1));
        assert.match((await rejection(collect(openSource(cut, context().ctx)))).message, /ends too early/);
      } finally {
        delete process.env.DEVSERVER_STAGING_BUILTIN_XZ;
      }
    });

    it('produces the next tar entry only once the previous content was read', async () => {
      const it = openSource(path.join(fixtures, 'tree.tar'), context().ctx)[Symbol.asyncIterator]();
      const first = (await it.next()).value as IncomingEntry;
      assert.equal(first.name, 'B.txt');
      let nextSettled = false;
      const next = it.next().then((r) => {
        nextSettled = true;
        return r;
      });
      await sleep(50);
      assert.equal(nextSettled, false, 'the next entry came before the content was read');
      assert.equal(await hashStream(first.content!), h('B.txt'));
      assert.equal(((await next).value as IncomingEntry).name, 'a.txt');
      await it.return!(undefined);
    });

    it('skips the rest of an entry whose content is destroyed unread, and goes on', async () => {
      for (const file of ['tree.tar.gz', 'build.zip']) {
        const names: string[] = [];
        for await (const e of openSource(path.join(fixtures, file), context().ctx)) {
          names.push(e.name);
          if (e.content && (e.name === 'sub/b.bin' || e.name === 'dir/file.txt')) e.content.destroy();
          else if (e.content) await hashStream(e.content);
        }
        assert.ok(names.length >= 8, `${file}: ${names.join(', ')}`);
      }
    });

    it('closes the archive when the consumer stops early, leaving no file open', async () => {
      for (const file of ['tree.tar', 'tree.tar.gz', 'tree.tar.xz', 'build.zip']) {
        const before = openFds();
        for await (const e of openSource(path.join(fixtures, file), context().ctx)) {
          if (e.content) {
            e.content.once('data', () => undefined); // started, not finished
            break;
          }
        }
        await waitFor(() => (openFds() <= before ? true : undefined), 2000, `the descriptors of ${file} to be closed`);
      }
      // The xz decoder serves one stream at a time: a stream left behind would block this one.
      assert.deepEqual(await collect(openSource(path.join(fixtures, 'tree.txz'), context().ctx)), treeInTar());
    });

    it('stops within 100 ms when the signal aborts mid-archive, with ECANCELED', async () => {
      const latencies: string[] = [];
      for (const file of ['tree.tar.xz', 'build.zip']) {
        const controller = new AbortController();
        const it = openSource(path.join(fixtures, file), context({ signal: controller.signal }).ctx)[Symbol.asyncIterator]();
        let entry = (await it.next()).value as IncomingEntry;
        while (!entry.content) entry = (await it.next()).value as IncomingEntry;
        const t0 = performance.now();
        const failed = new Promise<Error>((resolve) => entry.content!.once('error', resolve));
        controller.abort();
        const err = await failed;
        const elapsed = performance.now() - t0;
        assert.ok(isStagingError(err, 'ECANCELED'), String(err));
        assert.ok(elapsed < CANCEL_MS + CANCEL_SLACK_MS, `${file}: ${elapsed} ms`);
        latencies.push(`${file} ${elapsed.toFixed(1)} ms`);
        await assert.rejects(it.next(), (e: unknown) => isStagingError(e, 'ECANCELED'));
      }
      console.log(`      cancellation latency: ${latencies.join(', ')}`);
      // Still usable afterwards (the xz decoder was released).
      assert.equal((await collect(openSource(path.join(fixtures, 'tree.tar.xz'), context().ctx))).length, 9);
    });

    it("throws the signal's own StagingError reason (a lost lock) rather than ECANCELED", async () => {
      const controller = new AbortController();
      controller.abort(new StagingError('ECOMPROMISED', 'lock lost'));
      const err = await rejection(collect(openSource(path.join(fixtures, 'tree.tar'), context({ signal: controller.signal }).ctx)));
      assert.equal(err.code, 'ECOMPROMISED');
    });
  });

  describe('http', () => {
    let server: TestServer;
    let base: string;
    const closedRequests: string[] = [];
    let tarGz: Buffer;
    let tarXz: Buffer;
    let zip: Buffer;
    let bigZip: Buffer;
    const plain = Buffer.from('plain file content\n'.repeat(1000));
    /** A tar header announcing a 1 GiB file, for an archive that never ends. */
    const hugeHeader = (): Buffer => {
      const header = new tar.Header({ path: 'huge.bin', size: 2 ** 30, type: 'File', mode: 0o644, mtime: new Date(0), uid: 0, gid: 0 });
      header.encode();
      return header.block!;
    };

    before(async () => {
      tarGz = fs.readFileSync(path.join(fixtures, 'tree.tar.gz'));
      tarXz = fs.readFileSync(path.join(fixtures, 'tree.tar.xz'));
      zip = fs.readFileSync(path.join(fixtures, 'build.zip'));
      bigZip = fs.readFileSync(path.join(fixtures, 'big.zip'));
      server = await startServer((req, res) => {
        res.on('close', () => closedRequests.push(req.url ?? ''));
        const send = (body: Buffer, type = 'application/octet-stream'): void => {
          res.writeHead(200, { 'content-type': type, 'content-length': body.length });
          res.end(body);
        };
        const endless = (first?: Buffer): void => {
          res.writeHead(200, { 'content-type': 'application/octet-stream' });
          if (first) res.write(first);
          const timer = setInterval(() => res.write(Buffer.alloc(1024, 1)), 10);
          res.on('close', () => clearInterval(timer));
        };
        switch (req.url) {
          case '/files/plain.txt':
            return send(plain, 'text/plain');
          case '/files/name%20with%20space.bin':
            return send(Buffer.from('spaced'));
          case '/files/':
            return send(Buffer.from('index'), 'text/html');
          case '/a/tree.tar.gz':
            return send(tarGz, 'application/gzip');
          case '/a/tree.tar.xz':
            return send(tarXz);
          case '/a/build.zip':
            return send(zip, 'application/zip');
          case '/a/chunked.zip':
            res.writeHead(200, { 'content-type': 'application/zip' });
            res.write(zip.subarray(0, 100));
            return void setTimeout(() => res.end(zip.subarray(100)), 10);
          case '/latest':
            res.writeHead(302, { location: '/a/tree.tar.gz' });
            return void res.end();
          case '/download?id=5':
            return send(fs.readFileSync(path.join(fixtures, 'tree.tar')), 'application/x-tar');
          case '/a/big.zip':
            return send(bigZip, 'application/zip');
          case '/a/big-chunked.zip':
            res.writeHead(200, { 'content-type': 'application/zip' });
            return void res.end(bigZip);
          case '/missing.tar.gz':
            res.writeHead(404, { 'content-type': 'text/plain' });
            return void res.end('no such file');
          case '/broken':
            res.writeHead(500, { 'content-type': 'text/plain' });
            return void res.end('oops');
          case '/loop':
            res.writeHead(302, { location: '/loop' });
            return void res.end();
          case '/half.bin':
            res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': 1000 });
            res.write(Buffer.alloc(500, 7));
            return void setTimeout(() => req.socket.destroy(), 20);
          case '/half.tar.gz':
            res.writeHead(200, { 'content-type': 'application/gzip', 'content-length': tarGz.length });
            res.write(tarGz.subarray(0, 1000));
            return void setTimeout(() => req.socket.destroy(), 20);
          case '/endless.bin':
            return endless();
          case '/endless.tar':
            return endless(hugeHeader());
          case '/endless.zip':
            return endless();
          case '/stall.tar': {
            // One directory entry, then silence: the next entry never comes.
            const dir = new tar.Header({ path: 'waiting/', type: 'Directory', mode: 0o755, mtime: new Date(0), uid: 0, gid: 0, size: 0 });
            dir.encode();
            res.writeHead(200, { 'content-type': 'application/x-tar' });
            return void res.write(dir.block!);
          }
          default:
            res.writeHead(404);
            res.end();
        }
      });
      base = server.base;
    });

    after(async () => {
      await server.close();
    });

    it('downloads a plain file as one entry named after the last path segment', async () => {
      const url = `${base}/files/plain.txt`;
      const entries: IncomingEntry[] = [];
      const seen: Seen[] = [];
      for await (const e of openSource(url, context().ctx)) {
        entries.push(e);
        seen.push(await seenOf(e));
      }
      assert.deepEqual(seen, [{ name: 'plain.txt', type: 'file', size: plain.length, sha256: sha(plain) }]);
      assert.equal(entries[0].source, url);
      assert.equal(entries[0].localPath, undefined);

      assert.deepEqual(await collect(openSource(`${base}/files/name%20with%20space.bin`, context().ctx)), [
        { name: 'name with space.bin', type: 'file', size: 6, sha256: sha('spaced') },
      ]);
      assert.deepEqual(await collect(openSource(`${base}/files/`, context().ctx)), [{ name: 'download', type: 'file', size: 5, sha256: sha('index') }]);
    });

    it('unpacks a .tar.gz and a .tar.xz as they stream in, and follows redirects', async () => {
      const sources: string[] = [];
      assert.deepEqual(await collect(openSource(`${base}/a/tree.tar.gz`, context().ctx), sources), treeInTar());
      assert.equal(sources[6], `${base}/a/tree.tar.gz#sub/b.bin`);
      assert.deepEqual(await collect(openSource(`${base}/a/tree.tar.xz`, context().ctx)), treeInTar());
      // The name after the redirect tells the kind.
      assert.deepEqual(await collect(openSource(`${base}/latest`, context().ctx)), treeInTar());
      // No extension at all: the Content-Type tells it.
      assert.deepEqual(await collect(openSource(`${base}/download?id=5`, context().ctx)), treeInTar());
    });

    it('downloads a zip to a part file, reporting progress, then reads it', async () => {
      for (const route of ['/a/build.zip', '/a/chunked.zip']) {
        const { ctx, parts, progress } = context();
        const sources: string[] = [];
        assert.deepEqual(await collect(openSource(`${base}${route}`, ctx), sources), zipListing());
        assert.equal(parts.length, 1);
        assert.ok(parts[0].startsWith(path.join(area, PART_PREFIX)));
        assert.equal(fs.statSync(parts[0]).size, zip.length);
        assert.equal(
          progress.reduce((a, b) => a + b, 0),
          zip.length,
        );
        assert.equal(sources[1], `${base}${route}#dir/file.txt`);
      }
    });

    it('refuses a zip larger than maxBytes with ETOOBIG, with or without Content-Length', async () => {
      for (const route of ['/a/big.zip', '/a/big-chunked.zip']) {
        const { ctx } = context({ maxBytes: 100_000 });
        const err = await rejection(collect(openSource(`${base}${route}`, ctx)));
        assert.equal(err.code, 'ETOOBIG', err.message);
        assert.ok(err.message.includes(`${base}${route}`), err.message);
      }
    });

    it('fails with ESOURCE naming the URL and the status for 404 and 500', async () => {
      const e404 = await rejection(collect(openSource(`${base}/missing.tar.gz`, context().ctx)));
      assert.equal(e404.code, 'ESOURCE');
      assert.ok(e404.message.includes(`${base}/missing.tar.gz`), e404.message);
      assert.match(e404.message, /HTTP 404 Not Found/);
      const e500 = await rejection(collect(openSource(`${base}/broken`, context().ctx)));
      assert.equal(e500.code, 'ESOURCE');
      assert.ok(e500.message.includes(`${base}/broken`), e500.message);
      assert.match(e500.message, /HTTP 500 Internal Server Error/);
    });

    it('ends a redirect loop with ESOURCE saying "too many redirects"', async () => {
      const err = await rejection(collect(openSource(`${base}/loop`, context().ctx)));
      assert.equal(err.code, 'ESOURCE');
      assert.ok(err.message.includes(`${base}/loop`), err.message);
      assert.match(err.message, /too many redirects/);
    });

    it('fails with ESOURCE naming the URL when the body is cut off midway', async () => {
      const plainErr = await rejection(collect(openSource(`${base}/half.bin`, context().ctx)));
      assert.equal(plainErr.code, 'ESOURCE');
      assert.ok(plainErr.message.includes(`${base}/half.bin`), plainErr.message);
      assert.match(plainErr.message, /after 500 of 1000 bytes/);
      const tarErr = await rejection(collect(openSource(`${base}/half.tar.gz`, context().ctx)));
      assert.equal(tarErr.code, 'ESOURCE');
      assert.ok(tarErr.message.includes(`${base}/half.tar.gz`), tarErr.message);
    });

    it('fails with ESOURCE and the cause when the connection is refused or the host unknown', async () => {
      const idle = http.createServer();
      await new Promise<void>((resolve) => idle.listen(0, '127.0.0.1', resolve));
      const port = (idle.address() as AddressInfo).port;
      await new Promise((resolve) => idle.close(resolve));
      const refused = await rejection(collect(openSource(`http://127.0.0.1:${port}/x.tar.gz`, context().ctx)));
      assert.equal(refused.code, 'ESOURCE');
      assert.ok(refused.message.includes(`http://127.0.0.1:${port}/x.tar.gz`), refused.message);
      assert.match(refused.message, /connection refused/);

      // .invalid never resolves (RFC 2606); the resolver answers without a network.
      const unknown = await rejection(collect(openSource('http://no-such-host.invalid/x.zip', context().ctx)));
      assert.equal(unknown.code, 'ESOURCE');
      assert.ok(unknown.message.includes('http://no-such-host.invalid/x.zip'), unknown.message);
      assert.match(unknown.message, /could not be resolved|ENOTFOUND|EAI_AGAIN/);
    });

    it('stops an endless download within 100 ms of the abort, and closes the connection', async () => {
      const latencies: Record<string, number> = {};
      for (const route of ['/endless.bin', '/endless.tar']) {
        const controller = new AbortController();
        const it = openSource(`${base}${route}`, context({ signal: controller.signal }).ctx)[Symbol.asyncIterator]();
        const entry = (await it.next()).value as IncomingEntry;
        assert.equal(entry.type, 'file');
        let bytes = 0;
        const failed = new Promise<Error>((resolve) => {
          entry.content!.on('data', (c: Buffer) => (bytes += c.length));
          entry.content!.once('error', resolve);
        });
        await waitFor(() => (bytes > 10_000 ? true : undefined), 5000, 'bytes to flow');
        const closedBefore = closedRequests.length;
        const t0 = performance.now();
        controller.abort();
        const err = await failed;
        latencies[route] = performance.now() - t0;
        assert.ok(isStagingError(err, 'ECANCELED'), String(err));
        assert.ok(err.message.includes(`${base}${route}`), err.message);
        assert.ok(latencies[route] < CANCEL_MS + CANCEL_SLACK_MS, `${route}: ${latencies[route]} ms`);
        await assert.rejects(it.next(), (e: unknown) => isStagingError(e, 'ECANCELED'));
        await waitFor(() => (closedRequests.length > closedBefore ? true : undefined), 2000, 'the server to see the connection closed');
      }
      // Waiting for a tar entry that does not come, and downloading a zip, stop as fast.
      for (const route of ['/stall.tar', '/endless.zip']) {
        const controller = new AbortController();
        const names: string[] = [];
        const pending = (async () => {
          for await (const e of openSource(`${base}${route}`, context({ signal: controller.signal }).ctx)) names.push(e.name);
        })();
        await sleep(150);
        if (route === '/stall.tar') assert.deepEqual(names, ['waiting']);
        const t0 = performance.now();
        controller.abort();
        const err = await rejection(pending);
        latencies[route] = performance.now() - t0;
        assert.equal(err.code, 'ECANCELED');
        assert.ok(latencies[route] < CANCEL_MS + CANCEL_SLACK_MS, `${route}: ${latencies[route]} ms`);
      }
      console.log(`      cancellation latency: ${Object.entries(latencies).map(([k, v]) => `${k} ${v.toFixed(1)} ms`).join(', ')}`);
    });

    it('closes the connection when the consumer stops before the end', async () => {
      const closedBefore = closedRequests.length;
      for await (const e of openSource(`${base}/endless.tar`, context().ctx)) {
        assert.equal(e.name, 'huge.bin');
        break;
      }
      await waitFor(() => (closedRequests.length > closedBefore ? true : undefined), 2000, 'the server to see the connection closed');
    });
  });
});
