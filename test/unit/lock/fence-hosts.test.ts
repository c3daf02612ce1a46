/**
 * Fencing tokens and the lock across two hosts' clients of one network filesystem: two sshfs
 * mounts of one export, default options (each client caches names, attributes and link targets
 * for 20 s and numbers inodes its own way), every process of a client under its own hostname.
 * - Holders on the two clients in turn, each right after the other: no token is handed out twice,
 *   and they grow in the order the holders locked. (Reading the counter, as earlier builds did,
 *   gives one client's cached value twice.)
 * - An area destroyed through one client and made again through the other, with no history to
 *   help: the token its destroy kept outside it is read past the other client's cache, and the
 *   count goes on. (A cached listing of those records gave the same token twice.)
 * - A folder locked through one client while a build inside it, made since that client listed the
 *   folder, is held through the other: refused (the walk for locks inside read a cached listing).
 * - prune through one client right after a build was staged to through the other: that build is
 *   kept (its last use was read from the client's cache, and the newest build was removed).
 * - A holder force-released while its command still runs, and a successor on the other client:
 *   the successor's token is greater, never the same.
 * - A holder stopped (SIGSTOP) for longer than the stale threshold, taken over from the other client,
 *   then continued: it never moves the new holder's lock (the kernel's inotify on the export is the
 *   referee), and it learns that it lost.
 */
import { strict as assert } from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { watchName } from '../../attack';
import { runCli, startCli } from '../../commit';
import { killAll, report, sleep, waitFor } from '../../helpers';
import { startSshfs, whyNoSshfs, type SshfsExport } from '../../sshfs';
import { COMMAND_FILE, FENCE_FILE, HISTORY_DIR, LOCK_NAME, META_DIR, OWNER_FILE, TIMESTAMP_FILE, WORK_PREFIX } from '../../../src/core/base/protocol';

/** The shortest thresholds the core allows: a stopped holder goes stale in 2 s. */
const TIMING = ['--stale', '2', '--refresh', '1'];

describe('fencing and the lock across two hosts on one network filesystem (sshfs)', function () {
  this.timeout(300_000);
  let nfs: SshfsExport | undefined;

  before(async function () {
    const why = await whyNoSshfs();
    if (why !== undefined) {
      report(`skipped: ${why}`);
      this.skip();
    }
    nfs = await startSshfs('dss-fence-hosts-');
  });
  after(async () => {
    await killAll();
    await nfs?.stop();
  });
  afterEach(() => killAll());

  const hostOf = (client: 'A' | 'B'): string => `host${client}`;
  const dirOf = (client: 'A' | 'B'): string => (client === 'A' ? nfs!.mountA : nfs!.mountB);

  /** Reads the counter as a client would cache it: its listing, or an earlier build's link text. */
  function lookAtCounter(area: string): void {
    const counter = path.join(area, FENCE_FILE);
    const st = fs.lstatSync(counter, { throwIfNoEntry: false });
    if (st?.isSymbolicLink() === true) fs.readlinkSync(counter);
    else if (st?.isDirectory() === true) fs.readdirSync(counter);
  }

  /** `lock TAG -- print the token` through one client, as one of its hosts' processes. */
  async function tokenThrough(client: 'A' | 'B', tag: string): Promise<number> {
    const r = await runCli(['lock', tag, '--wait', '30', ...TIMING, '--', 'sh', '-c', 'echo "$DEVSERVER_STAGING_FENCE"'], { staticDir: dirOf(client), hostname: hostOf(client) });
    assert.equal(r.code, 0, `lock through client ${client}: ${r.stderr}`);
    const token = Number(r.stdout.trim());
    assert.ok(Number.isSafeInteger(token) && token > 0, `a token through client ${client}: ${r.stdout}`);
    return token;
  }

  it('holders on the two clients in turn, each right after the other: every token once, in the order they locked', async () => {
    const tag = 'turns/R1';
    fs.mkdirSync(path.join(nfs!.exportDir, tag), { recursive: true });
    const tokens: string[] = [];
    const seen: number[] = [];
    for (let round = 0; round < 6; round++) {
      for (const client of ['A', 'B'] as const) {
        // Any process on the other client (a user's `ls -l`, a view) looks at the counter first,
        // so that its client has it cached when the next holder there comes.
        lookAtCounter(path.join(dirOf(client === 'A' ? 'B' : 'A'), tag));
        const t = await tokenThrough(client, tag);
        tokens.push(`${client}:${t}`);
        seen.push(t);
      }
    }
    report(`tokens in turn through the two clients: ${tokens.join(' ')}`);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i] > seen[i - 1], `tokens must grow in the order of locking: ${tokens.join(' ')}`);
  });

  it('an area destroyed through one client and made again through the other counts on, with no history, though that client cached what it read of the destroys', async () => {
    const tag = 'remade/R1';
    // The history is best effort (a full disk, a file in its place): the record each destroy keeps
    // outside the area is then all the next holder can count on.
    const historyDir = path.join(nfs!.exportDir, META_DIR, HISTORY_DIR);
    fs.mkdirSync(path.dirname(historyDir), { recursive: true });
    const kept = fs.existsSync(historyDir);
    if (kept) fs.renameSync(historyDir, `${historyDir}.kept`);
    fs.writeFileSync(historyDir, 'planted');
    const tokens: string[] = [];
    const seen: number[] = [];
    const destroyThrough = async (client: 'A' | 'B'): Promise<void> => {
      const r = await runCli(['destroy', tag], { staticDir: dirOf(client), hostname: hostOf(client) });
      assert.equal(r.code, 0, `destroy through client ${client}: ${r.stderr}`);
      tokens.push(`${client}:destroy`);
    };
    const lockThrough = async (client: 'A' | 'B'): Promise<void> => {
      const t = await tokenThrough(client, tag);
      tokens.push(`${client}:${t}`);
      seen.push(t);
    };
    // B first finds no record of a destroy at all, and may keep that it found none.
    await lockThrough('B');
    for (let round = 0; round < 3; round++) {
      // B makes the area again, reading (and so caching) the token the destroys kept; A then
      // holds it, destroys it, and B makes it again while its cache still holds the older record.
      await lockThrough('A');
      await destroyThrough('A');
      await lockThrough('B');
      await lockThrough('A');
      await destroyThrough('A');
      await lockThrough('B');
      await destroyThrough('B');
    }
    fs.rmSync(historyDir);
    if (kept) fs.renameSync(`${historyDir}.kept`, historyDir);
    report(`tokens of an area destroyed and made again through the two clients, with no history: ${tokens.join(' ')}`);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i] > seen[i - 1], `tokens must grow across destroys: ${tokens.join(' ')}`);
  });

  it('a folder locked through one client while a build inside it is held through the other, made since that client listed the folder: refused', async () => {
    const outcomes: string[] = [];
    for (let trial = 0; trial < 3; trial++) {
      const board = `nest${trial}`;
      const tag = `${board}/release/R121`;
      fs.mkdirSync(path.join(nfs!.exportDir, board, 'release', 'R120'), { recursive: true });
      // A view on client B lists the folders now and then: its client keeps those listings.
      fs.readdirSync(path.join(dirOf('B'), board));
      fs.readdirSync(path.join(dirOf('B'), board, 'release'));
      const marker = path.join(nfs!.exportDir, `nested-${trial}`);
      const holder = startCli(['lock', tag, ...TIMING, '--', 'sh', '-c', `touch '${marker}'; exec sleep 30 </dev/null >/dev/null 2>&1`], { staticDir: dirOf('A'), hostname: hostOf('A') });
      await waitFor(() => (fs.existsSync(marker) ? true : undefined), 30_000, 'the holder on client A to run its command');
      // The whole board, through client B, while its client still has the folder as it listed it.
      const folder = await runCli(['lock', board, ...TIMING, '--', 'true'], { staticDir: dirOf('B'), hostname: hostOf('B') });
      outcomes.push(`${board}: exit ${folder.code}`);
      spawnSync('pkill', ['-f', `touch '${marker}'`]);
      holder.child.kill('SIGKILL');
      await holder.done;
      assert.equal(folder.code, 3, `locking ${board} through client B while ${tag} is held through client A must be refused: ${folder.stderr}`);
      assert.match(folder.stderr, /R121/, 'the refusal names the build held inside');
    }
    report(`a folder locked while a build made and held inside it through the other client: ${outcomes.join(', ')}`);
  });

  it('prune through one client keeps a build staged to through the other since that client looked at it', async () => {
    const src = path.join(nfs!.exportDir, '..', 'prune-source');
    fs.mkdirSync(src, { recursive: true });
    fs.writeFileSync(path.join(src, 'image.bin'), 'the build');
    const builds = ['R1', 'R2', 'R3'];
    for (const [i, b] of builds.entries()) {
      const staged = await runCli(['stage', `pruned/${b}`, src], { staticDir: dirOf('A'), hostname: hostOf('A') });
      assert.equal(staged.code, 0, staged.stderr);
      // R1 the least recently used, R3 the most.
      const when = new Date(Date.now() - (3 - i) * 3_600_000);
      fs.utimesSync(path.join(nfs!.exportDir, 'pruned', b, TIMESTAMP_FILE), when, when);
    }
    // Client B looks at the folder (a view, a du): its client keeps what it saw.
    const du = await runCli(['du', 'pruned'], { staticDir: dirOf('B'), hostname: hostOf('B') });
    assert.equal(du.code, 0, du.stderr);
    // R1 is used again through client A (staged to: its staged.timestamp moves to now).
    const now = new Date();
    fs.utimesSync(path.join(dirOf('A'), 'pruned', 'R1', TIMESTAMP_FILE), now, now);
    const pruned = await runCli(['prune', 'pruned', '--keep', '1'], { staticDir: dirOf('B'), hostname: hostOf('B') });
    report(`prune --keep 1 through client B after R1 was used through client A: exit ${pruned.code}; left ${fs.readdirSync(path.join(nfs!.exportDir, 'pruned')).sort().join(', ')}`);
    assert.ok(fs.existsSync(path.join(nfs!.exportDir, 'pruned', 'R1')), `R1, used moments before through the other client, was pruned: ${pruned.stdout}${pruned.stderr}`);
    assert.match(pruned.stdout, /R1.*staged to again while pruning/);
    assert.ok(!fs.existsSync(path.join(nfs!.exportDir, 'pruned', 'R2')), 'R2, the least recently used of the rest, was kept');
  });

  it('a holder force-released while its command runs: its successor on the other client gets a greater token', async () => {
    for (let trial = 0; trial < 3; trial++) {
      const tag = `forced/R${trial}`;
      fs.mkdirSync(path.join(nfs!.exportDir, tag), { recursive: true });
      await tokenThrough('B', tag);
      // Client B has the counter as it is before the holder on A comes (a view there, say, looked).
      lookAtCounter(path.join(dirOf('B'), tag));
      const marker = path.join(nfs!.exportDir, `running-${trial}`);
      const holder = startCli(['lock', tag, ...TIMING, '--', 'sh', '-c', `echo "$DEVSERVER_STAGING_FENCE"; touch '${marker}'; exec sleep 30 </dev/null >/dev/null 2>&1`], { staticDir: dirOf('A'), hostname: hostOf('A') });
      await waitFor(() => (fs.existsSync(marker) ? true : undefined), 30_000, 'the holder on client A to run its command');
      const held = Number(holder.stdout.trim());
      const t0 = Date.now();
      // Force-released by someone on the holder's own host (an operator there), the successor on the other.
      const forced = await runCli(['force-release', tag], { staticDir: dirOf('A'), hostname: 'hostC' });
      const t1 = Date.now();
      assert.equal(forced.code, 0, `force-release through client A: ${forced.stderr}`);
      const next = await tokenThrough('B', tag);
      report(`trial ${trial}: holder on A ran with token ${held}; after a force-release (${t1 - t0} ms), the next holder, on B, got ${next} (${Date.now() - t1} ms)`);
      assert.ok(next > held, `the successor's token ${next} must be greater than the force-released holder's ${held}`);
      // The command too (its own process group, recorded by its holder): it would hold the test up.
      spawnSync('pkill', ['-f', `touch '${marker}'`]);
      holder.child.kill('SIGKILL');
      await holder.done;
    }
  });

  it('a holder stopped for longer than the stale threshold and taken over from the other client never moves the new holder’s lock when it goes on', async () => {
    for (let trial = 0; trial < 3; trial++) {
      const tag = `paused/R${trial}`;
      const area = path.join(nfs!.exportDir, tag);
      fs.mkdirSync(area, { recursive: true });
      const first = startCli(['lock', tag, ...TIMING, '--', 'sh', '-c', 'echo "$DEVSERVER_STAGING_FENCE"; sleep 3'], { staticDir: dirOf('A'), hostname: hostOf('A') });
      await waitFor(() => (first.stdout.trim() !== '' ? true : undefined), 30_000, 'the first holder to run');
      const firstToken = Number(first.stdout.trim());
      // Stopped, holder and command alike: from host B only the heartbeat tells, and it stops.
      const { token } = JSON.parse(fs.readFileSync(path.join(area, LOCK_NAME, OWNER_FILE), 'utf8')) as { token: string };
      const { pgid } = JSON.parse(fs.readFileSync(path.join(area, LOCK_NAME, `${WORK_PREFIX}${token}`, COMMAND_FILE), 'utf8')) as { pgid: number };
      const stop = (signal: NodeJS.Signals): void => {
        process.kill(first.child.pid!, signal);
        process.kill(-pgid, signal);
      };
      stop('SIGSTOP');
      await sleep(500);
      const second = startCli(['lock', tag, '--wait', '60', ...TIMING, '--', 'sh', '-c', 'echo "$DEVSERVER_STAGING_FENCE"; sleep 6'], { staticDir: dirOf('B'), hostname: hostOf('B') });
      await waitFor(() => (second.stdout.trim() !== '' ? true : undefined), 60_000, 'the second holder to take over');
      const secondToken = Number(second.stdout.trim());
      const record = JSON.parse(fs.readFileSync(path.join(area, LOCK_NAME, OWNER_FILE), 'utf8')) as { token: string; hostname: string };
      assert.equal(record.hostname, hostOf('B'), 'the lock in place is the second holder’s');
      const watch = await watchName(area, LOCK_NAME);
      stop('SIGCONT');
      const firstEnd = await first.done;
      const events = await watch.stop();
      const secondEnd = await second.done;
      report(`trial ${trial}: tokens ${firstToken} (stopped on A) and ${secondToken} (took over from B); the first ended ${String(firstEnd.code ?? firstEnd.signal)}; the lock moved while the second held it: ${events.length === 0 ? 'never' : events.join(', ')}`);
      assert.deepEqual(events, [], 'the second holder’s lock was never moved, removed or replaced while it held it');
      assert.ok(secondToken > firstToken, `tokens ${firstToken}, then ${secondToken}`);
      assert.notEqual(firstEnd.code, 0, `the first holder learns that it lost its lock: ${first.stderr}`);
      assert.equal(secondEnd.code, 0, second.stderr);
    }
  });
});
