/**
 * Errors carry what the user can do next as data (`next`): the core's messages say it in words
 * that name no flag or command of the command-line tool, and the tool words each step with its
 * own flags and commands.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { nextStepText } from '../../../src/cli/nextSteps';
import { readBuildArtifacts } from '../../../src/core/build/browse';
import { nextStepWords, type NextStep, type StagingError } from '../../../src/core/base/errors';
import { makeHolder } from '../../../src/core/base/holder';
import { acquire } from '../../../src/core/lock/lock';
import { MANIFEST_FILE } from '../../../src/core/base/protocol';
import { parseManifest } from '../../../src/core/build/manifest';
import { queueDirOf } from '../../../src/core/lock/lineDirs';
import { limitOf } from '../../../src/core/stage/space';
import { resolveStaticDir } from '../../../src/core/fs/tags';
import { CLI_HINT, cleanup, cli, rejectsWith, tempDir } from '../../helpers';

/** One step of each kind: a new kind fails to compile here until it is worded and tested. */
const EACH: { [K in NextStep['kind']]: Extract<NextStep, { kind: K }> } = {
  wait: { kind: 'wait', staticDir: '/srv/static', tag: 'eve/R1' },
  'join-line': { kind: 'join-line', staticDir: '/srv/static', tag: 'eve/R1' },
  'force-release': { kind: 'force-release', staticDir: '/srv/static', tag: 'eve/R1' },
  add: { kind: 'add', staticDir: '/srv/static', tag: 'eve/R1' },
  'repair-manifest': { kind: 'repair-manifest', file: `/srv/static/eve/R1/${MANIFEST_FILE}` },
  destroy: { kind: 'destroy', tag: 'eve/R1' },
  verify: { kind: 'verify' },
  'free-space': { kind: 'free-space', dir: '/srv/static/eve/R1' },
  'raise-size-limit': { kind: 'raise-size-limit', maxBytes: 1024 },
  'give-static-dir': { kind: 'give-static-dir' },
  'give-duration': { kind: 'give-duration', maxDays: 30 },
  'reserve-again': { kind: 'reserve-again', staticDir: '/srv/static', tag: 'eve/R1' },
  'ask-owner': { kind: 'ask-owner', staticDir: '/srv/static', tag: 'eve/R1' },
};

/** How the command-line tool words each step. */
const CLI_WORDS: Record<NextStep['kind'], RegExp> = {
  wait: /^Wait for it to be released \(--wait\)\.$/,
  'join-line': /^Wait for it too \(--wait\) to take a place in line\.$/,
  'force-release': /^Force-release it if its holder is gone \(devserver-stage force-release eve\/R1\)\.$/,
  add: /^To record its artifacts, stage its sources again with `devserver-stage stage --add eve\/R1 SOURCE\.\.\.` \(files already there are hashed and recorded\)\.$/,
  'repair-manifest': /^To repair it, move it aside \(mv '\/srv\/static\/eve\/R1\/\S+' '\/srv\/static\/eve\/R1\/\S+\.damaged'\) and stage .*`devserver-stage stage --add TAG SOURCE\.\.\.` .*add --overwrite where they differ\)\.$/,
  destroy: /^Remove the area with `devserver-stage destroy eve\/R1` and stage it anew\.$/,
  verify: /^Verify the build with `devserver-stage verify TAG`, which reads the manifest in full\.$/,
  'free-space': /^Free some space \(devserver-stage du, devserver-stage prune\) or stage onto a larger filesystem\.$/,
  'raise-size-limit': /^Raise the size limit \(--max-size\) if the build really is that large\.$/,
  'give-static-dir': /^Pass --static-dir DIR or set DEVSERVER_STATIC_DIR\.$/,
  'give-duration': /^Pass --for with a unit, such as --for 90m, --for 4h or --for 1d \(at most 30d\)\.$/,
  'reserve-again': /^Reserve it anew \(devserver-stage reserve eve\/R1 --for DURATION\)\.$/,
  'ask-owner': /^Ask its owner to release it \(devserver-stage release eve\/R1\), or force-release it \(devserver-stage force-release eve\/R1\)\.$/,
};

describe('next steps', () => {
  let dir: string;
  beforeEach(() => {
    dir = tempDir('dss-next-');
  });
  afterEach(() => cleanup(dir));

  it('the core words each kind of step without a flag or command, the command-line tool with its own', () => {
    for (const step of Object.values(EACH)) {
      const plain = nextStepWords([step]);
      assert.doesNotMatch(plain, CLI_HINT, plain);
      assert.match(plain, /^[A-Z].{10,}\.$/, plain);
      assert.match(nextStepText([step]), CLI_WORDS[step.kind]);
    }
    assert.equal(nextStepText([EACH.wait, EACH['force-release']]), 'Wait for it to be released (--wait), or force-release it if its holder is gone (devserver-stage force-release eve/R1).');
  });

  it('every coded error with a next step: the message names no flag or command, and next says what to do', async () => {
    const errors: StagingError[] = [];
    fs.mkdirSync(path.join(dir, 'eve', 'R1'), { recursive: true });
    fs.mkdirSync(path.join(dir, 'eve', 'R2'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'plain'), '');

    const lease = await acquire(dir, 'eve/R1', { createOnce: false });
    const held = await rejectsWith(acquire(dir, 'eve/R1', { createOnce: false }), 'ELOCKED');
    assert.deepEqual(held.next, [
      { kind: 'wait', staticDir: dir, tag: 'eve/R1' },
      { kind: 'force-release', staticDir: dir, tag: 'eve/R1' },
    ]);
    const nested = await rejectsWith(acquire(dir, 'eve/R1/inner', { createOnce: false }), 'ELOCKED');
    assert.deepEqual(nested.next, [
      { kind: 'wait', staticDir: dir, tag: 'eve/R1/inner' },
      { kind: 'force-release', staticDir: dir, tag: 'eve/R1' },
    ]);
    await lease.release();
    errors.push(held, nested);

    // A ticket of a live process (this one) in line for a free lock.
    const qdir = await queueDirOf(dir, 'eve/R2');
    fs.mkdirSync(qdir, { recursive: true });
    const { acquiredAt, fence: _fence, ...rest } = makeHolder({ staleMs: 10_000, refreshMs: 2_500, acquiredAtMs: Date.now() });
    fs.writeFileSync(path.join(qdir, '0000000001'), JSON.stringify({ ...rest, queuedAt: acquiredAt }));
    const queued = await rejectsWith(acquire(dir, 'eve/R2', { createOnce: false }), 'ELOCKED', 'is free, but 1 is waiting');
    assert.deepEqual(queued.next, [{ kind: 'join-line', staticDir: dir, tag: 'eve/R2' }]);
    fs.rmSync(qdir, { recursive: true });
    errors.push(queued);

    const file = path.join(dir, 'eve', 'R1', MANIFEST_FILE);
    const corrupt = await rejectsWith(parseManifest('{', file), 'ECORRUPT');
    assert.match(corrupt.detail ?? '', /^it is not JSON/);
    assert.deepEqual(corrupt.next, [{ kind: 'repair-manifest', file }, { kind: 'destroy' }]);
    const none = await rejectsWith(readBuildArtifacts(dir, 'eve/R2'), 'ENOMANIFEST');
    assert.deepEqual(none.next, [{ kind: 'add', staticDir: dir, tag: 'eve/R2' }]);
    fs.writeFileSync(file, '{"version":1,"artifacts":{}}');
    const unparsed = await rejectsWith(readBuildArtifacts(dir, 'eve/R1', undefined, { maxParse: 4 }), 'ETOOBIG');
    assert.equal(unparsed.reason, 'manifest-size');
    assert.deepEqual(unparsed.next, [{ kind: 'verify' }]);
    errors.push(corrupt, none, unparsed);

    const bySize = limitOf(1024, undefined).tooBig('x.tar', '/srv/static/eve/R1');
    assert.equal(bySize.reason, 'max-size');
    assert.deepEqual(bySize.next, [{ kind: 'raise-size-limit', maxBytes: 1024 }]);
    const bySpace = limitOf(1 << 30, { freeBytes: 300 << 20, marginBytes: 256 << 20 }).tooBig('x.tar', '/srv/static/eve/R1');
    assert.equal(bySpace.reason, 'free-space');
    assert.deepEqual(bySpace.next, [{ kind: 'free-space', dir: '/srv/static/eve/R1' }]);
    errors.push(bySize, bySpace);

    const unset = await rejectsWith(resolveStaticDir(''), 'EBADSTATICDIR');
    assert.equal(unset.reason, 'no-static-dir');
    assert.deepEqual(unset.next, [{ kind: 'give-static-dir' }]);
    const missing = await rejectsWith(resolveStaticDir(path.join(dir, 'nowhere')), 'EBADSTATICDIR');
    assert.equal(missing.reason, 'missing');
    const notDir = await rejectsWith(resolveStaticDir(path.join(dir, 'plain')), 'EBADSTATICDIR');
    assert.equal(notDir.reason, 'not-a-directory');
    errors.push(unset, missing, notDir);

    assert.equal(errors.length, 11, 'each error was provoked');
    for (const e of errors) {
      assert.doesNotMatch(e.message, CLI_HINT, e.message);
      assert.ok(e.message.startsWith(e.facts) && e.message.endsWith('.'), e.message);
      if (e.next !== undefined) assert.equal(e.message, `${e.facts} ${nextStepWords(e.next)}`);
    }
  });

  it('the command-line tool prints the facts and its own words for the steps, and --json the steps as data', async () => {
    fs.mkdirSync(path.join(dir, 'eve', 'R1'), { recursive: true });
    fs.mkdirSync(path.join(dir, 'eve', 'R2'), { recursive: true });
    const lease = await acquire(dir, 'eve/R1', { createOnce: false });
    try {
      const held = await cli(dir, ['lock', 'eve/R1', '--', 'true']);
      assert.equal(held.code, 3, held.stderr);
      assert.match(held.stderr, /is held: a lock by .*\. Wait for it to be released \(--wait\), or force-release it if its holder is gone \(devserver-stage force-release eve\/R1\)\.\n$/);
      const json = await cli(dir, ['--json', 'lock', 'eve/R1', '--', 'true']);
      const body = (JSON.parse(json.stderr) as { error: { code: string; message: string; next: NextStep[] } }).error;
      assert.equal(body.code, 'ELOCKED');
      assert.match(body.message, /\(--wait\)/);
      assert.deepEqual(body.next, [
        { kind: 'wait', staticDir: dir, tag: 'eve/R1' },
        { kind: 'force-release', staticDir: dir, tag: 'eve/R1' },
      ]);
    } finally {
      await lease.release();
    }
    const noManifest = await cli(dir, ['verify', 'eve/R2']);
    assert.match(noManifest.stderr, /its staging never finished\. To record its artifacts, stage its sources again with `devserver-stage stage --add eve\/R2 SOURCE\.\.\.`/);
    fs.writeFileSync(path.join(dir, 'eve', 'R1', MANIFEST_FILE), '{');
    const damaged = await cli(dir, ['verify', 'eve/R1']);
    assert.match(damaged.stderr, /is damaged: it is not JSON.*\. Nothing was changed\. To repair it, move it aside \(mv '.*' '.*\.damaged'\) .*`devserver-stage stage --add TAG SOURCE\.\.\.`.*, or remove the area with `devserver-stage destroy TAG` and stage it anew\.\n$/);
    const src = path.join(dir, 'big.bin');
    fs.writeFileSync(src, Buffer.alloc(8192, 1));
    const big = await cli(dir, ['stage', '--max-size', '1K', 'eve/R3', src]);
    assert.match(big.stderr, /more than the size limit of 1\.0 KiB into .*; stopped\. Raise the size limit \(--max-size\) if the build really is that large\.\n$/);
    const unset = await cli('', ['list']);
    assert.match(unset.stderr, /^devserver-stage: No static directory given\. Pass --static-dir DIR or set DEVSERVER_STATIC_DIR\.\n$/);
  });
});
