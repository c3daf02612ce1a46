/**
 * Sizes a co-user sets, met without a crash and in bounded memory: a history of 200,000 events of
 * one tag (full segments of 15 hosts, as years of use leave it, and the same spread over 4,000
 * hosts' segments), read by `devserver-stage history` with and without `--limit`; `lock --wait`
 * in front of 200,000 stale tickets; `list` of a folder of 160,000 areas; a dead stager's litter,
 * and a build, holding a directory tree 25,000 levels deep. The files are made directly, in the on-disk format (README, "The
 * on-disk protocol"), not through the tool. Peak memory is measured by the kernel (getrusage).
 */
import { strict as assert } from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { queueDirOf } from '../../../src/core/lock/lineDirs';
import { HISTORY_DIR, META_DIR, historyDirOf, historySegmentName } from '../../../src/core/base/protocol';
import { WORKERS, cleanup, cli, report, tempDir } from '../../helpers';

const TAG = 'eve-release/R120-15662.0.0';
const EVENTS = 200_000;
const SEGMENT_BYTES = 1024 * 1024;
const BASE_MS = Date.parse('2026-01-01T00:00:00.000Z');

/** Event k of the history: at BASE_MS + k ms, fence k + 1, by the host it is given to. */
function eventLine(k: number, host: string): string {
  const kind = k % 2 === 0 ? 'acquired' : 'released';
  return `${JSON.stringify({ tag: TAG, kind, holder: { user: 'builder', hostname: host, pid: 1000 + (k % 30_000), clientId: `${host}:${1000 + (k % 30_000)}` }, fence: k + 1, time: new Date(BASE_MS + k).toISOString() })}\n`;
}

/**
 * Writes EVENTS events of TAG, event k by host k % hosts, each host's in its segments in order:
 * generation 0 up to a full segment, then generation 1.
 */
function writeHistory(staticDir: string, hosts: number): void {
  const dir = path.join(staticDir, META_DIR, HISTORY_DIR, ...historyDirOf(TAG));
  fs.mkdirSync(dir, { recursive: true });
  const lines: string[][] = Array.from({ length: hosts }, () => []);
  for (let k = 0; k < EVENTS; k++) lines[k % hosts].push(eventLine(k, `host${k % hosts}`));
  for (const [h, mine] of lines.entries()) {
    const text = mine.join('');
    const cut = text.length <= SEGMENT_BYTES ? text.length : text.lastIndexOf('\n', SEGMENT_BYTES) + 1;
    fs.writeFileSync(path.join(dir, historySegmentName(`host${h}`, 0)), text.slice(0, cut));
    if (cut < text.length) fs.writeFileSync(path.join(dir, historySegmentName(`host${h}`, 1)), text.slice(cut));
  }
}

/** Runs the built tool, with its peak resident memory in MiB. */
async function measured(staticDir: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string; maxRssMiB: number }> {
  const file = path.join(staticDir, '..', `maxrss.${process.hrtime.bigint()}`);
  const r = await cli(staticDir, args, { NODE_OPTIONS: `--require ${path.join(WORKERS, 'maxrss.js')}`, DSS_MAXRSS_FILE: file });
  const kib = Number(fs.readFileSync(file, 'utf8'));
  return { ...r, maxRssMiB: Math.round(kib / 1024) };
}

describe('sizes a co-user sets: no crash, bounded memory', function () {
  this.timeout(300_000);
  let root: string;
  let staticDir: string;
  beforeEach(() => {
    root = tempDir('dss-sizes-');
    staticDir = path.join(root, 'static');
    fs.mkdirSync(staticDir);
  });
  // rm(1), not fs.rmSync: Node's recursive removal overflows its own stack on the deep trees below.
  afterEach(() => assert.equal(spawnSync('rm', ['-rf', root]).status, 0));

  it('history of 200,000 events of one tag in 15 hosts\' full segments: all of them in order, and the newest 50', async () => {
    writeHistory(staticDir, 15);
    const small = tempDir('dss-sizes-small-');
    let baseline: number;
    try {
      // The same command on a history of one event: what the tool takes anyway.
      fs.mkdirSync(path.join(small, 'static'));
      const dir = path.join(small, 'static', META_DIR, HISTORY_DIR, ...historyDirOf(TAG));
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, historySegmentName('host0', 0)), eventLine(0, 'host0'));
      baseline = (await measured(path.join(small, 'static'), ['history', TAG, '--limit', '50'])).maxRssMiB;
    } finally {
      cleanup(small);
    }

    const text = await measured(staticDir, ['history', TAG]);
    assert.equal(text.code, 0, text.stderr);
    const rows = text.stdout.trimEnd().split('\n');
    assert.equal(rows.length, EVENTS + 1, 'a header and one row per event');
    assert.match(rows[1], /^2026-01-01T00:00:00Z\s+acquired\s+eve-release\/R120-15662\.0\.0\s+builder@host0:1000\s+fence 1$/);
    assert.match(rows[EVENTS], /fence 200000$/);

    const json = await measured(staticDir, ['--json', 'history', TAG]);
    assert.equal(json.code, 0, json.stderr);
    const fences = json.stdout.trimEnd().split('\n').map((l) => (JSON.parse(l) as { fence: number }).fence);
    assert.equal(fences.length, EVENTS);
    assert.ok(
      fences.every((f, i) => f === i + 1),
      'oldest first, every event once',
    );

    const limited = await measured(staticDir, ['--json', 'history', TAG, '--limit', '50']);
    assert.equal(limited.code, 0, limited.stderr);
    assert.deepEqual(
      limited.stdout.trimEnd().split('\n').map((l) => (JSON.parse(l) as { fence: number }).fence),
      Array.from({ length: 50 }, (_, i) => EVENTS - 49 + i),
    );
    report(`peak memory: ${baseline} MiB for one event; for 200,000: ${text.maxRssMiB} MiB (table), ${json.maxRssMiB} MiB (--json), ${limited.maxRssMiB} MiB (--limit 50)`);
    // The newest 50 cost what one event costs, give or take a segment read; all of them, their own size.
    assert.ok(limited.maxRssMiB < baseline + 40, `--limit 50 holds the newest 50, not 200,000: ${limited.maxRssMiB} MiB (one event: ${baseline} MiB)`);
    assert.ok(text.maxRssMiB < baseline + 300 && json.maxRssMiB < baseline + 300, `all 200,000 in bounded memory: ${text.maxRssMiB} and ${json.maxRssMiB} MiB`);
  });

  it('history --limit 50 of 200,000 events spread over 4,000 hosts\' segments: the newest 50, holding no more', async () => {
    writeHistory(staticDir, 4_000);
    const limited = await measured(staticDir, ['--json', 'history', TAG, '--limit', '50']);
    assert.equal(limited.code, 0, limited.stderr);
    assert.deepEqual(
      limited.stdout.trimEnd().split('\n').map((l) => (JSON.parse(l) as { fence: number }).fence),
      Array.from({ length: 50 }, (_, i) => EVENTS - 49 + i),
    );
    const all = await measured(staticDir, ['history', TAG]);
    assert.equal(all.code, 0, all.stderr);
    assert.equal(all.stdout.trimEnd().split('\n').length, EVENTS + 1);
    report(`4,000 segments: --limit 50 peaked at ${limited.maxRssMiB} MiB, all 200,000 at ${all.maxRssMiB} MiB`);
  });

  it('lock --wait in front of 200,000 stale tickets gets the lock and clears them', async () => {
    const tag = 'board/crowded';
    fs.mkdirSync(path.join(staticDir, tag), { recursive: true });
    const qdir = await queueDirOf(staticDir, tag);
    fs.mkdirSync(qdir, { recursive: true });
    const old = new Date(Date.now() - 3_600_000);
    // Waiters' records, last refreshed an hour ago, each under 50,000 numbers (hard links: made
    // in seconds, and each is a ticket all the same; ext4 allows 65,000 links to a file).
    for (let n = 1; n <= 200_000; n++) {
      const record = path.join(root, `ticket.${Math.floor((n - 1) / 50_000)}`);
      if ((n - 1) % 50_000 === 0) {
        fs.writeFileSync(record, `${JSON.stringify({ pid: 4242 + n, hostname: 'gone.example', user: 'builder', clientId: 'x', staleMs: 10_000, refreshMs: 2_500, queuedAt: old.toISOString() })}\n`);
        fs.utimesSync(record, old, old);
      }
      fs.linkSync(record, path.join(qdir, String(n).padStart(10, '0')));
    }
    const started = Date.now();
    const r = await measured(staticDir, ['lock', '--wait', '240', tag, '--', 'true']);
    assert.equal(r.code, 0, r.stderr);
    const left = fs.existsSync(qdir) ? fs.readdirSync(qdir).length : 0;
    assert.equal(left, 0, 'every stale ticket was removed');
    report(`200,000 stale tickets cleared by lock --wait in ${((Date.now() - started) / 1000).toFixed(1)} s, peak ${r.maxRssMiB} MiB`);
  });

  it('list of a folder of 160,000 directories prints them all', async () => {
    const board = path.join(staticDir, 'board');
    fs.mkdirSync(board);
    for (let i = 0; i < 160_000; i++) fs.mkdirSync(path.join(board, `R${i}`));
    const r = await cli(staticDir, ['list', 'board']);
    assert.equal(r.code, 0, r.stderr);
    const rows = r.stdout.trimEnd().split('\n');
    assert.equal(rows.length, 160_001, 'a header and one row per area');
    assert.match(rows[160_000], /^folder\s+board\/R159999$/);
  });

  /** Makes `top/d/d/…` `depth` levels deep, through descriptors (no path grows with it). */
  function deepTree(top: string, depth: number): void {
    let fd = fs.openSync(top, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
    for (let i = 0; i < depth; i++) {
      fs.mkdirSync(`/proc/self/fd/${fd}/d`);
      const next = fs.openSync(`/proc/self/fd/${fd}/d`, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
      fs.closeSync(fd);
      fd = next;
    }
    fs.writeFileSync(`/proc/self/fd/${fd}/bottom`, 'deep\n');
    fs.closeSync(fd);
  }

  it("a dead stager's litter 25,000 directories deep is cleared by the next holder", async function () {
    if (process.platform !== 'linux') this.skip();
    const tag = 'board/littered';
    fs.mkdirSync(path.join(staticDir, tag), { recursive: true });
    // Partial files of a stager of an earlier version, left in the area: the next holder clears them.
    const litter = path.join(staticDir, tag, '.devserver-staging.part.old');
    fs.mkdirSync(litter);
    deepTree(litter, 25_000);
    const locked = await cli(staticDir, ['lock', tag, '--', 'true']);
    assert.equal(locked.code, 0, locked.stderr);
    assert.equal(fs.existsSync(litter), false, 'the litter is gone');
  });

  it('a build holding a directory tree 25,000 levels deep is locked and destroyed', async function () {
    if (process.platform !== 'linux') this.skip();
    const tag = 'board/deep';
    fs.mkdirSync(path.join(staticDir, tag), { recursive: true });
    deepTree(path.join(staticDir, tag), 25_000);
    const locked = await cli(staticDir, ['lock', tag, '--', 'true']);
    assert.equal(locked.code, 0, locked.stderr);
    const destroyed = await cli(staticDir, ['destroy', tag]);
    assert.equal(destroyed.code, 0, destroyed.stderr);
    assert.equal(fs.existsSync(path.join(staticDir, tag)), false, 'the build is gone');
    const trash = path.join(staticDir, META_DIR, 'trash');
    assert.deepEqual(fs.existsSync(trash) ? fs.readdirSync(trash) : [], [], 'nothing left in the trash');
  });
});
