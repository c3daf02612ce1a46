/**
 * The fence: tokens that only grow, handed to whoever needs them, and a commit cut off by the
 * death of its holder undone by the next holder.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { forceRelease } from '../../../src/core/remove';
import { acquire } from '../../../src/core/lock/lock';
import { inspect } from '../../../src/core/lock/inspect';
import { stage } from '../../../src/core/stage/stage';
import { FENCE_FILE, LOCK_NAME } from '../../../src/core/base/protocol';
import { MANIFEST_FILE } from '../../../src/core/stage/types';
import { WORKERS, cleanup, cli, exitOf, killAll, rejectsWith, run, tempDir, track, waitFor } from '../../helpers';
import { spawn, spawnSync } from 'child_process';

describe('fencing', function () {
  this.timeout(60_000);
  let root: string;
  let staticDir: string;

  beforeEach(() => {
    root = tempDir('dss-fence-');
    staticDir = path.join(root, 'static');
    fs.mkdirSync(staticDir);
  });
  afterEach(async () => {
    await killAll();
    cleanup(root);
  });

  it('gives every holder a greater token: in turn, after a force-release, after a holder killed before it wrote its token down', async () => {
    const tokens: number[] = [];
    for (let i = 0; i < 5; i++) {
      const lease = await acquire(staticDir, 'b/R1', { createOnce: false });
      tokens.push(lease.fence);
      await lease.release();
    }
    // A live holder in another process, force-released.
    const holder = track(spawn(process.execPath, [path.join(WORKERS, 'holder.js'), JSON.stringify({ staticDir, tag: 'b/R1', createOnce: false })], { stdio: ['ignore', 'pipe', 'pipe', 'ipc'] }));
    await waitFor(async () => ((await inspect(staticDir, 'b/R1')).state === 'held' ? true : undefined), 10_000, 'the holder to take the lock');
    const victim = (await forceRelease(staticDir, 'b/R1')).holder!.fence!;
    tokens.push(victim);
    holder.kill('SIGKILL');
    await exitOf(holder);
    // A holder killed as if before it wrote its token down (the counter put back behind it): its
    // record's token still counts for whoever takes over.
    const killed = track(spawn(process.execPath, [path.join(WORKERS, 'holder.js'), JSON.stringify({ staticDir, tag: 'b/R1', createOnce: false })], { stdio: ['ignore', 'pipe', 'pipe', 'ipc'] }));
    await waitFor(async () => ((await inspect(staticDir, 'b/R1')).state === 'held' ? true : undefined), 10_000, 'the second holder');
    const killedToken = (await inspect(staticDir, 'b/R1')).holder!.fence!;
    tokens.push(killedToken);
    killed.kill('SIGKILL');
    await exitOf(killed);
    // The counter set back by a co-user: the dead holder's lock, taken over, still counts.
    const counter = path.join(staticDir, 'b', 'R1', FENCE_FILE);
    fs.rmSync(counter, { recursive: true });
    fs.mkdirSync(counter);
    fs.writeFileSync(path.join(counter, '1'), '');
    const next = await acquire(staticDir, 'b/R1', { createOnce: false });
    tokens.push(next.fence);
    await next.release();
    for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `tokens must grow: ${tokens.join(', ')}`);
  });

  it('a holder killed between taking the counter and publishing its token: whoever removes its lock puts the counter back, at its proposed token', async () => {
    for (let i = 0; i < 3; i++) await (await acquire(staticDir, 'b/R1', { createOnce: false })).release();
    const counter = path.join(staticDir, 'b', 'R1', FENCE_FILE);
    assert.deepEqual(fs.readdirSync(counter), ['3']);
    // Stopped by itself right after it took the counter into its work directory, then killed there.
    const killed = track(
      spawn(process.execPath, [path.join(WORKERS, 'holder.js'), JSON.stringify({ staticDir, tag: 'b/R1', createOnce: false })], {
        stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
        env: { ...process.env, DEVSERVER_STAGING_PAUSE_AT: 'settle.consumed' },
      }),
    );
    await waitFor(() => (fs.existsSync(counter) && fs.readdirSync(counter).length === 0 ? true : undefined), 10_000, 'the holder to take the counter');
    killed.kill('SIGKILL');
    await exitOf(killed);
    const work = fs.readdirSync(path.join(staticDir, 'b', 'R1', LOCK_NAME)).find((n) => n.startsWith('work.'))!;
    assert.deepEqual(fs.readdirSync(path.join(staticDir, 'b', 'R1', LOCK_NAME, work)), ['fence.3'], 'the counter is in its work directory');
    // Removed by a force-release (no holder comes after it): the counter is back, raised to the
    // token the dead holder proposed (never handed out again, though it never published it).
    await forceRelease(staticDir, 'b/R1');
    assert.deepEqual(fs.readdirSync(counter), ['4'], 'the counter holds a number again');
    assert.deepEqual(fs.readdirSync(path.join(staticDir, 'b', 'R1')).filter((n) => n.startsWith(LOCK_NAME)), [], 'nothing of the lock is left');
    const next = await acquire(staticDir, 'b/R1', { createOnce: false });
    assert.equal(next.fence, 5);
    await next.release();
  });

  it('keeps the counter as the name of the one entry of a directory, takes over the link or file of earlier builds, and never follows or waits on what is planted', async () => {
    const area = path.join(staticDir, 'b', 'R4');
    fs.mkdirSync(area, { recursive: true });
    const counter = path.join(area, FENCE_FILE);
    // The forms earlier builds wrote: a file, and a link whose text is the number.
    fs.writeFileSync(counter, '41\n');
    const first = await acquire(staticDir, 'b/R4', { createOnce: false });
    assert.equal(first.fence, 42);
    assert.deepEqual(fs.readdirSync(counter), ['42'], 'kept as the name of an entry');
    const { token } = JSON.parse(fs.readFileSync(path.join(area, LOCK_NAME, 'owner.json'), 'utf8')) as { token: string };
    assert.deepEqual(fs.readdirSync(path.join(area, LOCK_NAME)).sort(), ['owner.json', `work.${token}`], 'the record and the work directory, nothing of the token');
    await first.release();
    const second = await acquire(staticDir, 'b/R4', { createOnce: false });
    assert.equal(second.fence, 43);
    await second.release();
    assert.deepEqual(fs.readdirSync(counter), ['43']);
    fs.rmSync(counter, { recursive: true });
    fs.symlinkSync('99', counter);
    const linked = await acquire(staticDir, 'b/R4', { createOnce: false });
    assert.equal(linked.fence, 100);
    await linked.release();

    // Lower numbers planted beside it change nothing; so does anything that is not a number.
    for (const n of ['5', '0007', 'x', '-3']) fs.writeFileSync(path.join(counter, n), '');
    const beside = await acquire(staticDir, 'b/R4', { createOnce: false });
    assert.equal(beside.fence, 101);
    await beside.release();
    assert.deepEqual(fs.readdirSync(counter).sort(), ['-3', '0007', '101', 'x'], 'the lower number cleared, the rest left alone');

    // A link in its place that is no number (one to a file outside that holds a number): never
    // followed, the count goes on above what the area records (here, nothing: the staged token).
    const outside = path.join(root, 'outside-counter');
    fs.writeFileSync(outside, '7\n');
    fs.writeFileSync(path.join(area, 'staged.timestamp'), '200\n');
    fs.rmSync(counter, { recursive: true });
    fs.symlinkSync(outside, counter);
    const afterLink = await acquire(staticDir, 'b/R4', { createOnce: false });
    assert.equal(afterLink.fence, 201, 'above the token of the last staging');
    await afterLink.release();
    assert.equal(fs.readFileSync(outside, 'utf8'), '7\n', 'the file outside is untouched');
    assert.deepEqual(fs.readdirSync(counter), ['201']);
    // A FIFO in its place: refused at once, naming what it is, and left as it was.
    fs.rmSync(counter, { recursive: true, force: true });
    assert.equal(spawnSync('mkfifo', [counter]).status, 0);
    const t0 = Date.now();
    const err = await rejectsWith(acquire(staticDir, 'b/R4', { createOnce: false }), 'EIO', FENCE_FILE);
    assert.match(err.message, /neither a directory nor a number/);
    assert.match(err.message, /rm -r/, 'says how to get out');
    assert.ok(Date.now() - t0 < 5_000, 'refused at once');
    assert.ok(fs.lstatSync(counter).isFIFO());
    fs.rmSync(counter);
    // At the top of the range: a clear error and the way out, never a token handed out twice.
    fs.mkdirSync(counter);
    fs.writeFileSync(path.join(counter, String(Number.MAX_SAFE_INTEGER - 1)), '');
    const top = await rejectsWith(acquire(staticDir, 'b/R4', { createOnce: false }), 'EIO', FENCE_FILE);
    assert.match(top.message, /greatest token/);
    assert.deepEqual(fs.readdirSync(counter), [String(Number.MAX_SAFE_INTEGER - 1)], 'the counter is left as it was');
    const names = fs.readdirSync(area).sort();
    assert.deepEqual(names, [FENCE_FILE, 'staged.timestamp'], 'no lock is left behind');
  });

  it('shows the token in status --json, hands it to lock -- COMMAND, and records it in the manifest', async () => {
    const src = path.join(root, 'src');
    fs.mkdirSync(src);
    fs.writeFileSync(path.join(src, 'a.bin'), 'a');
    const staged = await stage(staticDir, 'b/R2', [src]);
    const manifest = JSON.parse(fs.readFileSync(path.join(staged.dir, MANIFEST_FILE), 'utf8')) as { artifacts: Record<string, { fence?: number }> };
    assert.equal(typeof manifest.artifacts['a.bin'].fence, 'number');
    const before = manifest.artifacts['a.bin'].fence!;
    const printed = await cli(staticDir, ['lock', 'b/R2', '--', 'sh', '-c', 'echo "$DEVSERVER_STAGING_FENCE"']);
    assert.equal(printed.code, 0, printed.stderr);
    assert.ok(Number(printed.stdout.trim()) > before, `lock -- COMMAND saw ${printed.stdout.trim()}, after ${before}`);
    const lease = await acquire(staticDir, 'b/R2', { createOnce: false });
    try {
      const status = await cli(staticDir, ['--json', 'status', 'b/R2']);
      const info = JSON.parse(status.stdout) as { holder: { fence: number } };
      assert.equal(info.holder.fence, lease.fence);
      assert.ok(lease.fence > Number(printed.stdout.trim()));
    } finally {
      await lease.release();
    }
  });

  it('undoes a commit whose holder died half-way, before the next holder does anything', async () => {
    const area = path.join(staticDir, 'b', 'R3');
    fs.mkdirSync(area, { recursive: true });
    fs.writeFileSync(path.join(area, 'keep.txt'), 'original\n');
    const died = await run(process.execPath, [path.join(WORKERS, 'dies-mid-commit.js'), staticDir, 'b/R3']);
    assert.equal(died.signal, 'SIGKILL', died.stderr);
    // Half-done on disk: the new artifact placed, the original set aside into the dead lock.
    assert.ok(fs.existsSync(path.join(area, 'new.txt')));
    assert.ok(!fs.existsSync(path.join(area, 'keep.txt')));
    const next = await acquire(staticDir, 'b/R3', { createOnce: false });
    try {
      assert.equal(fs.existsSync(path.join(area, 'new.txt')), false, 'the placed artifact is taken back');
      assert.equal(fs.readFileSync(path.join(area, 'keep.txt'), 'utf8'), 'original\n', 'what was set aside comes back');
      const left = fs.readdirSync(area).filter((n) => n !== LOCK_NAME && n !== FENCE_FILE);
      assert.deepEqual(left, ['keep.txt'], 'nothing of the dead holder is left');
    } finally {
      await next.release();
    }
  });
});
