/**
 * A line that cannot be blocked for good. A co-user plants one ticket in front of a free area:
 * garbage, a FIFO, a directory, a link, a record naming a live process (here or on another host),
 * each with its mtime set a year ahead (so that its age never grows), a record that claims a stale
 * threshold of millennia, the highest ticket number there is. Each is first shown to block the
 * area (a caller that does not wait is refused, and `status` counts the ticket as waiting); then
 * `lock --wait` gets the lock within a bounded number of stale thresholds, its own deadline being
 * the bound. `force-release --line` clears such a line for a caller that does not wait, records
 * it in the audit log first (and does nothing when it cannot), and says so when a ticket it
 * removes was a live waiter's, which then takes a new place and still gets the lock.
 */
import { strict as assert } from 'assert';
import { spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { changes, fingerprint, plantCanaries } from '../../attack';
import { makeHolder } from '../../../src/core/base/holder';
import { acquire } from '../../../src/core/lock/lock';
import { queueDirOf } from '../../../src/core/lock/lineDirs';
import { AUDIT_LOG, META_DIR } from '../../../src/core/base/protocol';
import { CLI, cleanup, cli, exitOf, killAll, report, tempDir, track, waitFor } from '../../helpers';

/** The judge's threshold in these tests (seconds), and its refresh. */
const STALE = 2;
const TIMING = ['--stale', String(STALE), '--refresh', '1'];
const YEAR_AHEAD = new Date(Date.now() + 365 * 86_400_000);
/**
 * The deadline `lock --wait` is given, in thresholds: a ticket's own claimed threshold counts up
 * to six times the judge's, and the rest is slack for a loaded machine.
 */
const WAIT_THRESHOLDS = 10;

interface Variant {
  name: string;
  /** Plants the ticket at `ticket` (its directory exists); `outside` holds canaries. */
  plant(ticket: string, outside: string): void;
  /** The planted name, when it is not ticket 1. */
  number?: string;
}

const record = (fields: Record<string, unknown>): string => `${JSON.stringify({ user: 'mallory', clientId: 'x', staleMs: 10_000, refreshMs: 2_500, queuedAt: new Date().toISOString(), ...fields })}\n`;
const ahead = (p: string): void => fs.lutimesSync(p, YEAR_AHEAD, YEAR_AHEAD);

const VARIANTS: Variant[] = [
  {
    name: 'garbage, its mtime a year ahead',
    plant: (t) => (fs.writeFileSync(t, 'not a record {'), ahead(t)),
  },
  {
    name: 'a record of a live-looking waiter on another host, its mtime a year ahead',
    plant: (t) => (fs.writeFileSync(t, record({ pid: 1, hostname: 'elsewhere.example' })), ahead(t)),
  },
  {
    name: 'a record naming a live process on this machine, its mtime a year ahead',
    plant: (t) => {
      // This very test process, in a waiter's own words: its pid is alive, its start time right.
      const { acquiredAt, fence: _fence, ...rest } = makeHolder({ staleMs: 10_000, refreshMs: 2_500, acquiredAtMs: Date.now(), purpose: 'planted' });
      fs.writeFileSync(t, JSON.stringify({ ...rest, queuedAt: acquiredAt }));
      ahead(t);
    },
  },
  {
    name: 'a FIFO, its mtime a year ahead',
    plant: (t) => {
      assert.equal(spawnSync('mkfifo', [t]).status, 0);
      ahead(t);
    },
  },
  {
    name: 'a directory, its mtime a year ahead',
    plant: (t) => (fs.mkdirSync(t), ahead(t)),
  },
  {
    name: 'a symbolic link to a file outside, the link a year ahead',
    plant: (t, outside) => (fs.symlinkSync(path.join(outside, 'victim.txt'), t), ahead(t)),
  },
  {
    name: 'a record claiming a stale threshold of 30,000 years (touched once, when planted)',
    plant: (t) => fs.writeFileSync(t, record({ pid: 1, hostname: 'elsewhere.example', staleMs: 1e15 })),
  },
  {
    name: 'the highest ticket number there is, its mtime a year ahead',
    number: '9999999999',
    plant: (t) => (fs.writeFileSync(t, record({ pid: 1, hostname: 'elsewhere.example' })), ahead(t)),
  },
];

describe('attack: one planted ticket cannot block a free area for good', function () {
  this.timeout(120_000);
  if (process.platform !== 'linux') return;
  let root: string;
  let staticDir: string;
  let outside: string;
  beforeEach(() => {
    root = tempDir('dss-attack-line-');
    staticDir = path.join(root, 'static');
    outside = path.join(root, 'outside');
    fs.mkdirSync(staticDir);
    plantCanaries(outside);
  });
  afterEach(async () => {
    await killAll();
    cleanup(root);
  });

  /** Plants `v` in front of a new free area; returns the area's tag and the planted path. */
  async function planted(v: Variant, i: number): Promise<{ tag: string; at: string }> {
    const tag = `board/v${i}`;
    fs.mkdirSync(path.join(staticDir, tag), { recursive: true });
    const qdir = await queueDirOf(staticDir, tag);
    fs.mkdirSync(qdir, { recursive: true });
    const at = path.join(qdir, v.number ?? '0000000001');
    v.plant(at, outside);
    return { tag, at };
  }

  /** The attack works: a caller that does not wait is refused, and the ticket counts as waiting. */
  async function assertBlocks(v: Variant, tag: string): Promise<void> {
    const now = await cli(staticDir, [...TIMING, 'lock', tag, '--', 'true']);
    assert.equal(now.code, 3, `${v.name}: a caller that does not wait respects the line: ${now.stderr}`);
    assert.match(now.stderr, /is free, but 1 is waiting for it in line/);
    const status = JSON.parse((await cli(staticDir, ['--json', ...TIMING, 'status', tag])).stdout) as { queue: { position?: number }[] };
    assert.equal(status.queue[0]?.position, 1, `${v.name}: counted as waiting`);
  }

  it('lock --wait gets past each of them within a bounded number of stale thresholds, all at once', async () => {
    const before = fingerprint(outside);
    const runs = [];
    for (const [i, v] of VARIANTS.entries()) {
      const { tag, at } = await planted(v, i);
      await assertBlocks(v, tag);
      const child = track(
        spawn(process.execPath, [CLI, ...TIMING, 'lock', '--wait', String(WAIT_THRESHOLDS * STALE), tag, '--', 'true'], {
          env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir },
          stdio: ['ignore', 'pipe', 'pipe'],
        }),
      );
      let stderr = '';
      child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
      const started = Date.now();
      runs.push({ v, at, exit: exitOf(child).then((x) => ({ ...x, tookMs: Date.now() - started })), stderr: () => stderr });
    }
    const took: string[] = [];
    const blocked: string[] = [];
    for (const r of runs) {
      const { code, tookMs } = await r.exit;
      took.push(`${r.v.name}: ${(tookMs / 1000).toFixed(1)} s`);
      if (code !== 0) blocked.push(`${r.v.name}: lock --wait ${WAIT_THRESHOLDS * STALE} exited ${code}: ${r.stderr().trim().slice(0, 200)}`);
      else if (fs.existsSync(r.at) || isLink(r.at)) blocked.push(`${r.v.name}: got the lock, but the planted ticket is still there`);
    }
    report(`${runs.length} planted tickets, stale after ${STALE} s: ${took.join('; ')}`);
    assert.deepEqual(blocked, [], `held up for good:\n  ${blocked.join('\n  ')}`);
    assert.deepEqual(changes(outside, before, fingerprint(outside)), [], 'nothing outside changed (the link was never followed)');
  });

  it('force-release --line clears each of them for a caller that does not wait, recorded in the audit log first', async () => {
    const before = fingerprint(outside);
    for (const [i, v] of VARIANTS.entries()) {
      const { tag, at } = await planted(v, i);
      await assertBlocks(v, tag);
      const cleared = await cli(staticDir, [...TIMING, 'force-release', '--line', tag]);
      assert.equal(cleared.code, 0, `${v.name}: ${cleared.stderr}`);
      assert.match(cleared.stdout, /^Removed 1 ticket from the line of /, `${v.name}: ${cleared.stdout}`);
      assert.equal(fs.existsSync(at) || isLink(at), false, `${v.name}: the ticket is gone`);
      const now = await cli(staticDir, [...TIMING, 'lock', tag, '--', 'true']);
      assert.equal(now.code, 0, `${v.name}: the area is free to take at once: ${now.stderr}`);
    }
    const lines = fs
      .readFileSync(path.join(staticDir, META_DIR, AUDIT_LOG), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { action: string; tag: string; ticketCount?: number; tickets?: unknown[] });
    assert.deepEqual(
      lines.map((l) => [l.action, l.tag, l.ticketCount, l.tickets?.length]),
      VARIANTS.map((_, i) => ['clear-line', `board/v${i}`, 1, 1]),
      'one audit line per clearing, naming what it removed',
    );
    assert.deepEqual(changes(outside, before, fingerprint(outside)), [], 'nothing outside changed');
  });

  it("force-release --line says so when it removes a live waiter's ticket; that waiter takes a new place and gets the lock", async () => {
    const tag = 'board/live';
    fs.mkdirSync(path.join(staticDir, tag), { recursive: true });
    const lease = await acquire(staticDir, tag, { createOnce: false });
    const waiter = track(
      spawn(process.execPath, [CLI, 'lock', '--wait', '60', tag, '--', 'true'], { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir }, stdio: ['ignore', 'pipe', 'pipe'] }),
    );
    const exit = exitOf(waiter);
    const qdir = await queueDirOf(staticDir, tag);
    // Each ticket's record: a new ticket is told from the old one by its record (queuedAt), not by
    // its name or inode, which the filesystem may give again.
    const tickets = (): string[] =>
      (fs.existsSync(qdir) ? fs.readdirSync(qdir).filter((n) => /^\d{10}$/.test(n)) : []).flatMap((n) => {
        try {
          return [fs.readFileSync(path.join(qdir, n), 'utf8')];
        } catch {
          return [];
        }
      });
    const first = await waitFor(() => tickets().find((t) => t.endsWith('\n')), 20_000, "the waiter's ticket");
    const cleared = await cli(staticDir, ['force-release', '--line', tag]);
    assert.equal(cleared.code, 0, cleared.stderr);
    assert.match(cleared.stdout, new RegExp(`\\(pid ${waiter.pid}, true\\); LOOKED LIVE: if it still waits, it takes a new place at the end of the line`));
    // It notices at its next look, and waits on from a new ticket.
    await waitFor(() => (tickets().some((t) => t !== first && t.endsWith('\n')) ? true : undefined), 20_000, 'a new ticket');
    await lease.release();
    assert.equal((await exit).code, 0, 'the waiter got the lock');
  });

  it('force-release --line that cannot be recorded in the audit log removes nothing', async () => {
    const { tag, at } = await planted(VARIANTS[0], 0);
    const audit = path.join(staticDir, META_DIR, AUDIT_LOG);
    fs.mkdirSync(audit, { recursive: true });
    const r = await cli(staticDir, ['force-release', '--line', tag]);
    assert.equal(r.code, 1, r.stdout);
    assert.match(r.stderr, /clear-line of board\/v0 not done: could not record it in .*audit\.log: it is a directory/);
    assert.ok(fs.existsSync(at), 'the ticket is still there');
  });
});

function isLink(p: string): boolean {
  return fs.lstatSync(p, { throwIfNoEntry: false })?.isSymbolicLink() === true;
}
