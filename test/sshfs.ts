/**
 * A real network filesystem with two clients on one machine: a private sshd on 127.0.0.1 with its
 * own host key, exporting a temporary directory, mounted twice with sshfs (default options unless a
 * test asks for more). The two mounts behave as two hosts' clients: each caches names and
 * attributes and numbers files its own way. Needs root, `openssh-server`, `sshfs`, `fuse3`,
 * `/dev/fuse` and `unshare --uts` (for processes that look like another host).
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import { cleanup, isRoot, run, tempDir, waitFor } from './helpers';

/** Whether `cmd args` can run and exits 0. */
export async function works(cmd: string, args: string[]): Promise<boolean> {
  return run(cmd, args).then(
    (r) => r.code === 0,
    () => false,
  );
}

export function isMounted(dir: string): boolean {
  return fs
    .readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .some((line) => line.split(' ')[1] === dir);
}

/** Unmounts a FUSE mount, lazily if it is busy. */
export async function unmountFuse(dir: string): Promise<void> {
  if (!(await works('/usr/bin/fusermount', ['-u', dir]))) await works('/usr/bin/fusermount', ['-uz', dir]);
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

function connects(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** Why this machine cannot run the sshfs suites, or undefined when it can. */
export async function whyNoSshfs(): Promise<string | undefined> {
  if (!isRoot) return 'needs root (its own sshd, FUSE mounts)';
  for (const [bin, pkg] of [
    ['/usr/sbin/sshd', 'openssh-server'],
    ['/usr/bin/ssh-keygen', 'openssh-client'],
    ['/usr/bin/sshfs', 'sshfs'],
    ['/usr/bin/fusermount', 'fuse3'],
  ] as const) {
    if (!fs.existsSync(bin)) return `${bin} is missing: apt-get install ${pkg}`;
  }
  if (!fs.existsSync('/dev/fuse')) return '/dev/fuse is missing (no FUSE in this kernel or container)';
  if (!(await works('unshare', ['--uts', 'true']))) return 'needs `unshare --uts` (a holder on another host), which is not permitted here';
  return undefined;
}

export interface SshfsExport {
  /** A temporary directory holding everything below. */
  base: string;
  /** The exported directory, as the server sees it. */
  exportDir: string;
  /** The two clients' mounts of it. */
  mountA: string;
  mountB: string;
  /** Mounts the export at `m` as one more client, with `extra` sshfs options. */
  mount(m: string, extra?: string): Promise<void>;
  /** The pid of the sshfs process serving the mount at `m`, from /proc. */
  sshfsPid(m: string): number | undefined;
  /**
   * Mounts the client at `m` again if its sshfs process `pid` is gone (it crashed): the old mount
   * is detached lazily, since processes may still hold it. Returns the kernel's word on the crash
   * (its dmesg line), or undefined when the client was alive.
   */
  remountIfDead(m: string, pid: number): Promise<string | undefined>;
  /** Unmounts every client this made, stops sshd, removes `base`. */
  stop(): Promise<void>;
}

/**
 * Starts sshd and mounts its export twice (clients A and B), with sshfs's default options. The
 * export is a new directory in `base`, or `exportDir` (an existing directory of the caller's own,
 * e.g. a small disk's mount, left in place by `stop`).
 */
export async function startSshfs(prefix = 'dss-sshfs-', given?: string): Promise<SshfsExport> {
  const base = fs.realpathSync(tempDir(prefix));
  const exportDir = given ?? path.join(base, 'export');
  const mountA = path.join(base, 'clientA');
  const mountB = path.join(base, 'clientB');
  const keys = path.join(base, 'keys');
  for (const d of [...(given === undefined ? [exportDir] : []), mountA, mountB, keys]) fs.mkdirSync(d);
  const mounts: string[] = [];
  const sshdPidFile = path.join(base, 'sshd.pid');
  let madeRunSshd = false;
  const stop = async (): Promise<void> => {
    for (const m of new Set(mounts)) if (isMounted(m)) await unmountFuse(m);
    if (fs.existsSync(sshdPidFile)) {
      const pid = Number(fs.readFileSync(sshdPidFile, 'utf8').trim());
      if (Number.isInteger(pid) && pid > 0) {
        try {
          process.kill(pid, 'SIGTERM');
        } catch {
          /* already gone */
        }
      }
    }
    if (madeRunSshd) fs.rmSync('/run/sshd', { recursive: true, force: true });
    if (mounts.every((m) => !isMounted(m))) cleanup(base);
  };
  try {
    for (const k of ['host', 'client']) {
      const r = await run('/usr/bin/ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path.join(keys, k)]);
      assert.equal(r.code, 0, r.stderr);
    }
    const authorized = path.join(keys, 'authorized_keys');
    fs.copyFileSync(path.join(keys, 'client.pub'), authorized);
    fs.chmodSync(authorized, 0o600);
    const port = await freePort();
    const config = path.join(base, 'sshd_config');
    fs.writeFileSync(
      config,
      [
        `Port ${port}`,
        'ListenAddress 127.0.0.1',
        `HostKey ${path.join(keys, 'host')}`,
        `PidFile ${sshdPidFile}`,
        `AuthorizedKeysFile ${authorized}`,
        'PubkeyAuthentication yes',
        'PasswordAuthentication no',
        'KbdInteractiveAuthentication no',
        'PermitRootLogin prohibit-password',
        'UsePAM no',
        // The keys live in a temp dir whose modes sshd would otherwise refuse.
        'StrictModes no',
        'Subsystem sftp internal-sftp',
        '',
      ].join('\n'),
    );
    // sshd refuses to start without its privilege separation directory.
    if (!fs.existsSync('/run/sshd')) {
      fs.mkdirSync('/run/sshd', { mode: 0o755 });
      madeRunSshd = true;
    }
    const sshd = await run('/usr/sbin/sshd', ['-f', config, '-E', path.join(base, 'sshd.log')]);
    assert.equal(sshd.code, 0, `sshd: ${sshd.stderr}`);
    await waitFor(async () => ((await connects(port)) ? true : undefined), 10_000, 'sshd to listen');
    const user = os.userInfo().username;
    const options = `IdentityFile=${path.join(keys, 'client')},StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,BatchMode=yes`;
    const mount = async (m: string, extra?: string): Promise<void> => {
      const r = await run('/usr/bin/sshfs', ['-p', String(port), '-o', extra === undefined ? options : `${options},${extra}`, `${user}@127.0.0.1:${exportDir}`, m]);
      assert.equal(r.code, 0, `sshfs ${m}: ${r.stderr}\n${fs.readFileSync(path.join(base, 'sshd.log'), 'utf8')}`);
      mounts.push(m);
    };
    const sshfsPid = (m: string): number | undefined => {
      const pid = fs
        .readdirSync('/proc')
        .filter((d) => /^\d+$/.test(d))
        .find((d) => {
          try {
            const argv = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
            return argv[0]?.endsWith('sshfs') === true && argv.includes(m);
          } catch {
            return false;
          }
        });
      return pid === undefined ? undefined : Number(pid);
    };
    const remountIfDead = async (m: string, pid: number): Promise<string | undefined> => {
      let state: string | undefined;
      try {
        const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
        state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
      } catch {
        state = undefined;
      }
      // A zombie has ended too: where the init process does not reap orphans, it stays one.
      if (state !== undefined && state !== 'Z' && state !== 'X') return undefined;
      const dmesg = await run('dmesg', []).catch(() => undefined);
      const line = dmesg?.stdout.split('\n').filter((l) => l.includes(`sshfs[${pid}]`)).join(' ') ?? '';
      await works('/usr/bin/fusermount', ['-uz', m]);
      await mount(m);
      return line !== '' ? line : `sshfs (pid ${pid}) ended`;
    };
    for (const m of [mountA, mountB]) await mount(m);
    fs.writeFileSync(path.join(exportDir, 'hello'), 'hi');
    assert.equal(fs.readFileSync(path.join(mountA, 'hello'), 'utf8'), 'hi');
    assert.equal(fs.readFileSync(path.join(mountB, 'hello'), 'utf8'), 'hi');
    fs.unlinkSync(path.join(exportDir, 'hello'));
    return { base, exportDir, mountA, mountB, mount, sshfsPid, remountIfDead, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
