/**
 * The built command-line tool, run as scripts run it: real processes on a real static directory.
 */
import { strict as assert } from 'assert';
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { acquire } from '../../../src/core/lock/lock';
import { inspect } from '../../../src/core/lock/inspect';
import { CLI, catchesSignal, cleanup, cli, run, tempDir, waitFor } from '../../helpers';

describe('devserver-stage', () => {
  let root: string;
  let staticDir: string;

  beforeEach(() => {
    root = tempDir('dss-cli-');
    staticDir = path.join(root, 'static');
    fs.mkdirSync(staticDir);
  });
  afterEach(() => cleanup(root));

  it('prints help for the tool and for each command, exit 0', async () => {
    const top = await cli(staticDir, ['--help']);
    assert.equal(top.code, 0);
    for (const c of ['list', 'status', 'lock', 'force-release', 'destroy']) assert.match(top.stdout, new RegExp(`\\b${c}\\b`));
    assert.match(top.stdout, /Exit codes/);
    for (const c of ['list', 'status', 'lock', 'force-release', 'destroy']) {
      const r = await cli(staticDir, [c, '--help']);
      assert.equal(r.code, 0, `${c} --help`);
      assert.match(r.stdout, new RegExp(`Usage: devserver-stage ${c}`));
    }
  });

  it('exit 2 on usage errors, a bad tag, or a missing static directory', async () => {
    assert.equal((await cli(staticDir, ['frobnicate'])).code, 2);
    assert.equal((await cli(staticDir, ['status'])).code, 2);
    const bad = await cli(staticDir, ['status', '../etc']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /Invalid tag "\.\.\/etc"/);
    const none = await run(process.execPath, [CLI, 'list'], { env: { ...process.env, DEVSERVER_STATIC_DIR: '' } });
    assert.equal(none.code, 2);
    assert.match(none.stderr, /--static-dir/);
    const missing = await cli(path.join(root, 'nope'), ['list']);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /does not exist/);
  });

  it('lock runs the command under the lock and exits with its exit code', async () => {
    const r = await cli(staticDir, ['lock', 'eve/R1', '--purpose', 'staging test', '--', 'sh', '-c', `"${process.execPath}" "${CLI}" --json status eve/R1; exit 7`]);
    assert.equal(r.code, 7, r.stderr);
    const seen = JSON.parse(r.stdout) as { state: string; holder: { purpose: string } };
    assert.equal(seen.state, 'held');
    assert.equal(seen.holder.purpose, 'staging test');
    assert.equal((await inspect(staticDir, 'eve/R1')).state, 'free', 'released after the command');
  });

  it('lock exits 3 naming the holder when another holds the lock; --wait waits for it', async () => {
    const lease = await acquire(staticDir, 'busy', { purpose: 'held by test' });
    const r = await cli(staticDir, ['lock', 'busy', '--', 'true']);
    assert.equal(r.code, 3);
    assert.match(r.stderr, new RegExp(`pid ${process.pid}`));
    assert.match(r.stderr, /held by test/);
    setTimeout(() => void lease.release(), 300);
    const waited = await cli(staticDir, ['lock', '--wait', '10', 'busy', '--', 'true']);
    assert.equal(waited.code, 0, waited.stderr);
  });

  it('lock --create-once refuses an existing area; --destroy-on-failure removes an area it created', async () => {
    fs.mkdirSync(path.join(staticDir, 'exists'));
    const r = await cli(staticDir, ['lock', '--create-once', 'exists', '--', 'true']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /already exists/);
    const failed = await cli(staticDir, ['lock', '--create-once', '--destroy-on-failure', 'fresh', '--', 'sh', '-c', 'touch "$DEVSERVER_STAGING_DIR/partial"; exit 5']);
    assert.equal(failed.code, 5);
    assert.equal(fs.existsSync(path.join(staticDir, 'fresh')), false);
    const kept = await cli(staticDir, ['lock', '--destroy-on-failure', 'exists', '--', 'false']);
    assert.equal(kept.code, 1);
    assert.ok(fs.existsSync(path.join(staticDir, 'exists')), 'an area this run did not create is kept');
  });

  it('lock stops the command and says so when the lock is lost', async () => {
    const marker = path.join(root, 'started');
    const child = spawn(process.execPath, [CLI, '--refresh', '1', '--stale', '4', 'lock', 'victim', '--', 'sh', '-c', `touch "${marker}"; exec sleep 60`], {
      env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    await waitFor(() => (fs.existsSync(marker) ? true : undefined), 10_000, 'the locked command to start');
    const fr = await cli(staticDir, ['force-release', 'victim']);
    assert.equal(fr.code, 0, fr.stderr);
    const code = await exited;
    assert.equal(code, 1);
    assert.match(stderr, /Lost the lock on .*victim/);
    assert.match(stderr, /force-released by .* Stopped sh \(pid \d+\)\./);
  });

  it('lock forwards SIGTERM to the command and releases the lock', async () => {
    const marker = path.join(root, 'started');
    const child = spawn(process.execPath, [CLI, 'lock', 'sig', '--', 'sh', '-c', `touch "${marker}"; exec sleep 60`], {
      env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir },
      stdio: 'ignore',
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    await waitFor(() => (fs.existsSync(marker) ? true : undefined), 10_000, 'the locked command to start');
    child.kill('SIGTERM');
    assert.equal(await exited, 128 + 15);
    assert.equal((await inspect(staticDir, 'sig')).state, 'free');
  });

  it('Ctrl-C reaches the command exactly once: the tool passes it on to the process group the command leads', async () => {
    const count = path.join(root, 'sigints');
    const started = path.join(root, 'started');
    const counter = `const fs = require('fs'); let n = 0; process.on('SIGINT', () => n++);
      fs.writeFileSync(${JSON.stringify(started)}, '');
      setTimeout(() => { fs.writeFileSync(${JSON.stringify(count)}, String(n)); process.exit(0); }, 1500);`;
    // detached: the tool leads its own process group, as a shell's foreground job does.
    const child = spawn(process.execPath, [CLI, 'lock', 'ctrl-c', '--', process.execPath, '-e', counter], {
      env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir },
      stdio: 'ignore',
      detached: true,
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    await waitFor(() => (fs.existsSync(started) ? true : undefined), 10_000, 'the locked command to start');
    process.kill(-child.pid!, 'SIGINT'); // what the terminal does on Ctrl-C
    assert.equal(await exited, 0, 'the tool waits for the command and exits with its code');
    assert.equal(fs.readFileSync(count, 'utf8'), '1');
    assert.equal((await inspect(staticDir, 'ctrl-c')).state, 'free');
  });

  it('Ctrl-C while waiting for the lock stops the wait with exit 130 and takes nothing', async () => {
    const lease = await acquire(staticDir, 'waited');
    const child = spawn(process.execPath, [CLI, 'lock', '--wait', '60', 'waited', '--', 'true'], {
      env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    // The tool listens for SIGINT, SIGTERM and SIGHUP together while it waits: the kernel says when.
    await waitFor(() => (catchesSignal(child.pid!, 'SIGHUP') ? true : undefined), 30_000, 'the tool to wait for the lock');
    child.kill('SIGINT');
    assert.equal(await exited, 130);
    assert.match(stderr, /Stopped waiting for the lock/);
    assert.equal((await inspect(staticDir, 'waited')).holder?.token, lease.holder.token);
    await lease.release();
  });

  it('list and status show states and holders, as text and JSON', async () => {
    fs.mkdirSync(path.join(staticDir, 'eve', 'R10'), { recursive: true });
    fs.mkdirSync(path.join(staticDir, 'eve', 'R9'), { recursive: true });
    const lease = await acquire(staticDir, 'eve/R11', { purpose: 'nightly' });
    const text = await cli(staticDir, ['list', 'eve']);
    assert.equal(text.code, 0);
    assert.match(text.stdout, /^STATE\s+TAG\s+HOLDER/);
    assert.match(text.stdout, /held\s+eve\/R11\s+\S+@\S+:\d+\s+\d+ s\s+nightly/);
    // Bare directories, neither staged nor locked, are folders.
    assert.match(text.stdout, /folder\s+eve\/R9/);
    // At the top, the board is a folder: it has no lock, free or otherwise.
    assert.match((await cli(staticDir, ['list'])).stdout, /^folder\s+eve\s*$/m);
    const json = JSON.parse((await cli(staticDir, ['--json', 'list', 'eve'])).stdout) as { tag: string; state: string }[];
    assert.deepEqual(
      json.map((e) => [e.tag, e.state]),
      [
        ['eve/R9', 'free'],
        ['eve/R10', 'free'],
        ['eve/R11', 'held'],
      ],
    );
    const status = await cli(staticDir, ['status', 'eve/R11']);
    assert.match(status.stdout, /eve\/R11: held/);
    assert.match(status.stdout, /process:\s+running/);
    await lease.release();
    assert.match((await cli(staticDir, ['status', 'eve/R11'])).stdout, /eve\/R11: free/);
    assert.match((await cli(staticDir, ['status', 'eve/none'])).stdout, /no such staging area/);
  });

  it('force-release removes a lock, records it in the audit log, and exits 1 when nothing is locked', async () => {
    const lease = await acquire(staticDir, 'stuck', { purpose: 'stuck job' });
    const r = await cli(staticDir, ['force-release', 'stuck']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /Released .*stuck.*stuck job/);
    const audit = fs
      .readFileSync(path.join(staticDir, '.devserver-staging', 'audit.log'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { action: string; tag: string; previous: { holder: { pid: number } } });
    assert.equal(audit.length, 1);
    assert.equal(audit[0].action, 'force-release');
    assert.equal(audit[0].tag, 'stuck');
    assert.equal(audit[0].previous.holder.pid, process.pid);
    await waitFor(() => (lease.state === 'lost' ? true : undefined), 5_000, 'the holder to learn it lost the lock');
    const again = await cli(staticDir, ['force-release', 'stuck']);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /not locked/);
  });

  it('destroy refuses a held area (exit 3), removes it with --force, and removes a free one', async () => {
    const lease = await acquire(staticDir, 'b/held');
    fs.writeFileSync(path.join(lease.dir, 'artifact'), 'data');
    const refused = await cli(staticDir, ['destroy', 'b/held']);
    assert.equal(refused.code, 3);
    assert.ok(fs.existsSync(path.join(lease.dir, 'artifact')));
    const forced = await cli(staticDir, ['destroy', '--force', 'b/held']);
    assert.equal(forced.code, 0, forced.stderr);
    assert.equal(fs.existsSync(lease.dir), false);
    fs.mkdirSync(path.join(staticDir, 'b', 'free'));
    assert.equal((await cli(staticDir, ['destroy', 'b/free'])).code, 0);
    assert.deepEqual(fs.readdirSync(path.join(staticDir, 'b')), []);
    const missing = await cli(staticDir, ['destroy', 'b/none']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no staging area/);
  });
});
