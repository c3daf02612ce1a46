/**
 * A damaged manifest: every reader says which file and entry, and how to repair it; none crashes,
 * and staging changes nothing in such an area.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import type { StagingError } from '../../../src/core/base/errors';
import { parseManifest } from '../../../src/core/build/manifest';
import { stage } from '../../../src/core/stage/stage';
import { MANIFEST_FILE, type Manifest } from '../../../src/core/stage/types';
import { usage } from '../../../src/core/usage';
import { CLI, cleanup, rejectsWith, run, snapshot, tempDir } from '../../helpers';

const SHA = 'a'.repeat(64);
const good = { name: 'a.bin', type: 'file', size: 3, sha256: SHA, source: '/src/a.bin', stagedAt: '2026-01-01T00:00:00.000Z' };

/** Manifests that must be refused, with what the message must say about them. */
const DAMAGED: [string, string, RegExp][] = [
  ['not JSON', '{"version": 1, "artifacts": {', /not JSON/],
  ['empty', '', /not JSON/],
  ['an array', '[]', /not a JSON object/],
  ['another version', JSON.stringify({ version: 2, artifacts: {} }), /version is 2/],
  ['no artifacts', JSON.stringify({ version: 1 }), /"artifacts" is not an object/],
  ['a null entry', JSON.stringify({ version: 1, artifacts: { 'a.bin': good, zz: null } }), /artifact "zz" is null/],
  ['a string entry', JSON.stringify({ version: 1, artifacts: { 'a.bin': 'a.bin' } }), /artifact "a.bin" is string/],
  ['a name not its key', JSON.stringify({ version: 1, artifacts: { 'b.bin': good } }), /artifact "b.bin" has the name "a.bin"/],
  ['a name that climbs out', JSON.stringify({ version: 1, artifacts: { '../x': { ...good, name: '../x' } } }), /artifact "\.\.\/x" is not a relative path/],
  ['an absolute name', JSON.stringify({ version: 1, artifacts: { '/etc/passwd': { ...good, name: '/etc/passwd' } } }), /is not a relative path/],
  ['an unknown type', JSON.stringify({ version: 1, artifacts: { 'a.bin': { ...good, type: 'dir' } } }), /has the type "dir"/],
  ['a negative size', JSON.stringify({ version: 1, artifacts: { 'a.bin': { ...good, size: -1 } } }), /has the size -1/],
  ['a size as text', JSON.stringify({ version: 1, artifacts: { 'a.bin': { ...good, size: '3' } } }), /has the size "3"/],
  ['a short hash', JSON.stringify({ version: 1, artifacts: { 'a.bin': { ...good, sha256: 'abc' } } }), /has the sha256 "abc"/],
  ['no source', JSON.stringify({ version: 1, artifacts: { 'a.bin': { ...good, source: undefined } } }), /has no source/],
  ['no stagedAt', JSON.stringify({ version: 1, artifacts: { 'a.bin': { ...good, stagedAt: 5 } } }), /has no stagedAt/],
  ['a link without target', JSON.stringify({ version: 1, artifacts: { 'a.bin': { ...good, type: 'symlink' } } }), /symlink without a linkTarget/],
];

describe('a damaged manifest', () => {
  let root: string;
  let staticDir: string;

  beforeEach(() => {
    root = tempDir('dss-manifest-');
    staticDir = path.join(root, 'static');
    fs.mkdirSync(staticDir);
    fs.writeFileSync(path.join(root, 'a.bin'), 'abc');
    fs.writeFileSync(path.join(root, 'b.bin'), 'bcd');
  });
  afterEach(() => cleanup(root));

  it('is refused with ECORRUPT naming the file, the entry and the repair; a sound one is read as written', async () => {
    const file = '/srv/static/eve/R1/.devserver-staging.manifest.json';
    for (const [what, text, says] of DAMAGED) {
      await assert.rejects(
        parseManifest(text, file),
        (err: Error & { code?: string; path?: string }) => {
          assert.equal(err.code, 'ECORRUPT', what);
          assert.equal(err.path, file, what);
          assert.match(err.message, says, what);
          assert.ok(err.message.includes(file), `${what}: names the file`);
          assert.match(err.message, /move it aside and stage the build's sources again[\s\S]*, or destroy the build and stage it anew\.$/, `${what}: says how to repair`);
          assert.deepEqual((err as StagingError).next, [{ kind: 'repair-manifest', file }, { kind: 'destroy' }], what);
          return true;
        },
        what,
      );
    }
    const link = { name: 'l', type: 'symlink', size: 5, sha256: SHA, source: 's', stagedAt: 't', linkTarget: 'a.bin' };
    const sound: Manifest = { version: 1, artifacts: { 'a.bin': good as Manifest['artifacts'][string], 'sub/l': { ...link, name: 'sub/l' } as Manifest['artifacts'][string] } };
    const parsed = await parseManifest(JSON.stringify(sound), file);
    // Artifacts come in an object without a prototype (an artifact may be named __proto__).
    assert.equal(Object.getPrototypeOf(parsed.artifacts), null);
    assert.deepEqual({ ...parsed, artifacts: { ...parsed.artifacts } }, sound);
  });

  it('stage --add fails with ECORRUPT before changing anything; du shows the area as damaged; the repair it names works', async () => {
    await stage(staticDir, 'eve/R1', [path.join(root, 'a.bin')]);
    const dir = path.join(staticDir, 'eve/R1');
    const manifestPath = path.join(dir, MANIFEST_FILE);
    const manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8')) as { artifacts: Record<string, unknown> };
    manifest.artifacts.zz = null;
    fs.writeFileSync(manifestPath, JSON.stringify(manifest));
    const before = snapshot(dir);

    await rejectsWith(stage(staticDir, 'eve/R1', [path.join(root, 'b.bin')], { add: true }), 'ECORRUPT', manifestPath);
    const env = { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir } };
    const cliRun = await run(process.execPath, [CLI, '--json', 'stage', '--add', 'eve/R1', path.join(root, 'b.bin')], env);
    assert.equal(cliRun.code, 1, cliRun.stderr);
    const body = JSON.parse(cliRun.stderr.trimEnd().split('\n').pop()!) as { error: { code: string; message: string; path: string } };
    assert.equal(body.error.code, 'ECORRUPT');
    assert.equal(body.error.path, manifestPath);
    assert.match(body.error.message, /artifact "zz" is null/);
    assert.match(body.error.message, /\(mv '.*'\) and stage the build's sources again with `devserver-stage stage --add TAG SOURCE\.\.\.`[\s\S]*`devserver-stage destroy TAG`/, 'the tool words the repair with its commands');
    assert.deepEqual(snapshot(dir), before, 'the area is as it was');

    const [area] = await usage(staticDir);
    assert.match(area.damaged ?? '', /artifact "zz" is null/);
    assert.equal(area.artifacts, 2, 'the names it lists are still counted');
    const du = await run(process.execPath, [CLI, 'du'], env);
    assert.equal(du.code, 0, du.stderr);
    assert.match(du.stdout, /eve\/R1 .*free \(manifest damaged\)/);
    assert.match(du.stdout, /1 area has a damaged manifest\. The manifest .* is damaged/);
    // Not JSON at all: du counts the files instead.
    fs.writeFileSync(manifestPath, '{"version": 1, "artifacts": {"a.bin": {');
    const [unparsed] = await usage(staticDir);
    assert.match(unparsed.damaged ?? '', /not JSON/);
    assert.equal(unparsed.artifacts, 1);

    // The repair the message names: move it aside and stage the sources again.
    fs.renameSync(manifestPath, `${manifestPath}.damaged`);
    const repaired = await stage(staticDir, 'eve/R1', [path.join(root, 'a.bin'), path.join(root, 'b.bin')], { add: true });
    assert.deepEqual(repaired.skipped.map((e) => e.name), ['a.bin']);
    assert.deepEqual(repaired.added.map((e) => e.name), ['b.bin']);
    assert.deepEqual(Object.keys((await parseManifest(fs.readFileSync(manifestPath, 'utf8'), manifestPath)).artifacts), ['a.bin', 'b.bin']);
    assert.equal((await usage(staticDir))[0].damaged, undefined);
  });
});
