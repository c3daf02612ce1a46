/**
 * The audit log comes first: a force-release or destroy that cannot be recorded does not happen.
 * Hostile things in the log's place (a FIFO, a directory, links out of the static directory, a
 * file the user cannot write) make both commands fail promptly, with the log named, and leave the
 * lock, the area and every file outside exactly as they were.
 */
import { strict as assert } from 'assert';
import { spawn, spawnSync, type ChildProcess } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { appendAudit } from '../../../src/core';
import { acquire, type Lease } from '../../../src/core/lock/lock';
import { AUDIT_LOG, LOCK_NAME, META_DIR, OWNER_FILE } from '../../../src/core/base/protocol';
import { CLI, cleanup, cli, isRoot, rejectsWith, report, run, fingerprint, tempDir, track, waitFor, killAll, type RunResult } from '../../helpers';

/** Fails the test instead of hanging: a command that blocks on the log is killed after `ms`. */
async function bounded(p: Promise<RunResult>, child: () => ChildProcess | undefined, ms: number): Promise<RunResult> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      child()?.kill('SIGKILL');
      reject(new Error(`still running after ${ms} ms: it blocked`));
    }, ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The CLI with a time limit (SIGKILL after `ms`, and the test fails). */
function cliBounded(staticDir: string, args: readonly string[], ms = 15_000): Promise<RunResult> {
  let child: ChildProcess | undefined;
  const p = new Promise<RunResult>((resolve, reject) => {
    child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', reject);
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  return bounded(p, () => child, ms);
}


interface AuditLine {
  action: string;
  tag: string;
  failed?: string;
  previous?: { holder?: { pid: number } };
}

function auditOf(staticDir: string): AuditLine[] {
  const log = path.join(staticDir, META_DIR, AUDIT_LOG);
  if (!fs.existsSync(log)) return [];
  return fs
    .readFileSync(log, 'utf8')
    .trim()
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as AuditLine);
}

describe('audit log first', function () {
  this.timeout(60_000);
  let root: string;
  let staticDir: string;
  let outside: string;
  let meta: string;
  let log: string;
  const leases: Lease[] = [];

  beforeEach(() => {
    root = tempDir('dss-audit-');
    staticDir = path.join(root, 'static');
    outside = path.join(root, 'outside');
    meta = path.join(staticDir, META_DIR);
    log = path.join(meta, AUDIT_LOG);
    fs.mkdirSync(path.join(staticDir, 'doomed', 'sub'), { recursive: true });
    fs.writeFileSync(path.join(staticDir, 'doomed', 'artifact.bin'), crypto.randomBytes(4096));
    fs.writeFileSync(path.join(staticDir, 'doomed', 'sub', 'more.txt'), 'more\n');
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(outside, 'canary.log'), 'earlier lines\n');
    const old = new Date(Date.now() - 3_600_000);
    fs.utimesSync(path.join(outside, 'canary.log'), old, old);
  });
  afterEach(async () => {
    for (const l of leases.splice(0)) await l.release().catch(() => undefined);
    await killAll();
    cleanup(root);
  });

  async function hold(tag: string): Promise<Lease> {
    const lease = await acquire(staticDir, tag, { createOnce: false, purpose: 'held by the test' });
    leases.push(lease);
    return lease;
  }

  /** What must survive a refused force-release: the lock directory itself and its owner record. */
  function lockState(tag: string): string {
    const lockPath = path.join(staticDir, tag, LOCK_NAME);
    return `${fs.statSync(lockPath).ino} ${fs.readFileSync(path.join(lockPath, OWNER_FILE), 'utf8')}`;
  }

  /**
   * force-release of a held lock, destroy of a free area, and destroy --force of a held one: each
   * fails promptly naming the log and `why`, and changes nothing.
   */
  async function assertAllRefused(why: RegExp): Promise<void> {
    const lease = await hold('held');
    const lockBefore = lockState('held');
    const doomedBefore = fingerprint(path.join(staticDir, 'doomed'));
    const outsideBefore = fingerprint(outside);
    const t0 = performance.now();
    const fr = await cliBounded(staticDir, ['force-release', 'held']);
    assert.equal(fr.code, 1, fr.stderr);
    assert.match(fr.stderr, /force-release of held not done: could not record it in .*\.devserver-staging\/audit\.log: /);
    assert.match(fr.stderr, why);
    assert.match(fr.stderr, /Fix the audit log \(it must be a regular file writable by you\) and try again/);
    const de = await cliBounded(staticDir, ['destroy', 'doomed']);
    assert.equal(de.code, 1, de.stderr);
    assert.match(de.stderr, /destroy of doomed not done: could not record it in .*audit\.log/);
    assert.match(de.stderr, why);
    const forced = await cliBounded(staticDir, ['destroy', '--force', 'held']);
    assert.equal(forced.code, 1, forced.stderr);
    assert.match(forced.stderr, /force-release of held not done/);
    const ms = performance.now() - t0;
    assert.equal(lockState('held'), lockBefore, 'the lock was touched');
    assert.equal(lease.state, 'held', 'the holder lost its lock');
    assert.equal(fingerprint(path.join(staticDir, 'doomed')), doomedBefore, 'the area was touched');
    assert.equal(fs.existsSync(path.join(staticDir, 'doomed', LOCK_NAME)), false, 'a lock left on the area');
    assert.equal(fingerprint(outside), outsideBefore, 'a file outside the static directory changed');
    report(`3 refusals in ${Math.round(ms)} ms: ${fr.stderr.trim().split('\n')[0]}`);
  }

  it('records before acting: one line per action, a second line when the action then fails', async () => {
    const lease = await hold('held');
    const fr = await cli(staticDir, ['force-release', 'held']);
    assert.equal(fr.code, 0, fr.stderr);
    await waitFor(() => (lease.state === 'lost' ? true : undefined), 10_000, 'the holder to learn it lost the lock');
    const de = await cli(staticDir, ['destroy', 'doomed']);
    assert.equal(de.code, 0, de.stderr);
    // Refused before it acts (a lock inside it is held, so its own lock is not granted): nothing done, nothing recorded.
    fs.mkdirSync(path.join(staticDir, 'outer', 'inner'), { recursive: true });
    await hold('outer/inner');
    const refused = await cli(staticDir, ['destroy', 'outer']);
    assert.equal(refused.code, 3, refused.stderr);
    // Fails once recorded (a file stands where the trash goes): recorded, then the failure recorded.
    fs.mkdirSync(path.join(staticDir, 'blocked'));
    const trash = path.join(staticDir, '.devserver-staging', 'trash');
    fs.rmSync(trash, { recursive: true, force: true });
    fs.writeFileSync(trash, 'in the way');
    const failed = await cli(staticDir, ['destroy', 'blocked']);
    assert.equal(failed.code, 1, failed.stderr);
    assert.ok(fs.existsSync(path.join(staticDir, 'blocked')), 'the area is still there');
    const lines = auditOf(staticDir);
    assert.deepEqual(
      lines.map((l) => `${l.action} ${l.tag}${l.failed !== undefined ? ' failed' : ''}`),
      ['force-release held', 'destroy doomed', 'destroy blocked', 'destroy blocked failed'],
    );
    assert.equal(lines[0].previous?.holder?.pid, process.pid);
    assert.match(lines[3].failed!, /trash/);
    assert.equal(fs.existsSync(path.join(staticDir, 'outer', 'inner')), true);
  });

  it('a FIFO as audit.log (no reader): force-release and destroy fail at once, nothing changes', async () => {
    fs.mkdirSync(meta);
    spawnSync('mkfifo', [log]);
    assert.ok(fs.lstatSync(log).isFIFO());
    await assertAllRefused(/it is a FIFO, not a file this tool wrote/);
  });

  it('a FIFO as audit.log with a reader on it: refused all the same, nothing written into it', async () => {
    fs.mkdirSync(meta);
    spawnSync('mkfifo', [log]);
    // Read and write end open, so that an open for writing would succeed; whatever comes is counted.
    const reader = track(spawn('sh', ['-c', `exec 3<>"${log}"; echo ready; exec cat <&3`], { stdio: ['ignore', 'pipe', 'pipe'] }));
    let got = '';
    reader.stdout!.on('data', (d: Buffer) => (got += d.toString()));
    await waitFor(() => (got.includes('ready') ? true : undefined), 5_000, 'the reader');
    await assertAllRefused(/it is a FIFO/);
    assert.equal(got, 'ready\n', 'something was written into the FIFO');
    reader.kill('SIGKILL');
  });

  it('a directory as audit.log: refused, nothing changes', async () => {
    fs.mkdirSync(log, { recursive: true });
    await assertAllRefused(/it is a directory/);
  });

  it('audit.log a link to a file outside: refused, the outside file keeps its bytes and mtime', async () => {
    fs.mkdirSync(meta);
    fs.symlinkSync(path.join(outside, 'canary.log'), log);
    await assertAllRefused(/it is a symbolic link/);
  });

  it('audit.log a dangling link out of the static directory: refused, nothing created outside', async () => {
    fs.mkdirSync(meta);
    fs.symlinkSync(path.join(outside, 'created-through-link.log'), log);
    await assertAllRefused(/it is a symbolic link/);
    assert.equal(fs.existsSync(path.join(outside, 'created-through-link.log')), false);
  });

  it('.devserver-staging a link to a directory outside: refused, nothing written there', async () => {
    fs.symlinkSync(outside, meta);
    await assertAllRefused(/\.devserver-staging is a symbolic link/);
    assert.deepEqual(fs.readdirSync(outside), ['canary.log']);
  });

  it('appendAudit (the core API) refuses the same things with an EIO naming the log', async () => {
    fs.mkdirSync(meta);
    spawnSync('mkfifo', [log]);
    await rejectsWith(appendAudit(staticDir, { action: 'destroy', tag: 'x' }), 'EIO', `Could not write the audit log ${log}: it is a FIFO`);
    fs.unlinkSync(log);
    fs.symlinkSync(path.join(outside, 'canary.log'), log);
    await rejectsWith(appendAudit(staticDir, { action: 'destroy', tag: 'x' }), 'EIO', 'it is a symbolic link');
    fs.unlinkSync(log);
    await appendAudit(staticDir, { action: 'destroy', tag: 'x' });
    assert.deepEqual(auditOf(staticDir).map((l) => l.tag), ['x']);
  });

  it('audit.log not writable by the user (another user, a 1777 static directory): refused, nothing changes', async function () {
    if (!isRoot) {
      report('skipped: needs root to run as another user (runuser -u nobody)');
      this.skip();
    }
    fs.chmodSync(root, 0o755);
    fs.chmodSync(staticDir, 0o1777);
    fs.mkdirSync(meta, { mode: 0o1777 });
    fs.chmodSync(meta, 0o1777);
    fs.writeFileSync(log, '', { mode: 0o644 });
    fs.chownSync(path.join(staticDir, 'doomed'), 65534, 65534);
    for (const p of ['sub', 'artifact.bin', path.join('sub', 'more.txt')]) fs.chownSync(path.join(staticDir, 'doomed', p), 65534, 65534);
    const asNobody = (args: readonly string[]): Promise<RunResult> =>
      run('runuser', ['-u', 'nobody', '--', process.execPath, CLI, ...args], { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir } });
    // A lock held by nobody's own process, so that only the log stands in the way.
    const holder = track(
      spawn('runuser', ['-u', 'nobody', '--', process.execPath, CLI, 'lock', 'held', '--purpose', 'nobody holds it', '--', 'sleep', '60'], {
        env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    const lockPath = path.join(staticDir, 'held', LOCK_NAME);
    await waitFor(() => (fs.existsSync(path.join(lockPath, OWNER_FILE)) ? true : undefined), 10_000, 'nobody to hold the lock');
    const lockBefore = lockState('held');
    const doomedBefore = fingerprint(path.join(staticDir, 'doomed'));
    const fr = await bounded(asNobody(['force-release', 'held']), () => undefined, 15_000);
    assert.equal(fr.code, 1, fr.stderr);
    assert.match(fr.stderr, /force-release of held not done: could not record it in .*audit\.log: permission denied/);
    const de = await bounded(asNobody(['destroy', 'doomed']), () => undefined, 15_000);
    assert.equal(de.code, 1, de.stderr);
    assert.match(de.stderr, /destroy of doomed not done: could not record it in .*audit\.log: permission denied/);
    assert.equal(lockState('held'), lockBefore, 'the lock was touched');
    assert.equal(holder.exitCode, null, 'the holder stopped');
    assert.equal(fingerprint(path.join(staticDir, 'doomed')), doomedBefore, 'the area was touched');
    assert.equal(fs.readFileSync(log, 'utf8'), '');
  });
});
