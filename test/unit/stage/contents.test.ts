/**
 * A build's figures for a tooltip (core/contents.ts): from the manifest, kept while the manifest is
 * unchanged and read again as soon as it changes in any way, and from the files at the build's top
 * when there is no manifest to count.
 */
import { strict as assert } from 'assert';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { ContentsCache, buildContents, type ManifestEntry } from '../../../src/core';
import { judgeManifest, manifestText, noArtifacts } from '../../../src/core/build/manifest';
import { MANIFEST_FILE } from '../../../src/core/base/protocol';
import { cleanup, sleep, tempDir } from '../../helpers';

async function manifestOf(sizes: readonly number[]): Promise<string> {
  const artifacts = noArtifacts();
  sizes.forEach((size, i) => {
    const name = `dir/f-${i}.bin`;
    artifacts[name] = { name, type: 'file', size, sha256: '0'.repeat(64), source: `/out/${name}`, stagedAt: '2026-01-01T00:00:00.000Z' } satisfies ManifestEntry;
  });
  return manifestText({ version: 1, artifacts });
}

/** The two figures alone, without the identities kept with them. */
const figures = (c: { artifacts: number; bytes: number } | undefined): { artifacts: number; bytes: number } | undefined =>
  c === undefined ? undefined : { artifacts: c.artifacts, bytes: c.bytes };

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
    const cache = new ContentsCache(1024 * 1024, { settlingMs: 0 });
    const first = await cache.get(staticDir, 'eve/R1');
    assert.equal(first?.artifacts, 3);
    assert.equal(first?.bytes, 600);
    assert.ok(first?.manifest !== undefined);
    // The very object kept: the manifest was opened and fstat'ed, not read or parsed.
    assert.equal(await cache.get(staticDir, 'eve/R1'), first);
  });

  it('reads it again after any change: rewritten in place at the same size, replaced, or only touched', async () => {
    fs.writeFileSync(manifest, await manifestOf([100, 200, 300]));
    const cache = new ContentsCache(1024 * 1024, { settlingMs: 0 });
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
    assert.deepEqual(await cache.get(staticDir, 'eve/R1'), { artifacts: 4, bytes: 10, manifest: (await buildContents(staticDir, 'eve/R1', 1024 * 1024, undefined, 0))?.manifest });

    // Touched: read again (a new object), with the same figures.
    const before = await cache.get(staticDir, 'eve/R1');
    const t = new Date(Date.now() + 5_000);
    fs.utimesSync(manifest, t, t);
    const touched = await cache.get(staticDir, 'eve/R1');
    assert.notEqual(touched, before);
    assert.equal(touched?.artifacts, 4);
  });

  it('keeps the figures of a manifest changed within the current millisecond when nothing need settle', async () => {
    // A change time has a fraction of a millisecond and Date.now() has none: compared as they
    // are, a manifest read in the millisecond it was renamed into place looked changed in the future.
    const text = await manifestOf([1, 2, 3, 4]);
    let unkept = 0;
    for (let i = 0; i < 200; i++) {
      fs.writeFileSync(`${manifest}.new`, text);
      fs.renameSync(`${manifest}.new`, manifest);
      if ((await buildContents(staticDir, 'eve/R1', 1024 * 1024, undefined, 0))?.manifest === undefined) unkept++;
    }
    assert.equal(unkept, 0, `${unkept} of 200 reads right after the rename were not kept`);
  });

  it('counts the files at the top where the manifest is missing, damaged, too large, a link or a FIFO', async () => {
    const cache = new ContentsCache(4096, { settlingMs: 0 });
    const filesOnly = { artifacts: 1, bytes: 10 };
    assert.deepEqual(figures(await cache.get(staticDir, 'eve/R1')), filesOnly, 'no manifest');

    fs.writeFileSync(manifest, (await manifestOf([5, 5])).slice(0, -20));
    assert.deepEqual(figures(await cache.get(staticDir, 'eve/R1')), filesOnly, 'damaged');

    fs.writeFileSync(manifest, await manifestOf(Array.from({ length: 40 }, () => 1)));
    assert.ok(fs.statSync(manifest).size > 4096);
    assert.deepEqual(figures(await cache.get(staticDir, 'eve/R1')), filesOnly, 'larger than the limit');

    // A manifest outside the static directory, linked in: never read.
    const outside = path.join(root, 'outside.json');
    fs.writeFileSync(outside, await manifestOf([7, 7, 7]));
    const canary = fs.readFileSync(outside, 'utf8');
    fs.rmSync(manifest);
    fs.symlinkSync(outside, manifest);
    assert.deepEqual(figures(await cache.get(staticDir, 'eve/R1')), filesOnly, 'a link');
    assert.equal(fs.readFileSync(outside, 'utf8'), canary);

    fs.rmSync(manifest);
    fs.writeFileSync(manifest, await manifestOf([3]));
    const counted = await cache.get(staticDir, 'eve/R1');
    assert.equal(counted?.artifacts, 1);
    assert.equal(counted?.bytes, 3);
    // A FIFO in the place of the manifest it counted: not waited on, and what was kept is dropped.
    fs.rmSync(manifest);
    execFileSync('mkfifo', [manifest]);
    assert.deepEqual(figures(await cache.get(staticDir, 'eve/R1')), filesOnly, 'a FIFO');
  });

  it('keeps the figures of the builds asked for last, no more than its size', async () => {
    for (const tag of ['eve/R1', 'eve/R2', 'eve/R3']) {
      fs.mkdirSync(path.join(staticDir, tag), { recursive: true });
      fs.writeFileSync(path.join(staticDir, tag, MANIFEST_FILE), await manifestOf([1]));
    }
    const cache = new ContentsCache(1024 * 1024, { size: 2, settlingMs: 0 });
    const r1 = await cache.get(staticDir, 'eve/R1');
    const r2 = await cache.get(staticDir, 'eve/R2');
    assert.equal(await cache.get(staticDir, 'eve/R1'), r1, 'R1 asked for again: now the latest');
    await cache.get(staticDir, 'eve/R3');
    assert.equal(await cache.get(staticDir, 'eve/R1'), r1, 'kept');
    assert.notEqual(await cache.get(staticDir, 'eve/R2'), r2, 'R2, asked for longest ago, was let go');
  });

  it('does not keep what it read of a manifest changed moments ago: a write in place may have been under way', async () => {
    fs.writeFileSync(manifest, await manifestOf([100, 200]));
    const cache = new ContentsCache(1024 * 1024, { settlingMs: 500 });
    const first = await cache.get(staticDir, 'eve/R1');
    assert.equal(first?.artifacts, 2);
    assert.equal(first?.manifest, undefined, 'changed just now: counted, not kept');
    const again = await cache.get(staticDir, 'eve/R1');
    assert.notEqual(again, first, 'read again');
    await sleep(600);
    const settled = await cache.get(staticDir, 'eve/R1');
    assert.ok(settled?.manifest !== undefined);
    assert.equal(await cache.get(staticDir, 'eve/R1'), settled, 'kept once settled');
  });

  it('never parses more than 1 MiB at once: a manifest crafted to be parsed whole, or with one huge entry, counts as none', async () => {
    const entry = { name: 'a.bin', type: 'file', size: 777, sha256: '0'.repeat(64), source: '/out/a.bin', stagedAt: '2026-01-01T00:00:00.000Z' };
    const filesOnly = { artifacts: 1, bytes: 10 };
    // Sound as JSON and as a manifest (one artifact), but not in the writer's layout: 2 MiB to parse whole.
    const crafted = `{"version":1,"artifacts":{"a.bin":${JSON.stringify(entry)}},"x":[${'{},'.repeat(700_000)}{}]}`;
    const judged = await judgeManifest(crafted, 'm.json');
    assert.ok('entries' in judged && judged.entries.length === 1, 'whole, it is a manifest of one artifact');
    const refused = await judgeManifest(crafted, 'm.json', { maxParse: 1024 * 1024 });
    assert.ok('damaged' in refused && refused.damaged.code === 'ETOOBIG', 'with the limit it is not parsed');
    fs.writeFileSync(manifest, crafted);
    const cache = new ContentsCache(64 * 1024 * 1024, { settlingMs: 0 });
    const first = await cache.get(staticDir, 'eve/R1');
    assert.deepEqual(figures(first), filesOnly);
    assert.ok(first?.unfit !== undefined, 'the verdict is kept with the identity, so a hover does not read it again');
    assert.equal((await cache.get(staticDir, 'eve/R1'))?.unfit, first.unfit);

    // In the writer's layout, but one entry of 2 MiB: the slicer will not parse that piece in one go.
    const huge = await manifestText({ version: 1, artifacts: { 'a.bin': { ...entry, source: `/out/${'x'.repeat(2 * 1024 * 1024)}` } as ManifestEntry } });
    assert.ok('entries' in (await judgeManifest(huge, 'm.json')), 'whole, it is sound');
    fs.writeFileSync(`${manifest}.new`, huge);
    fs.renameSync(`${manifest}.new`, manifest);
    const second = await cache.get(staticDir, 'eve/R1');
    assert.deepEqual(figures(second), filesOnly);
  });

  it('gives calls for a build made while one is under way the answer of that one', async () => {
    fs.writeFileSync(manifest, await manifestOf(Array.from({ length: 2_000 }, () => 1)));
    const cache = new ContentsCache(64 * 1024 * 1024, { settlingMs: 0 });
    const all = await Promise.all(Array.from({ length: 8 }, () => cache.get(staticDir, 'eve/R1')));
    assert.equal(all[0]?.artifacts, 2_000);
    for (const c of all) assert.equal(c, all[0]);
  });

  it('is undefined for a build that is not there', async () => {
    assert.equal(await new ContentsCache(1024).get(staticDir, 'eve/R9'), undefined);
  });
});
