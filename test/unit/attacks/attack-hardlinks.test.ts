/**
 * Hard links planted where the tool appends, writes or touches its own records: this host's
 * history segment of a tag, `audit.log`, and a waiter's ticket in the line. A hard link is the
 * same file under another name, so a record reached that way writes a file outside the static
 * directory. Canaries outside are hashed before and after (content, size, mtime); every test
 * first checks that its link really is there (two links to the canary's inode) while the command
 * runs, and that the command met it (its warning or error names the record and its links).
 */
import { strict as assert } from 'assert';
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { changes, fingerprint, plantCanaries } from '../../attack';
import { acquire } from '../../../src/core/lock/lock';
import { flushHistory } from '../../../src/core/log/history';
import { queueDirOf } from '../../../src/core/lock/lineDirs';
import { AUDIT_LOG, HISTORY_DIR, META_DIR, historyDirOf, historyHostName, historySegmentName } from '../../../src/core/base/protocol';
import { CLI, cleanup, cli, exitOf, killAll, report, tempDir, track, waitFor } from '../../helpers';

interface Sandbox {
  root: string;
  staticDir: string;
  outside: string;
  src: string;
}

function sandbox(): Sandbox {
  const root = tempDir('dss-attack-hardlinks-');
  const staticDir = path.join(root, 'static');
  const outside = path.join(root, 'outside');
  const src = path.join(root, 'src');
  fs.mkdirSync(staticDir);
  fs.mkdirSync(src);
  fs.writeFileSync(path.join(src, 'a.bin'), 'artifact a\n');
  plantCanaries(outside, { 'segment-victim.jsonl': 'a history segment must not be appended here\n', 'audit-victim.log': 'the audit log must not be appended here\n' });
  const old = new Date(Date.now() - 3_600_000);
  for (const name of ['segment-victim.jsonl', 'audit-victim.log']) fs.utimesSync(path.join(outside, name), old, old);
  return { root, staticDir, outside, src };
}

/** This host's current history segment of `tag` (generation 0), as the core names it. */
function segmentOf(staticDir: string, tag: string): string {
  return path.join(staticDir, META_DIR, HISTORY_DIR, ...historyDirOf(tag), historySegmentName(historyHostName(os.hostname()), 0));
}

/** Makes `at` another name of `victim` (a hard link), and checks that it is one. */
function hardLink(victim: string, at: string): void {
  fs.mkdirSync(path.dirname(at), { recursive: true });
  fs.rmSync(at, { force: true });
  fs.linkSync(victim, at);
  const st = fs.statSync(at);
  assert.equal(st.ino, fs.statSync(victim).ino, `${at} is ${victim}`);
  assert.equal(st.nlink, 2, `${at} has two names`);
}

function assertUnchanged(s: Sandbox, before: Map<string, string>, what: string): void {
  const diff = changes(s.outside, before, fingerprint(s.outside));
  assert.deepEqual(diff, [], `${what} changed files outside the static directory:\n  ${diff.join('\n  ')}`);
}

describe('attack: hard links planted where the tool appends, writes or touches its records', function () {
  this.timeout(60_000);
  if (process.platform !== 'linux') return;
  let s: Sandbox;
  beforeEach(() => {
    s = sandbox();
  });
  afterEach(async () => {
    await killAll();
    cleanup(s.root);
  });

  const segmentCases: { name: string; tag: string; args: (s: Sandbox) => string[]; prepare?: (s: Sandbox) => Promise<void> }[] = [
    { name: 'lock TAG -- true', tag: 'board/b1', args: () => ['lock', 'board/b1', '--', 'true'] },
    { name: 'stage TAG', tag: 'board/b2', args: (x) => ['stage', 'board/b2', x.src] },
    {
      name: 'stage --add TAG',
      tag: 'board/b3',
      args: (x) => ['stage', '--add', '--overwrite', 'board/b3', x.src],
      prepare: async (x) => {
        assert.equal((await cli(x.staticDir, ['stage', 'board/b3', x.src])).code, 0);
      },
    },
    {
      name: 'destroy TAG',
      tag: 'board/b4',
      args: () => ['destroy', 'board/b4'],
      prepare: async (x) => {
        fs.mkdirSync(path.join(x.staticDir, 'board/b4'), { recursive: true });
      },
    },
  ];
  for (const c of segmentCases) {
    it(`${c.name}: its history segment hard-linked to a file outside is refused, named in a warning, never appended to`, async () => {
      await c.prepare?.(s);
      const seg = segmentOf(s.staticDir, c.tag);
      hardLink(path.join(s.outside, 'segment-victim.jsonl'), seg);
      const before = fingerprint(s.outside);
      const r = await cli(s.staticDir, c.args(s));
      assert.equal(fs.statSync(seg).nlink, 2, 'the link was still there when the command ended');
      assertUnchanged(s, before, c.name);
      assert.equal(r.code, 0, `${c.name}: ${r.stderr}`);
      assert.ok(r.stderr.includes(seg) && /hard links/.test(r.stderr), `the warning names the segment and its links: ${r.stderr}`);
    });
  }

  it('lock -- COMMAND: a segment replaced by a hard link while the lock is held is not appended to at release', async () => {
    const tag = 'board/mid';
    const seg = segmentOf(s.staticDir, tag);
    const victim = path.join(s.outside, 'segment-victim.jsonl');
    // The command swaps the segment the lease has been writing for a link to the victim.
    const swap = `rm -f '${seg}' && ln '${victim}' '${seg}'`;
    const before = fingerprint(s.outside);
    const r = await cli(s.staticDir, ['lock', tag, '--', 'sh', '-c', swap]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(fs.statSync(seg).ino, fs.statSync(victim).ino, 'the swap happened: the segment is the victim');
    assertUnchanged(s, before, 'lock with the segment swapped');
    assert.ok(r.stderr.includes(seg) && /hard links/.test(r.stderr), `the release's record was refused, and said so: ${r.stderr}`);
  });

  it('in one process, lock cycles after the segment they appended to was replaced by a hard link do not append to it', async () => {
    const tag = 'board/cycles';
    fs.mkdirSync(path.join(s.staticDir, tag), { recursive: true });
    const warnings: string[] = [];
    const warn = (w: Error): void => void warnings.push(w.message);
    const cycle = async (): Promise<void> => {
      const lease = await acquire(s.staticDir, tag, { createOnce: false, warn });
      await lease.release();
      await flushHistory();
    };
    await cycle();
    await cycle(); // the segment is now known (and parked) to this process
    const seg = segmentOf(s.staticDir, tag);
    assert.ok(fs.statSync(seg).size > 0, 'the cycles wrote their history');
    hardLink(path.join(s.outside, 'segment-victim.jsonl'), seg);
    const before = fingerprint(s.outside);
    for (let i = 0; i < 3; i++) await cycle();
    assertUnchanged(s, before, 'lock cycles in one process');
    assert.ok(warnings.some((w) => w.includes(seg) && /hard links/.test(w)), `refused with a warning: ${warnings.join(' | ')}`);
  });

  it('force-release and destroy with audit.log hard-linked to a file outside are refused (nothing removed), naming it', async () => {
    const audit = path.join(s.staticDir, META_DIR, AUDIT_LOG);
    hardLink(path.join(s.outside, 'audit-victim.log'), audit);
    const before = fingerprint(s.outside);
    const lease = await acquire(s.staticDir, 'board/held', { createOnce: false });
    try {
      const fr = await cli(s.staticDir, ['force-release', 'board/held']);
      assertUnchanged(s, before, 'force-release');
      assert.equal(fr.code, 1, fr.stderr);
      assert.match(fr.stderr, /force-release of board\/held not done: could not record it in .*audit\.log: it is a file with 2 hard links/);
      assert.ok(lease.signal.aborted === false && fs.existsSync(path.join(s.staticDir, 'board/held/devserver.lock')), 'the lock was not removed');
    } finally {
      await lease.release().catch(() => undefined);
    }
    fs.mkdirSync(path.join(s.staticDir, 'board/doomed'), { recursive: true });
    const d = await cli(s.staticDir, ['destroy', 'board/doomed']);
    assertUnchanged(s, before, 'destroy');
    assert.equal(d.code, 1, d.stderr);
    assert.match(d.stderr, /destroy of board\/doomed not done: could not record it in .*audit\.log: it is a file with 2 hard links/);
    assert.ok(fs.existsSync(path.join(s.staticDir, 'board/doomed')), 'the area was not destroyed');
    assert.equal(fs.statSync(audit).nlink, 2, 'the link was there throughout');
    assertUnchanged(s, before, 'force-release and destroy');
  });

  it('lock --wait: a ticket given another name outside is no longer touched; the waiter takes a new place and gets the lock', async () => {
    const tag = 'board/line';
    fs.mkdirSync(path.join(s.staticDir, tag), { recursive: true });
    const lease = await acquire(s.staticDir, tag, { createOnce: false, staleMs: 2_000, refreshMs: 1_000 });
    const waiter = track(
      spawn(process.execPath, [CLI, '--stale', '2', '--refresh', '1', 'lock', '--wait', '60', tag, '--', 'true'], {
        env: { ...process.env, DEVSERVER_STATIC_DIR: s.staticDir },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    let stderr = '';
    waiter.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const exit = exitOf(waiter);
    const qdir = await queueDirOf(s.staticDir, tag);
    const ticket = await waitFor(() => (fs.existsSync(qdir) ? fs.readdirSync(qdir).find((n) => /^\d{10}$/.test(n)) : undefined), 20_000, 'the waiter\'s ticket');
    // Its heartbeat has moved its mtime at least once: it is a live waiter's ticket.
    const first = fs.statSync(path.join(qdir, ticket)).mtimeMs;
    await waitFor(() => (fs.statSync(path.join(qdir, ticket)).mtimeMs !== first ? true : undefined), 10_000, 'a heartbeat');
    const grabbed = path.join(s.outside, 'grabbed-ticket');
    fs.linkSync(path.join(qdir, ticket), grabbed);
    assert.equal(fs.statSync(grabbed).nlink, 2, 'the ticket has a second name outside');
    const before = fingerprint(s.outside);
    // Three refresh intervals: each would have touched it.
    await new Promise((r) => setTimeout(r, 3_000));
    assertUnchanged(s, before, 'the waiter, in three refresh intervals');
    await lease.release();
    const { code } = await exit;
    assert.equal(code, 0, stderr);
    assert.match(stderr, /Gave up a place in the line: Refusing .*\d{10}: it is a file with 2 hard links/, 'the waiter said why it gave its ticket up');
    assert.equal(fs.statSync(grabbed).nlink, 1, 'its own name for the ticket went');
    assertUnchanged(s, before, 'the waiter');
    report(`the waiter gave up its hard-linked ticket and got the lock; ${grabbed} unchanged`);
  });
});
