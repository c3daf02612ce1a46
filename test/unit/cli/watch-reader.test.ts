/**
 * `devserver-stage watch` and whoever reads it. A reader that stops reading while a co-user turns
 * locks over as fast as the disk allows, with holder records made large (a 4,000-byte hostname),
 * must not make the process grow: the lines it cannot write are coalesced, one per build, and said
 * so once the reader is back. A reader that goes away (`| head -1`) ends it, exit 0, whether the
 * directory is busy (the next write fails with EPIPE) or quiet (nothing more would be written).
 */
import { strict as assert } from 'assert';
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { WatchQueue, type LineSink, type WatchLine } from '../../../src/cli/watchLines';
import { LOCK_NAME, OWNER_FILE, TIMESTAMP_FILE } from '../../../src/core/base/protocol';
import { TOOL, cleanup, exitOf, report, tempDir, waitFor } from '../../helpers';


const BUILDS = 50;
const STOPPED_MS = 30_000;
/**
 * The most a watch of these 50 builds may hold, whatever its reader does. It starts at about
 * 50 MB (Node, the command's bundle, the model of the directory with its inotify watches). What
 * coalescing keeps is at most one waiting line per build (50 x 4 KB), beside the pipe's 64 KB and
 * the stream's high-water mark of 16 KB: nothing that grows with time. The rest is the garbage of
 * judging thousands of locks a second, which V8 lets reach a plateau before it collects: measured
 * at 92 to 99 MB, the same after 30 s and after 90 s of churn (up to 3,600 lock changes a second).
 * 128 MB leaves room above that plateau; writing every line to a reader that does not read, the
 * tool passed 220 MB within these 30 s, and grows for as long as it runs.
 */
const MAX_RSS_KB = 128 * 1024;

/** Locks taken and let go in every build, by another host's holder with a large record, until `secs` are over; prints how many. */
const CHURN = `
const fs = require('fs');
const [board, n, secs] = [process.argv[1], Number(process.argv[2]), Number(process.argv[3])];
const end = Date.now() + secs * 1000;
const hostname = 'h'.repeat(4000);
let i = 0;
while (Date.now() < end) {
  for (let b = 0; b < n; b++) {
    const area = board + '/R' + b;
    fs.mkdirSync(area + '/${LOCK_NAME}.new.churn');
    fs.writeFileSync(area + '/${LOCK_NAME}.new.churn/${OWNER_FILE}', JSON.stringify({ pid: 100000 + i, hostname, user: 'mallory', clientId: 'c' + i, acquiredAt: '2024-01-01T00:00:00Z', token: 't' + i, staleMs: 3600000, refreshMs: 1000 }));
    fs.renameSync(area + '/${LOCK_NAME}.new.churn', area + '/${LOCK_NAME}');
    i++;
  }
  for (let b = 0; b < n; b++) {
    const area = board + '/R' + b;
    fs.renameSync(area + '/${LOCK_NAME}', area + '/${LOCK_NAME}.trash.churn');
    fs.unlinkSync(area + '/${LOCK_NAME}.trash.churn/${OWNER_FILE}');
    fs.rmdirSync(area + '/${LOCK_NAME}.trash.churn');
  }
}
process.stdout.write(String(i));
`;

function rssKb(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  assert.ok(m !== null);
  return Number(m[1]);
}

describe('watch and its reader', function () {
  this.timeout(180_000);
  let root: string;
  let staticDir: string;

  beforeEach(() => {
    root = tempDir('dss-watch-reader-');
    staticDir = path.join(root, 'static');
    fs.mkdirSync(staticDir);
  });
  afterEach(() => cleanup(root));

  it('a reader that stops for 30 s: memory stays under a fixed bound, then a line says how many updates were coalesced and each build ends in its latest state', async () => {
    const board = path.join(staticDir, 'board');
    for (let b = 0; b < BUILDS; b++) {
      fs.mkdirSync(path.join(board, `R${b}`), { recursive: true });
      fs.writeFileSync(path.join(board, `R${b}`, TIMESTAMP_FILE), '');
    }
    const watch = spawn(process.execPath, [TOOL, '--json', 'watch'], { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir }, stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = exitOf(watch);
    let text = '';
    watch.stdout.setEncoding('utf8');
    watch.stdout.on('data', (s: string) => (text += s));
    try {
      await waitFor(() => (text.split('\n').length > BUILDS ? true : undefined), 20_000, 'the snapshot');
      // The reader stops: what is in the pipe stays there, and the pipe fills.
      watch.stdout.pause();
      const startKb = rssKb(watch.pid!);
      const churn = spawn(process.execPath, ['-e', CHURN, board, String(BUILDS), String(STOPPED_MS / 1000)], { stdio: ['ignore', 'pipe', 'inherit'] });
      let changes = '';
      churn.stdout.on('data', (b: Buffer) => (changes += b.toString()));
      const churned = exitOf(churn);
      let peakKb = startKb;
      let samples = 0;
      const sampler = setInterval(() => {
        peakKb = Math.max(peakKb, rssKb(watch.pid!));
        samples++;
      }, 250);
      try {
        assert.equal((await churned).code, 0);
      } finally {
        clearInterval(sampler);
      }
      peakKb = Math.max(peakKb, rssKb(watch.pid!));
      report(`watch with a stopped reader: ${Number(changes)} locks taken and let go in ${STOPPED_MS / 1000} s; VmRSS ${Math.round(startKb / 1024)} MB at the start, ${Math.round(peakKb / 1024)} MB at most over ${samples} samples (bound ${MAX_RSS_KB / 1024} MB)`);
      assert.ok(Number(changes) >= 1_000, `only ${changes} lock changes were made`);
      assert.ok(samples >= 60, `${samples} samples`);
      assert.ok(peakKb <= MAX_RSS_KB, `VmRSS reached ${peakKb} kB, past the bound of ${MAX_RSS_KB} kB`);
      // The reader is back: first a line that says how much was coalesced, then the latest states.
      const readFrom = text.length;
      watch.stdout.resume();
      const latest = await waitFor(
        () => {
          const events = text
            .slice(readFrom)
            .split('\n')
            .filter((l) => l !== '')
            .map((l) => JSON.parse(l) as { event: string; tag?: string; state?: string; count?: number });
          const states = new Map<string, string | undefined>();
          for (const e of events) if (e.tag !== undefined) states.set(e.tag, e.state);
          const coalesced = events.filter((e) => e.event === 'coalesced');
          const settled = states.size > 0 && [...Array(BUILDS).keys()].every((b) => (states.get(`board/R${b}`) ?? 'free') === 'free');
          return coalesced.length > 0 && settled ? { coalesced, events } : undefined;
        },
        60_000,
        'a coalesced line and every build free again',
      );
      const count = latest.coalesced.reduce((n, e) => n + (e.count ?? 0), 0);
      report(`${count} updates coalesced into ${latest.events.length} lines`);
      assert.ok(count > 0);
    } finally {
      watch.kill('SIGINT');
    }
    assert.equal((await exited).code, 130);
  });

  for (const [what, builds] of [
    ['a quiet directory: nothing more would be written', 1],
    ['a busy one: the next write fails with EPIPE', 3_000],
  ] as const) {
    it(`watch --json | head -1 ends with status 0, in ${what}`, async () => {
      for (let b = 0; b < builds; b++) {
        fs.mkdirSync(path.join(staticDir, 'board', `R${b}`), { recursive: true });
        fs.writeFileSync(path.join(staticDir, 'board', `R${b}`, TIMESTAMP_FILE), '');
      }
      const shell = spawn('bash', ['-c', `set -o pipefail; "${process.execPath}" "${TOOL}" --json watch | head -1`], {
        env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir },
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      });
      let out = '';
      let err = '';
      shell.stdout.on('data', (b: Buffer) => (out += b.toString()));
      shell.stderr.on('data', (b: Buffer) => (err += b.toString()));
      const ended = exitOf(shell);
      // Not a timing assertion: a pipeline that never ends is stopped here so that the test fails rather than hangs.
      let stopped = false;
      const guard = setTimeout(() => {
        stopped = true;
        process.kill(-shell.pid!, 'SIGKILL');
      }, 30_000);
      const { code } = await ended;
      clearTimeout(guard);
      assert.ok(!stopped, `the pipeline did not end by itself; it wrote ${JSON.stringify(out)}`);
      assert.equal(code, 0, err);
      assert.equal(out.split('\n').filter((l) => l !== '').length, 1);
      assert.equal((JSON.parse(out) as { event: string }).event, 'snapshot');
      assert.equal(err, '');
    });
  }
});

describe('watch: the queue of lines for a reader that falls behind', () => {
  /** A reader that takes one write, then is behind until told to catch up. */
  function reader(): { sink: LineSink; written: WatchLine[]; catchUp(): void } {
    const written: WatchLine[] = [];
    let drain: (() => void) | undefined;
    return {
      written,
      sink: {
        write: (text) => (written.push(JSON.parse(text) as WatchLine), false),
        once: (_event, listener) => (drain = listener),
      },
      catchUp: () => drain?.(),
    };
  }
  const line = (tag: string, event: WatchLine['event'], state?: string): WatchLine => ({ time: '2024-01-01T00:00:00.000Z', event, tag, ...(state !== undefined ? { state } : {}) });

  it('keeps the latest line of each build while the reader is behind, then says how many it coalesced', () => {
    const r = reader();
    const q = new WatchQueue(r.sink, true);
    q.put(line('b/R1', 'snapshot', 'free'));
    // Behind from here: the rest waits.
    q.put(line('b/R2', 'snapshot', 'free'));
    q.put(line('b/R2', 'change', 'held'));
    q.put(line('b/R1', 'change', 'held'));
    q.put(line('b/R1', 'change', 'free'));
    // A build the reader never heard of, come and gone: nothing to say.
    q.put(line('b/R3', 'change', 'held'));
    q.put(line('b/R3', 'gone'));
    assert.equal(r.written.length, 1);
    r.catchUp();
    r.catchUp();
    r.catchUp();
    assert.deepEqual(
      r.written.map((l) => `${l.event} ${l.tag ?? l.count} ${l.state ?? ''}`.trim()),
      ['snapshot b/R1 free', 'coalesced 3', 'snapshot b/R2 held', 'change b/R1 free'],
    );
  });
});
