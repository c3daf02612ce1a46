/**
 * A build's figures for a tooltip (core/contents.ts): from the manifest, kept while the manifest is
 * unchanged and read again as soon as it changes in any way, and from the files at the build's top
 * when there is no manifest to count.
 */
import { strict as assert } from 'assert';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { ContentsCache, buildContents, type ManifestEntry } from '../../src/core';
import { manifestText, noArtifacts } from '../../src/core/manifest';
import { MANIFEST_FILE } from '../../src/core/protocol';
import { cleanup, tempDir } from '../helpers';

async function manifestOf(sizes: readonly number[]): Promise<string> {
  const artifacts = noArtifacts();
  sizes.forEach((size, i) => {
    const name = `dir/f-${i}.bin`;
    artifacts[name] = { name, type: 'file', size, sha256: '0'.repeat(64), source: `/out/${name}`, stagedAt: '2026-01-01T00:00:00.000Z' } satisfies ManifestEntry;
  });
  return manifestText({ version: 1, artifacts });
}

describe('a build’s figures for its tooltip', () => {
  let root: string;
  let staticDir: string;
  let build: string;
  let manifest: string;

  beforeEach(() => {
    root = tempDir();
    staticDir = path.join(root, 'static');
    build = path.join(staticDir, 'eve', 'R1');
    manifest = path.join(build, MANIFEST_FILE);
    fs.mkdirSync(build, { recursive: true });
    fs.writeFileSync(path.join(build, 'top.bin'), 'x'.repeat(10));
  });
  afterEach(() => cleanup(root));

  it('counts the manifest, and gives the same figures back without reading it while it is unchanged', async () => {
    fs.writeFileSync(manifest, await manifestOf([100, 200, 300]));
    const cache = new ContentsCache(1024 * 1024);
    const first = await cache.get(staticDir, 'eve/R1');
    assert.equal(first?.artifacts, 3);
    assert.equal(first?.bytes, 600);
    assert.ok(first?.manifest !== undefined);
    // The very object kept: the manifest was opened and fstat'ed, not read or parsed.
    assert.equal(await cache.get(staticDir, 'eve/R1'), first);
  });

  it('reads it again after any change: rewritten in place at the same size, replaced, or only touched', async () => {
    fs.writeFileSync(manifest, await manifestOf([100, 200, 300]));
    const cache = new ContentsCache(1024 * 1024);
    const first = await cache.get(staticDir, 'eve/R1');

    // The same length, other sizes, the same inode: only the times tell.
    const same = await manifestOf([100, 200, 900]);
    assert.equal(Buffer.byteLength(same), fs.statSync(manifest).size);
    const fd = fs.openSync(manifest, 'r+');
    fs.writeSync(fd, same, 0);
    fs.closeSync(fd);
    const inPlace = await cache.get(staticDir, 'eve/R1');
    assert.equal(inPlace?.bytes, 1200);
    assert.notEqual(inPlace?.manifest, first?.manifest);

    // Replaced by rename, as staging writes it.
    fs.writeFileSync(`${manifest}.new`, await manifestOf([1, 2, 3, 4]));
    fs.renameSync(`${manifest}.new`, manifest);
    assert.deepEqual(await cache.get(staticDir, 'eve/R1'), { artifacts: 4, bytes: 10, manifest: (await buildContents(staticDir, 'eve/R1', 1024 * 1024))?.manifest });

    // Touched: read again (a new object), with the same figures.
    const before = await cache.get(staticDir, 'eve/R1');
    const t = new Date(Date.now() + 5_000);
    fs.utimesSync(manifest, t, t);
    const touched = await cache.get(staticDir, 'eve/R1');
    assert.notEqual(touched, before);
    assert.equal(touched?.artifacts, 4);
  });

  it('counts the files at the top where the manifest is missing, damaged, too large, a link or a FIFO', async () => {
    const cache = new ContentsCache(4096);
    const filesOnly = { artifacts: 1, bytes: 10 };
    assert.deepEqual(await cache.get(staticDir, 'eve/R1'), filesOnly, 'no manifest');

    fs.writeFileSync(manifest, (await manifestOf([5, 5])).slice(0, -20));
    assert.deepEqual(await cache.get(staticDir, 'eve/R1'), filesOnly, 'damaged');

    fs.writeFileSync(manifest, await manifestOf(Array.from({ length: 40 }, () => 1)));
    assert.ok(fs.statSync(manifest).size > 4096);
    assert.deepEqual(await cache.get(staticDir, 'eve/R1'), filesOnly, 'larger than the limit');

    // A manifest outside the static directory, linked in: never read.
    const outside = path.join(root, 'outside.json');
    fs.writeFileSync(outside, await manifestOf([7, 7, 7]));
    const canary = fs.readFileSync(outside, 'utf8');
    fs.rmSync(manifest);
    fs.symlinkSync(outside, manifest);
    assert.deepEqual(await cache.get(staticDir, 'eve/R1'), filesOnly, 'a link');
    assert.equal(fs.readFileSync(outside, 'utf8'), canary);

    fs.rmSync(manifest);
    fs.writeFileSync(manifest, await manifestOf([3]));
    const counted = await cache.get(staticDir, 'eve/R1');
    assert.equal(counted?.artifacts, 1);
    assert.equal(counted?.bytes, 3);
    // A FIFO in the place of the manifest it counted: not waited on, and what was kept is dropped.
    fs.rmSync(manifest);
    execFileSync('mkfifo', [manifest]);
    assert.deepEqual(await cache.get(staticDir, 'eve/R1'), filesOnly, 'a FIFO');
  });

  it('keeps the figures of the builds asked for last, no more than its size', async () => {
    for (const tag of ['eve/R1', 'eve/R2', 'eve/R3']) {
      fs.mkdirSync(path.join(staticDir, tag), { recursive: true });
      fs.writeFileSync(path.join(staticDir, tag, MANIFEST_FILE), await manifestOf([1]));
    }
    const cache = new ContentsCache(1024 * 1024, 2);
    const r1 = await cache.get(staticDir, 'eve/R1');
    const r2 = await cache.get(staticDir, 'eve/R2');
    assert.equal(await cache.get(staticDir, 'eve/R1'), r1, 'R1 asked for again: now the latest');
    await cache.get(staticDir, 'eve/R3');
    assert.equal(await cache.get(staticDir, 'eve/R1'), r1, 'kept');
    assert.notEqual(await cache.get(staticDir, 'eve/R2'), r2, 'R2, asked for longest ago, was let go');
  });

  it('is undefined for a build that is not there', async () => {
    assert.equal(await new ContentsCache(1024).get(staticDir, 'eve/R9'), undefined);
  });
});
