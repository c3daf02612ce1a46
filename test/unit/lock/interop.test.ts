/**
 * Interop with the original Python devserver, both ways, with the real library it locked with:
 * Debian's python3-lockfile (`lockfile.FileLock`, a LinkLockFile), run by /usr/bin/python3
 * (the python3 first on PATH may be another interpreter without Debian's packages).
 */
import { strict as assert } from 'assert';
import { spawn, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { createInterface } from 'readline';
import { inspect, list } from '../../../src/core/lock/inspect';
import { acquire, heldLeases } from '../../../src/core/lock/lock';
import { FENCE_FILE, AUDIT_LOG, LOCK_NAME, META_DIR } from '../../../src/core/base/protocol';
import { forceRelease } from '../../../src/core/remove';
import { cleanup, cli, isRoot, report, run, sleep, snapshot, tempDir } from '../../helpers';

const PYTHON = '/usr/bin/python3';
const TAG = 'eve-release/R120-15662.0.0';
const timing = { staleMs: 2_000, refreshMs: 1_000 };

/** One attempt, as the devserver's AcquireLock made it; releases again if it got the lock. */
const TRY_ACQUIRE = `
import json, sys, lockfile
lock = lockfile.FileLock(sys.argv[1])
out = {'class': type(lock).__name__, 'unique': lock.unique_name, 'lockFile': lock.lock_file}
try:
    lock.acquire(timeout=0)
except Exception as e:
    out.update(outcome=type(e).__name__, alreadyLocked=isinstance(e, lockfile.AlreadyLocked), message=str(e))
else:
    out.update(outcome='acquired')
    lock.release()
print(json.dumps(out))
`;

/**
 * A devserver holding the lock: acquires, reports, then releases once per 'release' line on stdin
 * and reports what release() did. Exits at the end of stdin.
 */
const HOLDER = `
import json, os, socket, sys, lockfile
target = sys.argv[1]
lock = lockfile.FileLock(target)
def say(**kw):
    print(json.dumps(kw), flush=True)
try:
    lock.acquire(timeout=0)
except Exception as e:
    say(event='error', error=type(e).__name__, message=str(e))
    sys.exit(1)
# The hash as a string: it is 64 bits wide, more than a JSON number keeps.
say(event='acquired', pid=os.getpid(), hostname=socket.gethostname(), hash=str(hash(target)),
    unique=lock.unique_name, lockFile=lock.lock_file)
for line in sys.stdin:
    if line.strip() == 'release':
        try:
            lock.release()
            say(event='release', outcome='ok')
        except Exception as e:
            say(event='release', outcome=type(e).__name__, message=str(e),
                unlockError=isinstance(e, lockfile.UnlockError))
`;

interface Acquired {
  event: 'acquired';
  pid: number;
  hostname: string;
  hash: string;
  unique: string;
  lockFile: string;
}

interface Released {
  event: 'release';
  outcome: string;
  message?: string;
  unlockError?: boolean;
}

/** A running Python holder, steered through stdin, answering in JSON lines on stdout. */
class PythonHolder {
  readonly child: ChildProcess;
  private readonly lines: string[] = [];
  private waiting: ((line: string | undefined) => void) | undefined;
  private closed = false;
  stderr = '';

  constructor(command: string, args: string[], env: NodeJS.ProcessEnv) {
    this.child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    this.child.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
    const rl = createInterface({ input: this.child.stdout! });
    rl.on('line', (line) => {
      if (this.waiting !== undefined) {
        const w = this.waiting;
        this.waiting = undefined;
        w(line);
      } else this.lines.push(line);
    });
    rl.on('close', () => {
      this.closed = true;
      this.waiting?.(undefined);
      this.waiting = undefined;
    });
  }

  /** The next JSON line it prints. */
  async next<T>(timeoutMs = 20_000): Promise<T> {
    const line =
      this.lines.shift() ??
      (this.closed
        ? undefined
        : await new Promise<string | undefined>((resolve, reject) => {
            const timer = setTimeout(() => {
              this.waiting = undefined;
              reject(new Error(`the Python holder said nothing for ${timeoutMs} ms; stderr: ${this.stderr}`));
            }, timeoutMs);
            this.waiting = (l) => {
              clearTimeout(timer);
              resolve(l);
            };
          }));
    if (line === undefined) throw new Error(`the Python holder exited; stderr: ${this.stderr}`);
    return JSON.parse(line) as T;
  }

  async release(): Promise<Released> {
    this.child.stdin!.write('release\n');
    return this.next<Released>();
  }

  kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      this.child.once('exit', () => resolve());
      this.child.kill('SIGKILL');
    });
  }
}

/** Why the interop tests cannot run here, or undefined when they can. */
async function missingPythonLockfile(): Promise<string | undefined> {
  if (!fs.existsSync(PYTHON)) return `${PYTHON} is missing (apt-get install python3 python3-lockfile)`;
  const r = await run(PYTHON, ['-c', 'import lockfile']);
  if (r.code !== 0) return `${PYTHON} cannot import lockfile: install Debian's python3-lockfile (apt-get install python3-lockfile)`;
  return undefined;
}

/**
 * A PYTHONHASHSEED under which hash(target) has the wanted sign. The hash ends the unique file's
 * name right after the pid; only a negative one (its '-') shows where the pid ends.
 */
async function seedFor(target: string, sign: 'negative' | 'positive'): Promise<string> {
  for (let seed = 1; seed < 200; seed++) {
    const r = await run(PYTHON, ['-c', 'import sys; print(hash(sys.argv[1]))', target], { env: { ...process.env, PYTHONHASHSEED: String(seed) } });
    const h = r.stdout.trim();
    if (/^-?\d+$/.test(h) && h.startsWith('-') === (sign === 'negative')) return String(seed);
  }
  throw new Error(`no PYTHONHASHSEED below 200 gives a ${sign} hash of ${target}`);
}

describe('interop with the Python devserver (python3-lockfile)', function () {
  this.timeout(60_000);
  let root: string;
  let staticDir: string;
  let area: string;
  let target: string;
  let lockPath: string;
  const holders: PythonHolder[] = [];

  before(async function () {
    const why = await missingPythonLockfile();
    if (why !== undefined) {
      console.log(`      skipped: ${why}`);
      this.skip();
    }
  });

  beforeEach(() => {
    root = tempDir('dss-interop-');
    staticDir = path.join(root, 'static');
    area = path.join(staticDir, ...TAG.split('/'));
    // The devserver locked `<area>/devserver`; lockfile adds '.lock'.
    target = path.join(area, 'devserver');
    lockPath = path.join(area, LOCK_NAME);
    fs.mkdirSync(staticDir);
  });

  afterEach(async () => {
    await Promise.all(holders.splice(0).map((h) => h.kill()));
    await Promise.all(heldLeases().map((l) => l.release().catch(() => undefined)));
    cleanup(root);
  });

  async function startPython(env: NodeJS.ProcessEnv = {}, hostname?: string): Promise<{ holder: PythonHolder; acquired: Acquired }> {
    fs.mkdirSync(area, { recursive: true });
    const holder =
      hostname === undefined
        ? new PythonHolder(PYTHON, ['-c', HOLDER, target], env)
        : // exec keeps one process through unshare and sh, so the pid Python reports is the one we kill.
          new PythonHolder('unshare', ['--uts', 'sh', '-c', `hostname ${hostname} && exec "$0" "$@"`, PYTHON, '-c', HOLDER, target], env);
    holders.push(holder);
    const acquired = await holder.next<Acquired & { event: string; error?: string }>();
    assert.equal(acquired.event, 'acquired', JSON.stringify(acquired));
    assert.equal(acquired.lockFile, lockPath, 'lockfile.FileLock must lock the same devserver.lock the core uses');
    return { holder, acquired };
  }

  it('while we hold the lock, FileLock.acquire(timeout=0) raises AlreadyLocked and leaves nothing behind', async () => {
    const lease = await acquire(staticDir, TAG, { ...timing, purpose: 'interop' });
    let lost: Error | undefined;
    lease.on('lost', (reason) => (lost = reason));
    const before = snapshot(area);

    const r = await run(PYTHON, ['-c', TRY_ACQUIRE, target]);
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { class: string; unique: string; lockFile: string; outcome: string; alreadyLocked?: boolean; message?: string };
    report(`Python: ${out.outcome}: ${out.message ?? ''}`);
    assert.equal(out.class, 'LinkLockFile', 'FileLock is the hard-link lock the devserver used');
    assert.equal(out.lockFile, lockPath);
    assert.equal(out.outcome, 'AlreadyLocked');
    assert.equal(out.alreadyLocked, true);
    // Its unique file is removed again, and nothing else changed.
    assert.equal(fs.existsSync(out.unique), false, `left ${out.unique} behind`);
    assert.deepEqual(snapshot(area), before);

    // A heartbeat later the lock is still ours and looks held to everyone.
    await sleep(timing.refreshMs * 1.5);
    assert.equal(lost, undefined, `the lease was lost: ${String(lost)}`);
    const info = await inspect(staticDir, TAG, timing);
    assert.equal(info.state, 'held', JSON.stringify(info));
    assert.equal(info.holder?.token, lease.holder.token);
    const listed = (await list(staticDir, 'eve-release', timing)).find((e) => e.tag === TAG);
    assert.equal(listed?.state, 'held');

    // Once released, the same call gets the lock: it was aimed at our lock file all along.
    await lease.release();
    const r2 = await run(PYTHON, ['-c', TRY_ACQUIRE, target]);
    assert.equal(r2.code, 0, r2.stderr);
    assert.equal((JSON.parse(r2.stdout) as { outcome: string }).outcome, 'acquired');
    assert.deepEqual(fs.readdirSync(area).filter((n) => n !== FENCE_FILE), [], 'Python released its lock and unique file');
  });

  for (const sign of ['negative', 'positive'] as const) {
    it(`inspect reports a Python lock as legacy, with this host and as much of the pid as the name tells (${sign} hash)`, async () => {
      fs.mkdirSync(area, { recursive: true });
      const { acquired } = await startPython({ PYTHONHASHSEED: await seedFor(target, sign) });
      assert.equal(acquired.hash.startsWith('-'), sign === 'negative', `hash ${acquired.hash}`);

      const info = await inspect(staticDir, TAG, timing);
      report(`unique file ${path.basename(acquired.unique)} → ${JSON.stringify(info.legacy)}`);
      assert.equal(info.state, 'legacy', JSON.stringify(info));
      assert.equal(info.holder, undefined);
      assert.equal(info.legacy?.hostname, os.hostname());
      assert.equal(info.legacy?.hostname, acquired.hostname);
      assert.equal(info.legacy?.uniqueFile, path.basename(acquired.unique));
      // The name ends in str(pid) + str(hash): exactly these digits (and the hash's sign).
      assert.equal(info.legacy?.pidAndHash, `${acquired.pid}${acquired.hash}`);
      if (sign === 'negative') {
        assert.equal(info.legacy?.pid, acquired.pid);
      } else {
        // Without the '-', where the pid ends is unknowable: the core must not guess.
        assert.equal(info.legacy?.pid, undefined);
        assert.ok(info.legacy.pidAndHash.startsWith(String(acquired.pid)));
      }
    });
  }

  it('reads the host and pid of a Python lock taken on another host with dots and dashes in its name', async function () {
    if (!isRoot) {
      console.log('      skipped: `unshare --uts` (another hostname) needs root');
      this.skip();
    }
    fs.mkdirSync(area, { recursive: true });
    const hostname = 'dev-cafe.lab-2';
    const { acquired } = await startPython({ PYTHONHASHSEED: await seedFor(target, 'negative') }, hostname);
    assert.equal(acquired.hostname, hostname);
    const info = await inspect(staticDir, TAG, timing);
    assert.equal(info.state, 'legacy');
    assert.equal(info.legacy?.hostname, hostname);
    assert.equal(info.legacy?.pid, acquired.pid);
  });

  it('never takes a Python lock: ELOCKED, also past the stale threshold and after its holder died; list shows it legacy', async () => {
    const { holder, acquired } = await startPython();
    const lockBefore = fs.lstatSync(lockPath);
    assert.equal(lockBefore.isFile(), true);
    assert.equal(lockBefore.nlink, 2, 'a hard link to the unique file');
    const before = snapshot(area);

    const isLegacyLocked = (err: unknown): boolean => {
      const e = err as { code?: string; message?: string; lock?: { state?: string } };
      return e.code === 'ELOCKED' && e.lock?.state === 'legacy' && (e.message ?? '').includes(os.hostname());
    };
    await assert.rejects(acquire(staticDir, TAG, { ...timing, createOnce: false }), isLegacyLocked);

    // Let the lock's mtime age past the threshold: a lock of ours would be stale now.
    await sleep(timing.staleMs + 500);
    const aged = await inspect(staticDir, TAG, timing);
    assert.equal(aged.state, 'legacy', JSON.stringify(aged));
    assert.ok(aged.heartbeatAgeMs! > timing.staleMs, `the lock's mtime is only ${aged.heartbeatAgeMs} ms old`);
    await assert.rejects(acquire(staticDir, TAG, { ...timing, createOnce: false }), isLegacyLocked);
    const listed = (await list(staticDir, 'eve-release', timing)).find((e) => e.tag === TAG);
    assert.equal(listed?.state, 'legacy');
    assert.equal(listed?.legacy?.hostname, os.hostname());

    // A dead holder on this host does not make it ours either: only force-release does.
    await holder.kill();
    assert.throws(() => process.kill(acquired.pid, 0), /ESRCH/);
    assert.equal((await inspect(staticDir, TAG, timing)).state, 'legacy');
    await assert.rejects(acquire(staticDir, TAG, { ...timing, createOnce: false }), isLegacyLocked);

    assert.deepEqual(snapshot(area), before, 'the Python lock and its unique file are untouched');
    assert.equal(fs.lstatSync(lockPath).ino, lockBefore.ino);
  });

  it('the CLI: status shows the legacy lock and its host (exit 0); lock -- true exits 3 naming the holder', async () => {
    const { acquired } = await startPython({ PYTHONHASHSEED: await seedFor(target, 'negative') });
    const status = await cli(staticDir, ['status', TAG]);
    report(`status: ${status.stdout.trim().replace(/\n\s*/g, ' | ')}`);
    assert.equal(status.code, 0, status.stderr);
    assert.match(status.stdout, new RegExp(`^${TAG}: legacy$`, 'm'));
    assert.ok(status.stdout.includes(os.hostname()), status.stdout);
    assert.ok(status.stdout.includes(`pid ${acquired.pid}`), status.stdout);

    const marker = path.join(root, 'ran');
    const locked = await cli(staticDir, ['lock', TAG, '--', 'sh', '-c', `touch "${marker}"`]);
    const plain = await cli(staticDir, ['lock', TAG, '--', 'true']);
    report(`lock: exit ${plain.code}: ${plain.stderr.trim()}`);
    for (const r of [locked, plain]) {
      assert.equal(r.code, 3, r.stderr);
      assert.ok(r.stderr.includes(os.hostname()) && r.stderr.includes(`pid ${acquired.pid}`), r.stderr);
      assert.match(r.stderr, /legacy/);
    }
    assert.equal(fs.existsSync(marker), false, 'the command must not run');
    assert.equal(fs.lstatSync(lockPath).isFile(), true, 'the Python lock is still there');
  });

  it('forceRelease removes a Python lock and its unique file and audits it; the Python release() then raises', async () => {
    const { holder, acquired } = await startPython();
    const previous = await forceRelease(staticDir, TAG, timing);
    assert.equal(previous.state, 'legacy');
    assert.equal(previous.legacy?.uniqueFile, path.basename(acquired.unique));
    assert.equal(fs.existsSync(lockPath), false);
    assert.equal(fs.existsSync(acquired.unique), false);
    assert.deepEqual(fs.readdirSync(area), [], 'nothing of the lock is left');

    const lines = fs.readFileSync(path.join(staticDir, META_DIR, AUDIT_LOG), 'utf8').trim().split('\n');
    const entry = JSON.parse(lines[lines.length - 1]) as {
      action: string;
      tag: string;
      by: { pid: number };
      previous: { state: string; legacy?: { hostname: string; uniqueFile?: string } };
    };
    assert.equal(entry.action, 'force-release');
    assert.equal(entry.tag, TAG);
    assert.equal(entry.by.pid, process.pid);
    assert.equal(entry.previous.state, 'legacy');
    assert.equal(entry.previous.legacy?.hostname, os.hostname());
    assert.equal(entry.previous.legacy?.uniqueFile, path.basename(acquired.unique));

    // The Python holder learns nothing until it releases: then release() must fail loudly.
    const gone = await holder.release();
    report(`Python release() with its lock force-released: ${gone.outcome}: ${gone.message ?? ''}`);
    assert.notEqual(gone.outcome, 'ok');
    assert.equal(gone.unlockError, true);

    const lease = await acquire(staticDir, TAG, { ...timing, createOnce: false });
    // With our lock in its place, its release() must neither succeed nor touch ours.
    const ours = await holder.release();
    report(`Python release() with our lock in place: ${ours.outcome}: ${ours.message ?? ''}`);
    assert.notEqual(ours.outcome, 'ok');
    assert.equal(ours.unlockError, true);
    const info = await inspect(staticDir, TAG, timing);
    assert.equal(info.state, 'held');
    assert.equal(info.holder?.token, lease.holder.token);
    assert.equal(lease.state, 'held');
    await lease.release();
  });
});
