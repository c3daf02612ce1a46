/**
 * stage() under real conditions: downloads from a real HTTP server on 127.0.0.1 (cut off,
 * missing, looping, endless, slow), a real full disk (a small tmpfs), and real permission
 * failures (a child process running as an unprivileged user). Every failure must name its cause
 * and leave a new tag absent and an existing area byte for byte as it was, with its lock free.
 */
import { strict as assert } from 'assert';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import * as tar from 'tar';
import { StagingError } from '../../../src/core/base/errors';
import { inspect } from '../../../src/core/lock/inspect';
import { META_DIR, TRASH_DIR } from '../../../src/core/base/protocol';
import { stage } from '../../../src/core/stage/stage';
import { MANIFEST_FILE, type Manifest, type StageProgress } from '../../../src/core/stage/types';
import { differences, partsIn, sha, startServer, tree, writeArchives, type EntrySpec, type TestServer } from '../../fixtures';
import { cleanup, cli, isRoot, report, run, tempDir, WORKERS } from '../../helpers';

/** The stated cancellation requirement. */
const CANCEL_MS = 100;
/**
 * Added to it in assertions: the rollback and release after the abort (a rename and a delete)
 * wait on the disk, which another process's writeback stalled for 200 ms at times on a shared
 * machine. The slow downloads would take hours, so a bound of a second still tells a cancel
 * honoured from one ignored; the latencies are printed, and the stop itself (the readers, no disk)
 * is held to CANCEL_MS in sources.test.ts.
 */
const CANCEL_SLACK_MS = 900;

async function rejection(p: Promise<unknown>): Promise<StagingError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof StagingError, `expected a StagingError, got ${String(err)}`);
    return err;
  }
  assert.fail('expected the staging to fail');
}

/** What must hold after a failed staging: a new tag absent, an existing area as it was, locks free. */
class Watch {
  private readonly before: Map<string, string>;

  constructor(
    private readonly staticDir: string,
    private readonly existing: string,
  ) {
    this.before = this.area();
  }

  private area(): Map<string, string> {
    // Directory mtimes move with the part files a failed staging made and removed.
    return tree(path.join(this.staticDir, this.existing), { dirMtimes: false });
  }

  async unchanged(why: string, newTag?: string): Promise<void> {
    assert.deepEqual(differences(this.before, this.area()), [], `the existing area changed after ${why}`);
    assert.deepEqual(partsIn(path.join(this.staticDir, this.existing)), [], `part files left after ${why}`);
    assert.equal((await inspect(this.staticDir, this.existing)).state, 'free', `the lock of ${this.existing} after ${why}`);
    if (newTag !== undefined) {
      assert.equal(fs.lstatSync(path.join(this.staticDir, newTag), { throwIfNoEntry: false }), undefined, `${newTag} left behind after ${why}`);
      assert.equal((await inspect(this.staticDir, newTag)).state, 'free');
    }
    const trash = path.join(this.staticDir, META_DIR, TRASH_DIR);
    assert.deepEqual(fs.existsSync(trash) ? fs.readdirSync(trash) : [], [], `left in the trash after ${why}`);
  }
}

/** A small build: two files, a nested one and a link. */
function makeBuild(dir: string, imageBytes: number): void {
  fs.mkdirSync(path.join(dir, 'autotest'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'image.bin'), crypto.randomBytes(imageBytes));
  fs.writeFileSync(path.join(dir, 'autotest', 'control'), 'control file\n');
  fs.writeFileSync(path.join(dir, 'version.txt'), 'R120-15662.0.0\n');
  fs.symlinkSync('autotest/control', path.join(dir, 'control'));
}

// ---------------------------------------------------------------------------------------------

describe('stage() over HTTP from a real server', function () {
  this.timeout(60_000);
  let root: string;
  let staticDir: string;
  let server: TestServer;
  let base: string;
  let watch: Watch;
  const EXISTING = 'board/existing';
  const plain = crypto.randomBytes(300_000);
  const archived: EntrySpec[] = [
    { name: 'a.txt', data: 'first\n' },
    { name: 'sub/', type: 'dir' },
    { name: 'sub/b.txt', data: 'second\n' },
    { name: 'link', type: 'symlink', linkname: 'a.txt' },
    // Incompressible, so that half of the archive holds the small entries whole and not this one.
    { name: 'big.bin', random: 400_000 },
  ];
  let tarGz: Buffer;
  let zip: Buffer;
  /** A tar header announcing a 1 GiB file, for an archive that never ends. */
  const hugeHeader = (): Buffer => {
    const header = new tar.Header({ path: 'huge.bin', size: 2 ** 30, type: 'File', mode: 0o644, mtime: new Date(0), uid: 0, gid: 0 });
    header.encode();
    return header.block!;
  };

  before(async () => {
    root = tempDir('dss-http-');
    staticDir = path.join(root, 'static');
    fs.mkdirSync(staticDir);
    await writeArchives([
      { file: path.join(root, 'build.tar.gz'), kind: 'tar.gz', entries: archived },
      { file: path.join(root, 'build.zip'), kind: 'zip', entries: archived },
    ]);
    tarGz = fs.readFileSync(path.join(root, 'build.tar.gz'));
    zip = fs.readFileSync(path.join(root, 'build.zip'));
    makeBuild(path.join(root, 'build'), 200_000);
    await stage(staticDir, EXISTING, [path.join(root, 'build')]);
    watch = new Watch(staticDir, EXISTING);

    server = await startServer((req, res) => {
      const send = (body: Buffer, type = 'application/octet-stream'): void => {
        res.writeHead(200, { 'content-type': type, 'content-length': body.length });
        res.end(body);
      };
      /** Sends `bytes` of `body` against its full Content-Length, then drops the connection. */
      const cutOff = (body: Buffer, bytes: number): void => {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body.length });
        res.write(body.subarray(0, bytes));
        setTimeout(() => req.socket.destroy(), 20);
      };
      /** Without end; `everyMs` between chunks of `chunk` bytes; announced as `length` bytes if given. */
      const endless = (first: Buffer | undefined, everyMs: number, chunk: number, length?: number): void => {
        res.writeHead(200, { 'content-type': 'application/octet-stream', ...(length !== undefined ? { 'content-length': length } : {}) });
        if (first) res.write(first);
        const timer = setInterval(() => res.write(Buffer.alloc(chunk, 1)), everyMs);
        res.on('close', () => clearInterval(timer));
      };
      switch (req.url) {
        case '/files/plain.bin':
          return send(plain);
        case '/a/build.tar.gz':
          return send(tarGz, 'application/gzip');
        case '/half/plain.bin':
          return cutOff(plain, plain.length >> 1);
        case '/half/build.tar.gz':
          return cutOff(tarGz, tarGz.length >> 1);
        case '/half/build.zip':
          return cutOff(zip, zip.length >> 1);
        case '/missing.tar.gz':
          res.writeHead(404, { 'content-type': 'text/plain' });
          return void res.end('no such file');
        case '/loop':
          res.writeHead(302, { location: '/loop' });
          return void res.end();
        case '/endless.bin':
          return endless(undefined, 1, 64 * 1024);
        case '/endless.zip':
          return endless(undefined, 1, 64 * 1024);
        case '/endless.tar':
          return endless(hugeHeader(), 1, 64 * 1024);
        case '/slow.bin':
          return endless(undefined, 10, 4096, 100 * 1024 * 1024);
        case '/slow.zip':
          return endless(undefined, 10, 4096, 100 * 1024 * 1024);
        default:
          res.writeHead(404);
          res.end();
      }
    });
    base = server.base;
  });

  after(async () => {
    await server?.close();
    if (root) cleanup(root);
  });

  it('stages a plain file URL as one artifact whose source is the URL', async () => {
    const url = `${base}/files/plain.bin`;
    const r = await stage(staticDir, 'http/plain', [url]);
    assert.deepEqual(
      r.added.map((a) => [a.name, a.type, a.size, a.sha256, a.source]),
      [['plain.bin', 'file', plain.length, sha(plain), url]],
    );
    const dir = path.join(staticDir, 'http', 'plain');
    assert.equal(sha(fs.readFileSync(path.join(dir, 'plain.bin'))), sha(plain));
    const manifest = JSON.parse(fs.readFileSync(path.join(dir, MANIFEST_FILE), 'utf8')) as Manifest;
    assert.equal(manifest.artifacts['plain.bin'].source, url);
    assert.deepEqual(partsIn(dir), []);
    assert.equal((await inspect(staticDir, 'http/plain')).state, 'free');
  });

  it('stages a .tar.gz URL unpacked, each artifact with the source url#entry', async () => {
    const url = `${base}/a/build.tar.gz`;
    await stage(staticDir, 'http/tgz', [url]);
    const dir = path.join(staticDir, 'http', 'tgz');
    const manifest = JSON.parse(fs.readFileSync(path.join(dir, MANIFEST_FILE), 'utf8')) as Manifest;
    assert.deepEqual(
      Object.values(manifest.artifacts)
        .map((a) => [a.name, a.type, a.source])
        .sort(),
      [
        ['a.txt', 'file', `${url}#a.txt`],
        ['big.bin', 'file', `${url}#big.bin`],
        ['link', 'symlink', `${url}#link`],
        ['sub/b.txt', 'file', `${url}#sub/b.txt`],
      ],
    );
    assert.equal(fs.readFileSync(path.join(dir, 'sub', 'b.txt'), 'utf8'), 'second\n');
    assert.equal(fs.readlinkSync(path.join(dir, 'link')), 'a.txt');
    assert.equal(manifest.artifacts['big.bin'].sha256, sha(fs.readFileSync(path.join(dir, 'big.bin'))));
    assert.equal((await inspect(staticDir, 'http/tgz')).state, 'free');
  });

  it('a response cut off midway fails with ESOURCE naming the URL, keeping nothing of it', async () => {
    for (const route of ['/half/plain.bin', '/half/build.tar.gz', '/half/build.zip']) {
      const url = `${base}${route}`;
      for (const mode of ['new', 'add'] as const) {
        const tag = mode === 'new' ? `http/cut-${path.basename(route)}` : EXISTING;
        const finished: string[] = [];
        const err = await rejection(
          stage(staticDir, tag, [url], { add: mode === 'add', onProgress: (p) => void (p.done !== undefined && finished.push(p.artifact)) }),
        );
        report(`${route} (${mode}): ${err.code}: ${err.message}`);
        assert.equal(err.code, 'ESOURCE', err.message);
        assert.ok(err.message.includes(url), err.message);
        if (route === '/half/plain.bin') assert.match(err.message, new RegExp(`after ${plain.length >> 1} of ${plain.length} bytes`));
        // Small entries before the cut were staged, so the rollback had something to undo. How many
        // of them the parser hands over before the cut-off socket's error arrives is a race: any
        // non-empty start of the archive's order will do.
        if (route === '/half/build.tar.gz') {
          const order = ['a.txt', 'sub/b.txt', 'link'];
          assert.ok(finished.length > 0 && finished.every((n, i) => n === order[i]), `finished before the cut: ${JSON.stringify(finished)}`);
        }
        await watch.unchanged(`${route} cut off (${mode})`, mode === 'new' ? tag : undefined);
      }
    }
  });

  it('a response cut off midway, written through the thread pool (as onto a network filesystem), fails the same way', async () => {
    // In a child process: which calls the core makes is decided once per filesystem in a process.
    // There the part file is opened through the thread pool while the download goes on, and the
    // cut must still come back as the staging's failure, never as an uncaught exception.
    for (const route of ['/half/build.tar.gz', '/half/plain.bin']) {
      const url = `${base}${route}`;
      const tag = `http/cut-pooled-${path.basename(route)}`;
      const r = await cli(staticDir, ['stage', tag, url], { DEVSERVER_STAGING_ASYNC_IO: '1' });
      report(`${route} through the thread pool: exit ${String(r.code)}: ${r.stderr.trim()}`);
      assert.notEqual(r.code, 0, r.stderr);
      assert.ok(r.stderr.includes(url), r.stderr);
      assert.match(r.stderr, /the connection ended after \d+ of \d+ bytes/);
      assert.doesNotMatch(r.stderr, /^\s+at /m, 'a stack trace: the failure escaped the staging');
      await watch.unchanged(`${route} cut off, through the thread pool`, tag);
    }
  });

  it('HTTP 404 and a redirect loop fail with ESOURCE naming the URL', async () => {
    for (const [route, cause] of [
      ['/missing.tar.gz', /HTTP 404/],
      ['/loop', /too many redirects/],
    ] as const) {
      const url = `${base}${route}`;
      for (const mode of ['new', 'add'] as const) {
        const tag = mode === 'new' ? 'http/failed' : EXISTING;
        const err = await rejection(stage(staticDir, tag, [url], { add: mode === 'add' }));
        assert.equal(err.code, 'ESOURCE', err.message);
        assert.ok(err.message.includes(url), err.message);
        assert.match(err.message, cause);
        await watch.unchanged(`${route} (${mode})`, mode === 'new' ? tag : undefined);
      }
    }
  });

  it('an endless response stops at maxBytes with ETOOBIG naming the URL', async () => {
    const maxBytes = 1024 * 1024;
    for (const route of ['/endless.bin', '/endless.tar', '/endless.zip']) {
      const url = `${base}${route}`;
      for (const mode of ['new', 'add'] as const) {
        const tag = mode === 'new' ? 'http/endless' : EXISTING;
        let bytes = 0;
        const err = await rejection(stage(staticDir, tag, [url], { add: mode === 'add', maxBytes, onProgress: (p) => void (bytes = Math.max(bytes, p.bytes)) }));
        assert.equal(err.code, 'ETOOBIG', err.message);
        assert.ok(err.message.includes(url), err.message);
        assert.ok(bytes <= maxBytes, `${bytes} bytes reported against a limit of ${maxBytes}`);
        await watch.unchanged(`${route} (${mode})`, mode === 'new' ? tag : undefined);
      }
    }
  });

  it('a cancel stops a slow download at once with ECANCELED, keeping nothing', async () => {
    const latencies: string[] = [];
    for (const [route, mode] of [
      ['/slow.bin', 'new'],
      ['/slow.zip', 'add'],
      ['/slow.bin', 'add'],
    ] as const) {
      const url = `${base}${route}`;
      const tag = mode === 'new' ? 'http/slow' : EXISTING;
      const controller = new AbortController();
      let abortedAt = 0;
      const onProgress = (p: StageProgress): void => {
        // Once bytes have arrived: the download is under way, with a part file in the area.
        if (abortedAt === 0 && p.artifactBytes > 16 * 1024) {
          abortedAt = performance.now();
          controller.abort();
        }
      };
      const err = await rejection(stage(staticDir, tag, [url], { add: mode === 'add', signal: controller.signal, onProgress }));
      const took = performance.now() - abortedAt;
      assert.ok(abortedAt > 0, 'the cancel came mid-download');
      assert.equal(err.code, 'ECANCELED', err.message);
      assert.ok(took < CANCEL_MS + CANCEL_SLACK_MS, `${route} (${mode}): stopped ${took.toFixed(1)} ms after the abort`);
      latencies.push(`${route} (${mode}) ${took.toFixed(1)} ms`);
      await watch.unchanged(`a cancel of ${route} (${mode})`, mode === 'new' ? tag : undefined);
    }
    report(`cancellation latency: ${latencies.join(', ')}`);
  });
});

// ---------------------------------------------------------------------------------------------

function isMounted(dir: string): boolean {
  return fs
    .readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .some((line) => line.split(' ')[1] === dir);
}

/** Bytes still free for an unprivileged writer on the filesystem of `dir`. */
function freeBytes(dir: string): number {
  const s = fs.statfsSync(dir);
  return s.bavail * s.bsize;
}

function writeRandom(file: string, bytes: number): void {
  const fd = fs.openSync(file, 'w');
  try {
    for (let done = 0; done < bytes; done += 1024 * 1024) fs.writeSync(fd, crypto.randomBytes(Math.min(1024 * 1024, bytes - done)));
  } finally {
    fs.closeSync(fd);
  }
}

describe('stage() onto a full disk (an 8 MiB tmpfs)', function () {
  this.timeout(60_000);
  let base = '';
  let disk = '';
  let staticDir: string;
  let big: string;
  let bigTarGz: string;
  let server: TestServer | undefined;
  const EXISTING = 'board/existing';

  before(async function () {
    if (!isRoot) {
      report('skipped: mounting a tmpfs needs root');
      this.skip();
    }
    base = tempDir('dss-stage-full-');
    disk = path.join(base, 'disk');
    fs.mkdirSync(disk);
    const r = await run('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', disk]);
    if (r.code !== 0) disk = '';
    assert.equal(r.code, 0, `mount -t tmpfs failed as root: ${r.stderr}`);
    staticDir = path.join(disk, 'static');
    fs.mkdirSync(staticDir);
    makeBuild(path.join(base, 'build'), 512 * 1024);
    await stage(staticDir, EXISTING, [path.join(base, 'build')]);
    // Sources live off the small disk: larger than all of it, so no staging of them can fit.
    big = path.join(base, 'big.bin');
    writeRandom(big, 12 * 1024 * 1024);
    bigTarGz = path.join(base, 'big.tar.gz');
    await writeArchives([{ file: bigTarGz, kind: 'tar.gz', entries: [{ name: 'small.txt', data: 'small\n' }, { name: 'big.bin', random: 12 * 1024 * 1024 }] }]);
  });

  after(async () => {
    await server?.close();
    if (disk !== '' && isMounted(disk)) await run('umount', [disk]);
    if (base !== '' && (disk === '' || !isMounted(disk))) cleanup(base);
  });

  /**
   * The error must say that the filesystem is full, or about to be, and where. A staging larger
   * than the free space now stops at the safety margin (ETOOBIG) before the disk fills; one that
   * meets a disk already full gets ENOSPC (EIO).
   */
  function saysFull(err: StagingError, what: string): void {
    report(`${what}: ${err.code}: ${err.message}`);
    if (err.code === 'ETOOBIG') {
      assert.match(err.message, /stopped before the filesystem fills: it had .* free/, `${what}: the message does not give the cause`);
      assert.ok(err.message.includes(staticDir), `${what}: the message does not say where: ${err.message}`);
      return;
    }
    assert.match(err.message, /ENOSPC|no space left/i, `${what}: the message does not give the cause`);
    assert.match(err.message, /filesystem is full/i, `${what}: the message does not say that the filesystem is full`);
    assert.ok(err.message.includes(staticDir), `${what}: the message does not say where: ${err.message}`);
    assert.equal(err.code, 'EIO', `${what}: a full disk is not a fault of the source`);
  }

  it('adding a file larger than the free space: a clear error, the existing area unchanged, its space given back', async () => {
    const watch = new Watch(staticDir, EXISTING);
    const free = freeBytes(disk);
    const err = await rejection(stage(staticDir, EXISTING, [big], { add: true }));
    await watch.unchanged('a full disk');
    saysFull(err, 'a local file added');
    // The part file is gone, so all the space it took is free again.
    assert.ok(Math.abs(freeBytes(disk) - free) <= 64 * 1024, `free space ${free} before, ${freeBytes(disk)} after`);
  });

  it('a new tag with a file larger than the free space leaves nothing behind', async () => {
    const watch = new Watch(staticDir, EXISTING);
    const free = freeBytes(disk);
    const err = await rejection(stage(staticDir, 'board/fresh', [big]));
    await watch.unchanged('a full disk', 'board/fresh');
    saysFull(err, 'a local file as a new build');
    assert.ok(Math.abs(freeBytes(disk) - free) <= 64 * 1024, `free space ${free} before, ${freeBytes(disk)} after`);
  });

  it('an archive entry larger than the free space: a clear error naming the full disk, not a bad source', async () => {
    const watch = new Watch(staticDir, EXISTING);
    const errors: [StagingError, string][] = [];
    for (const [tag, add] of [
      [EXISTING, true],
      ['board/fresh-archive', false],
    ] as const) {
      errors.push([await rejection(stage(staticDir, tag, [bigTarGz], { add })), `an archive ${add ? 'added' : 'as a new build'}`]);
      await watch.unchanged('a full disk', add ? undefined : tag);
    }
    for (const [err, what] of errors) saysFull(err, what);
  });

  // A plain file is staged as it streams in; a zip is first downloaded whole to a part file.
  for (const route of ['/big.bin', '/big.zip']) {
    it(`a download larger than the free space (${route}): a clear error naming the full disk`, async () => {
      if (server === undefined) {
        const data = fs.readFileSync(big);
        server = await startServer((_req, res) => {
          res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': data.length });
          res.end(data);
        });
      }
      const watch = new Watch(staticDir, EXISTING);
      const err = await rejection(stage(staticDir, EXISTING, [`${server.base}${route}`], { add: true }));
      await watch.unchanged(`a download of ${route} onto a full disk`);
      saysFull(err, `a download of ${route}`);
    });
  }

  it('on a disk already full to the last block, a new tag fails clearly and leaves nothing', async () => {
    const watch = new Watch(staticDir, EXISTING);
    const filler = path.join(disk, 'filler');
    const fd = fs.openSync(filler, 'w');
    try {
      const block = Buffer.alloc(64 * 1024, 1);
      for (;;) fs.writeSync(fd, block);
    } catch (err) {
      assert.equal((err as { code?: string }).code, 'ENOSPC');
    } finally {
      fs.closeSync(fd);
    }
    try {
      const err = await rejection(stage(staticDir, 'board/fresh-full', [path.join(base, 'build', 'version.txt')]));
      await watch.unchanged('a full disk', 'board/fresh-full');
      saysFull(err, 'a new build on a full disk');
    } finally {
      fs.rmSync(filler);
    }
  });
});

// ---------------------------------------------------------------------------------------------

interface ChildResult {
  ok: boolean;
  code?: string;
  message?: string;
  added?: string[];
}

describe('stage() without permission (a child process as uid 65534)', function () {
  this.timeout(60_000);
  let root: string;
  let staticDir: string;
  const NOBODY = 65534;

  /** Runs one stage() as the unprivileged user (as ourselves when we are not root: permissions apply then). */
  async function stageAsNobody(test: Mocha.Context, tag: string, sources: string[], options: { add?: boolean } = {}): Promise<ChildResult> {
    const args = JSON.stringify({ staticDir, tag, sources, options });
    const r = await run(process.execPath, [path.join(WORKERS, 'stage.js'), args], isRoot ? { uid: NOBODY, gid: NOBODY } : {});
    if (/Cannot find module|EACCES.*stage\.js/.test(r.stderr)) {
      report(`skipped: the unprivileged user cannot load the compiled worker here (${r.stderr.split('\n')[0]})`);
      test.skip();
    }
    try {
      return JSON.parse(r.stdout) as ChildResult;
    } catch {
      assert.fail(`the child printed no result (exit ${r.code}): ${r.stdout}${r.stderr}`);
    }
  }

  beforeEach(async () => {
    root = tempDir('dss-perm-');
    // The child must be able to reach everything below; mkdtemp makes 0700.
    fs.chmodSync(root, 0o755);
    staticDir = path.join(root, 'static');
    fs.mkdirSync(staticDir);
  });

  afterEach(() => {
    if (root) {
      // Give every directory back to its owner's rights so the cleanup can walk it as anyone.
      const walk = (d: string): void => {
        fs.chmodSync(d, 0o755);
        for (const e of fs.readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) walk(path.join(d, e.name));
      };
      walk(root);
      cleanup(root);
    }
  });

  /** Hands the static directory and everything in it to the unprivileged user. */
  function giveStaticAway(): void {
    const walk = (p: string): void => {
      fs.lchownSync(p, isRoot ? NOBODY : process.getuid!(), isRoot ? NOBODY : process.getgid!());
      if (fs.lstatSync(p).isDirectory()) for (const n of fs.readdirSync(p)) walk(path.join(p, n));
    };
    walk(staticDir);
  }

  it('an unreadable source (a file, an archive, a directory inside a source) fails with ESOURCE naming it and the cause', async function () {
    const src = path.join(root, 'src');
    fs.mkdirSync(path.join(src, 'tree', 'locked'), { recursive: true });
    fs.writeFileSync(path.join(src, 'secret.bin'), 'not for everyone');
    await writeArchives([{ file: path.join(src, 'secret.tar.gz'), kind: 'tar.gz', entries: [{ name: 'x.txt', data: 'x' }] }]);
    fs.writeFileSync(path.join(src, 'tree', 'a.txt'), 'a');
    fs.writeFileSync(path.join(src, 'tree', 'locked', 'b.txt'), 'b');
    fs.chmodSync(path.join(src, 'secret.bin'), 0o000);
    fs.chmodSync(path.join(src, 'secret.tar.gz'), 0o000);
    fs.chmodSync(path.join(src, 'tree', 'locked'), 0o000);
    // The board exists already: parents a failed new build leaves are another test's subject.
    fs.mkdirSync(path.join(staticDir, 'board'));
    giveStaticAway();
    // Directory mtimes move: our bookkeeping directory appears, and the area is made and removed.
    const before = tree(staticDir, { skip: (p) => p === path.join(staticDir, META_DIR), dirMtimes: false });

    for (const [source, named] of [
      [path.join(src, 'secret.bin'), path.join(src, 'secret.bin')],
      [path.join(src, 'secret.tar.gz'), path.join(src, 'secret.tar.gz')],
      [path.join(src, 'tree'), path.join(src, 'tree', 'locked')],
    ] as const) {
      const result = await stageAsNobody(this, 'board/unreadable', [source]);
      report(`${path.relative(root, source)}: ${result.code}: ${result.message}`);
      assert.equal(result.ok, false, `staged ${JSON.stringify(result.added)}`);
      assert.equal(result.code, 'ESOURCE', result.message);
      assert.ok(result.message!.includes(named), `the message does not name ${named}: ${result.message}`);
      assert.match(result.message!, /permission denied/i);
      assert.deepEqual(differences(before, tree(staticDir, { skip: (p) => p === path.join(staticDir, META_DIR), dirMtimes: false })), [], 'the static directory changed');
      assert.equal((await inspect(staticDir, 'board/unreadable')).state, 'free');
    }
  });

  it('an area the user may not write: a clear error, and nothing changed', async function () {
    const build = path.join(root, 'build');
    makeBuild(build, 10_000);
    const addition = path.join(root, 'addition');
    fs.mkdirSync(path.join(addition, 'autotest'), { recursive: true });
    fs.writeFileSync(path.join(addition, 'new.txt'), 'new\n');
    fs.writeFileSync(path.join(addition, 'autotest', 'new-control'), 'new control\n');
    fs.chmodSync(addition, 0o755);

    // Staged by root: the area, and all in it, belong to root; the rest of the static directory is the user's.
    await stage(staticDir, 'board/theirs', [build]);
    // A board (a directory of areas) the user may not write.
    fs.mkdirSync(path.join(staticDir, 'closed'));
    // Staged, then handed over, except one directory inside it.
    await stage(staticDir, 'board/mixed', [build]);
    giveStaticAway();
    for (const p of [path.join(staticDir, 'board', 'theirs'), path.join(staticDir, 'board', 'mixed', 'autotest'), path.join(staticDir, 'closed')]) {
      const walk = (q: string): void => {
        fs.lchownSync(q, 0, 0);
        if (fs.lstatSync(q).isDirectory()) for (const n of fs.readdirSync(q)) walk(path.join(q, n));
      };
      if (isRoot) walk(p);
      else fs.chmodSync(p, 0o555);
    }

    for (const tag of ['board/theirs', 'board/mixed']) {
      const watch = new Watch(staticDir, tag);
      const result = await stageAsNobody(this, tag, [addition], { add: true });
      report(`adding to ${tag}: ${result.code}: ${result.message}`);
      assert.equal(result.ok, false, `staged ${JSON.stringify(result.added)}`);
      assert.match(result.message!, /permission denied/i, 'the message does not give the cause');
      assert.ok(result.message!.includes(path.join(staticDir, tag)), `the message does not say where: ${result.message}`);
      assert.match(result.message!, /permissions/i, 'the message does not say what to check');
      assert.equal(result.code, 'EIO', result.message);
      await watch.unchanged(`adding to ${tag} without permission`);
    }

    const before = tree(staticDir, { skip: (p) => p === path.join(staticDir, META_DIR), dirMtimes: true });
    const result = await stageAsNobody(this, 'closed/R1', [addition]);
    report(`a new build closed/R1: ${result.code}: ${result.message}`);
    assert.equal(result.ok, false, `staged ${JSON.stringify(result.added)}`);
    assert.match(result.message!, /permission denied/i, 'the message does not give the cause');
    assert.ok(result.message!.includes(path.join(staticDir, 'closed')), `the message does not say where: ${result.message}`);
    assert.equal(result.code, 'EIO', result.message);
    assert.deepEqual(differences(before, tree(staticDir, { skip: (p) => p === path.join(staticDir, META_DIR), dirMtimes: true })), [], 'the static directory changed');
  });
});
