/**
 * A build whose manifest nears its limit (MAX_MANIFEST_BYTES, 512 MiB: 1.7 million artifacts):
 * staging more into it is refused before anything is copied or the manifest is even read, with
 * an error that names the limit, the size the manifest would reach and how to stage such a build;
 * an archive whose artifacts are known only as it is read is refused at the artifact that would
 * pass the limit, before it is copied; and the writer never makes a string longer than V8 allows.
 * The manifests are written on disk in the writer's layout, as a staging of that many artifacts
 * would leave them (entries with long sources, so that a few thousand reach the size).
 */
import { strict as assert } from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as http from 'http';
import type { AddressInfo } from 'net';
import * as path from 'path';
import { MAX_MANIFEST_BYTES, manifestText, noArtifacts, type ManifestEntry } from '../../../src/core/build/manifest';
import { MANIFEST_FILE, TIMESTAMP_FILE } from '../../../src/core/base/protocol';
import { TOOL, cleanup, rejectsWith, run, tempDir } from '../../helpers';


const HEAD = '{\n  "version": 1,\n  "artifacts": {\n';
const TAIL = '\n  }\n}\n';
const SOURCE = 100_000;

const entryOf = (name: string, source: string): ManifestEntry => ({
  name,
  type: 'file',
  size: 1,
  sha256: 'a'.repeat(64),
  source,
  stagedAt: '2024-01-01T00:00:00.000Z',
  fence: 1,
});
/** An entry as the writer lays it out (the manifest is `JSON.stringify(…, null, 2)`). */
const entryText = (e: ManifestEntry): string => `    ${JSON.stringify(e.name)}: ${JSON.stringify(e, null, 2).replace(/\n/g, '\n    ')}`;

/** Writes a manifest of exactly `total` bytes in the writer's layout; how many artifacts it lists. */
function writeManifest(file: string, total: number): number {
  const source = 'x'.repeat(SOURCE);
  const one = Buffer.byteLength(entryText(entryOf('a000000', source)));
  const n = Math.floor((total - HEAD.length - TAIL.length + 2) / (one + 2));
  const rest = total - (HEAD.length + n * one + (n - 1) * 2 + TAIL.length);
  const fd = fs.openSync(file, 'w');
  try {
    fs.writeSync(fd, HEAD);
    for (let i = 0; i < n; i++) {
      const last = i === n - 1;
      fs.writeSync(fd, entryText(entryOf(`a${String(i).padStart(6, '0')}`, last ? source + 'x'.repeat(rest) : source)) + (last ? '' : ',\n'));
    }
    fs.writeSync(fd, TAIL);
  } finally {
    fs.closeSync(fd);
  }
  assert.equal(fs.statSync(file).size, total);
  return n;
}

/** What says that a file was not touched: its inode, size and modification time. */
/** The error a --json run reports: its one JSON line on stderr (progress lines are beside it). */
function errorOf(stderr: string): { code: string; message: string } {
  const line = stderr.split('\n').find((l) => l.startsWith('{"error":'));
  assert.ok(line !== undefined, stderr);
  return (JSON.parse(line) as { error: { code: string; message: string } }).error;
}

const identity = (file: string): string => {
  const st = fs.statSync(file);
  return `${st.ino}:${st.size}:${st.mtimeMs}`;
};

describe('the manifest size limit', function () {
  this.timeout(180_000);
  let root: string;
  let staticDir: string;
  let area: string;
  let manifest: string;

  beforeEach(() => {
    root = tempDir('dss-manifest-limit-');
    staticDir = path.join(root, 'static');
    area = path.join(staticDir, 'board', 'BIG');
    fs.mkdirSync(area, { recursive: true });
    fs.writeFileSync(path.join(area, TIMESTAMP_FILE), '');
    manifest = path.join(area, MANIFEST_FILE);
  });
  afterEach(() => cleanup(root));

  it('the writer refuses a manifest past the limit with ETOOBIG, never making a string longer than V8 allows', async () => {
    // 5,500 entries sharing one 100 KB source: 550 MB of text, past the limit and past 2^29 - 24 characters.
    const source = 'x'.repeat(SOURCE);
    const artifacts = noArtifacts();
    for (let i = 0; i < 5_500; i++) {
      const name = `a${String(i).padStart(6, '0')}`;
      artifacts[name] = entryOf(name, source);
    }
    assert.ok(5_500 * SOURCE > 536_870_888);
    const err = await rejectsWith(manifestText({ version: 1, artifacts }), 'ETOOBIG', `${MAX_MANIFEST_BYTES} bytes`);
    assert.match(err.message, /split its artifacts among several tags/);
  });

  it('stage --add into a build whose manifest is 100 bytes under the limit: refused before anything is copied, the manifest untouched', async () => {
    const listed = writeManifest(manifest, MAX_MANIFEST_BYTES - 100);
    const before = identity(manifest);
    const file = path.join(root, 'new.bin');
    fs.writeFileSync(file, 'new\n');
    // A download that would be copied after the file: asked for only if staging got that far.
    let requests = 0;
    const server = http.createServer((_req, res) => {
      requests++;
      res.end('more\n');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/more.bin`;
      const r = await run(process.execPath, [TOOL, '--json', 'stage', '--add', 'board/BIG', file, url], { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir } });
      assert.equal(r.code, 1, r.stdout + r.stderr);
      const error = errorOf(r.stderr);
      assert.equal(error.code, 'ETOOBIG', error.message);
      assert.ok(error.message.includes(`the limit of 512.0 MiB (${MAX_MANIFEST_BYTES} bytes)`), error.message);
      const wouldBe = Number(/\((\d+) bytes\) with 2 new artifacts/.exec(error.message)?.[1]);
      assert.ok(wouldBe > MAX_MANIFEST_BYTES && wouldBe < MAX_MANIFEST_BYTES + 2_000, error.message);
      assert.match(error.message, /split its artifacts among several tags \(such as board\/BIG-part1 and board\/BIG-part2\)/);
    } finally {
      server.close();
    }
    assert.equal(requests, 0, 'the download was asked for: staging began');
    assert.ok(!fs.existsSync(path.join(area, 'new.bin')));
    assert.equal(identity(manifest), before);
    assert.ok(listed > 5_000, `${listed} artifacts`);
  });

  it('an archive whose artifacts are known only as it is read: refused at the artifact that would pass the limit, the build untouched', async function () {
    if (spawnSync('tar', ['--version']).status !== 0) this.skip();
    writeManifest(manifest, MAX_MANIFEST_BYTES - 50_000);
    const before = identity(manifest);
    const tree = path.join(root, 'tree');
    fs.mkdirSync(tree);
    // 400 artifacts of some 300 bytes of manifest each: 120 KB, more than the 50 KB left.
    for (let i = 0; i < 400; i++) fs.writeFileSync(path.join(tree, `f${String(i).padStart(4, '0')}.txt`), `${i}\n`);
    const archive = path.join(root, 'tree.tar');
    assert.equal(spawnSync('tar', ['-cf', archive, '-C', tree, '.']).status, 0);
    const r = await run(process.execPath, [TOOL, '--json', 'stage', '--add', 'board/BIG', archive], { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir } });
    assert.equal(r.code, 1, r.stdout + r.stderr);
    const error = errorOf(r.stderr);
    assert.equal(error.code, 'ETOOBIG', error.message);
    const added = Number(/with (\d+) new artifacts/.exec(error.message)?.[1]);
    assert.ok(added > 1 && added < 400, error.message);
    // None of the archive's artifacts in the build (lock bookkeeping aside, nothing else changed).
    assert.deepEqual(fs.readdirSync(area).filter((n) => /^f\d{4}\.txt$/.test(n)), []);
    assert.equal(identity(manifest), before);
  });
});
