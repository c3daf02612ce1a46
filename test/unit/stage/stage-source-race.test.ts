/**
 * Sources changed under the stager by their owner. Root stages a directory that belongs to
 * `nobody`; `nobody` exchanges, in a tight loop (renameat2 RENAME_EXCHANGE), one of its files or
 * directories with a symbolic link to a root-only secret, or with a FIFO. The kernel is the
 * referee: after every run, every file staged anywhere in the static directory is read and must
 * not hold the secret; a run either stages the original content or fails with a coded error.
 */
import { strict as assert } from 'assert';
import { spawn, spawnSync, type ChildProcess } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { StagingError } from '../../../src/core/base/errors';
import { stage } from '../../../src/core/stage/stage';
import { cleanup, exitOf, isRoot, report, tempDir, WORKERS } from '../../helpers';

const TRIALS = 40;
/**
 * Stagings that must get through, and exchanges that must land while a staging runs (refused as
 * a changed source, ESOURCE), per race: a race short of either runs on, up to three times TRIALS.
 */
const MIN_STAGED = 3;
const MIN_CHANGED = 1;
/** racer A B COUNTFILE: exchanges A and B until SIGTERM, then writes how many exchanges it made to COUNTFILE. */
const RACER_C = `#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
static volatile sig_atomic_t stop = 0;
static void on_term(int s) { (void)s; stop = 1; }
int main(int argc, char **argv) {
  unsigned long n = 0;
  FILE *f;
  if (argc != 4) return 2;
  signal(SIGTERM, on_term);
  while (!stop)
    if (syscall(SYS_renameat2, AT_FDCWD, argv[1], AT_FDCWD, argv[2], 2 /* RENAME_EXCHANGE */) == 0) n++;
  f = fopen(argv[3], "w");
  if (f == NULL) return 1;
  fprintf(f, "%lu\\n", n);
  return fclose(f) == 0 ? 0 : 1;
}
`;
const RACER_PY = [
  'import ctypes, signal, sys',
  'f = ctypes.CDLL(None, use_errno=True).renameat2',
  'a, b = sys.argv[1].encode(), sys.argv[2].encode()',
  'stop, n = [], 0',
  'signal.signal(signal.SIGTERM, lambda *_: stop.append(1))',
  'while not stop:',
  '    if f(-100, a, -100, b, 2) == 0: n += 1',
  'open(sys.argv[3], "w").write("%d\\n" % n)',
  '',
].join('\n');

/** Where the tools are missing, why the suite cannot run; else undefined. */
function missing(): string | undefined {
  if (!isRoot) return 'staging as root from a directory of another user needs root';
  if (spawnSync('runuser', ['-u', 'nobody', '--', 'true']).status !== 0) return '`runuser -u nobody` does not work here';
  return undefined;
}

function idOf(flag: '-u' | '-g'): number {
  return Number(spawnSync('id', [flag, 'nobody'], { encoding: 'utf8' }).stdout.trim());
}

/** Every regular file below `dir` (links not followed), with its bytes. */
function filesBelow(dir: string): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  const walk = (d: string): void => {
    for (const ent of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, ent.name);
      if (ent.isDirectory()) walk(p);
      else if (ent.isFile()) out.set(p, fs.readFileSync(p));
    }
  };
  walk(dir);
  return out;
}

interface Outcome {
  /** Stagings run. */
  runs: number;
  /** Exchanges the racer made meanwhile. */
  swaps: number;
  ok: number;
  codes: Record<string, number>;
  leaks: number;
  wrong: number;
  hung: number;
  examples: string[];
}

describe('stage: sources changed by their owner while root stages them', function () {
  this.timeout(180_000);
  let box = '';
  let staticDir = '';
  let src = '';
  let user = '';
  let racerCmd: string[] = [];
  const secret = `TOP-SECRET-${crypto.randomBytes(16).toString('hex')}\n`;
  let uid = 0;
  let gid = 0;
  let racer: ChildProcess | undefined;
  let trial = 0;

  before(function () {
    const why = missing();
    if (why !== undefined) {
      report(`skipped: ${why}`);
      this.skip();
    }
    uid = idOf('-u');
    gid = idOf('-g');
    box = tempDir('dss-srcrace-');
    fs.chmodSync(box, 0o755);
    staticDir = path.join(box, 'static');
    fs.mkdirSync(staticDir);
    // Root's own: readable by root alone.
    fs.writeFileSync(path.join(box, 'secret'), secret, { mode: 0o600 });
    fs.mkdirSync(path.join(box, 'secretdir'), { mode: 0o700 });
    fs.writeFileSync(path.join(box, 'secretdir', 'inner.txt'), secret, { mode: 0o600 });
    // The user's: the source, and a directory of its own beside it for what it swaps in.
    src = path.join(box, 'src');
    user = path.join(box, 'user');
    for (const d of [src, user]) {
      fs.mkdirSync(d);
      fs.chownSync(d, uid, gid);
    }
    const c = path.join(box, 'racer.c');
    fs.writeFileSync(c, RACER_C);
    if (spawnSync('cc', ['-O2', '-o', path.join(box, 'racer'), c]).status === 0) racerCmd = [path.join(box, 'racer')];
    else if (spawnSync('/usr/bin/python3', ['-c', 'import ctypes; ctypes.CDLL(None).renameat2']).status === 0) racerCmd = ['/usr/bin/python3', '-c', RACER_PY];
    else {
      report('skipped: neither cc nor python3 with ctypes can call renameat2 here');
      this.skip();
    }
  });

  after(async () => {
    await stopRacer();
    if (box !== '') cleanup(box);
  });

  /** Lays out the source afresh: `data.txt` of `size` bytes, a few other files, `sub/inner.txt`. */
  function layout(size: number): Buffer {
    fs.rmSync(src, { recursive: true, force: true });
    fs.rmSync(user, { recursive: true, force: true });
    const data = Buffer.alloc(size, 'public data\n');
    const own = (p: string): void => fs.lchownSync(p, uid, gid);
    for (const d of [src, user, path.join(src, 'sub')]) {
      fs.mkdirSync(d);
      own(d);
    }
    const files: Record<string, Buffer | string> = { 'data.txt': data, 'a.txt': 'a\n', 'b.txt': 'b\n', 'sub/inner.txt': 'public inner\n' };
    for (const [name, content] of Object.entries(files)) {
      fs.writeFileSync(path.join(src, name), content);
      own(path.join(src, name));
    }
    fs.symlinkSync(path.join(box, 'secret'), path.join(user, 'to-secret'));
    fs.symlinkSync(path.join(box, 'secretdir'), path.join(user, 'to-secretdir'));
    spawnSync('mkfifo', [path.join(user, 'fifo')]);
    for (const n of ['to-secret', 'to-secretdir', 'fifo']) own(path.join(user, n));
    return data;
  }

  /** Starts `nobody` exchanging `a` and `b` in a tight loop; returns once both states were seen. */
  let counted = '';

  async function startRacer(a: string, b: string): Promise<void> {
    const before = fs.lstatSync(a).ino;
    counted = path.join(box, `racer-count-${trial}`);
    fs.writeFileSync(counted, '');
    fs.chownSync(counted, uid, gid);
    racer = spawn('runuser', ['-u', 'nobody', '--', ...racerCmd, a, b, counted], { detached: true, stdio: 'ignore' });
    const deadline = Date.now() + 10_000;
    const seen = new Set<boolean>();
    while (seen.size < 2) {
      assert.ok(Date.now() < deadline, `the racer never exchanged ${a} and ${b}`);
      seen.add(fs.lstatSync(a, { throwIfNoEntry: false })?.ino === before);
      await new Promise((r) => setImmediate(r));
    }
  }

  /** Stops the racer: how many exchanges it made. */
  async function stopRacer(): Promise<number> {
    const r = racer;
    racer = undefined;
    if (r?.pid === undefined) return 0;
    // The racer itself (runuser's child, in the same group): it writes its count and ends, and runuser with it.
    const children = fs.readFileSync(`/proc/${r.pid}/task/${r.pid}/children`, 'utf8').trim().split(/\s+/).filter((p) => p !== '');
    for (const pid of children.length > 0 ? children : [String(r.pid)]) {
      try {
        process.kill(Number(pid), 'SIGTERM');
      } catch {
        /* gone already */
      }
    }
    const kill = setTimeout(() => {
      try {
        process.kill(-r.pid!, 'SIGKILL');
      } catch {
        /* gone already */
      }
    }, 5_000);
    await exitOf(r);
    clearTimeout(kill);
    return Number(fs.readFileSync(counted, 'utf8').trim()) || 0;
  }

  function tally(o: Outcome, result: { ok: true } | { ok: false; code: string; message: string }, expected: Buffer, tag: string): void {
    const leaked = [...filesBelow(staticDir)].filter(([, bytes]) => bytes.includes(secret));
    if (leaked.length > 0) {
      o.leaks++;
      if (o.examples.length < 3) o.examples.push(`secret staged as ${leaked.map(([p]) => path.relative(staticDir, p)).join(', ')}`);
    }
    if (result.ok) {
      o.ok++;
      const staged = fs.readFileSync(path.join(staticDir, tag, 'data.txt'));
      if (!staged.equals(expected)) o.wrong++;
    } else {
      o.codes[result.code] = (o.codes[result.code] ?? 0) + 1;
      // Refusals name what they refuse: a file or directory of the source.
      if (!result.message.includes(src)) o.wrong++;
      if (o.examples.length === 0 && result.code === 'ESOURCE') o.examples.push(`${result.code}: ${result.message}`);
    }
    // Leave nothing for the next run to be blamed for.
    fs.rmSync(path.join(staticDir, 'race'), { recursive: true, force: true });
  }

  /** Whether a race has what it must to mean something (see MIN_STAGED). */
  const enough = (o: Outcome): boolean => o.ok >= MIN_STAGED && (o.codes.ESOURCE ?? 0) >= MIN_CHANGED;

  /** TRIALS in-process stagings of the source while `a` and `b` are exchanged (more, up to three times as many, until `enough`). */
  async function race(a: string, b: string, expected: Buffer): Promise<Outcome> {
    const o: Outcome = { runs: 0, swaps: 0, ok: 0, codes: {}, leaks: 0, wrong: 0, hung: 0, examples: [] };
    await startRacer(a, b);
    try {
      for (let i = 0; i < TRIALS || (!enough(o) && i < 3 * TRIALS); i++, o.runs++) {
        const tag = `race/t${trial++}`;
        try {
          await stage(staticDir, tag, [src]);
          tally(o, { ok: true }, expected, tag);
        } catch (err) {
          assert.ok(err instanceof StagingError, `expected a StagingError, got ${String(err)}`);
          tally(o, { ok: false, code: err.code, message: err.message }, expected, tag);
        }
      }
    } finally {
      o.swaps = await stopRacer();
    }
    return o;
  }

  function verdict(what: string, o: Outcome, allowed: readonly string[]): void {
    report(`${what}: ${o.runs} runs, ${o.swaps} exchanges: ${o.ok} staged, ${JSON.stringify(o.codes)} refused, ${o.leaks} leaked the secret, ${o.hung} hung, ${o.wrong} wrong`);
    for (const ex of o.examples) report(`  e.g. ${ex}`);
    assert.equal(o.leaks, 0, `${what}: the secret was staged in ${o.leaks} of ${o.runs} runs`);
    assert.equal(o.hung, 0, `${what}: ${o.hung} runs hung`);
    assert.equal(o.wrong, 0, `${what}: ${o.wrong} runs staged content other than the source's, or failed without naming it`);
    for (const code of Object.keys(o.codes)) assert.ok(allowed.includes(code), `${what}: unexpected ${code}`);
    assert.ok(o.runs >= TRIALS, `${what}: only ${o.runs} of ${TRIALS} runs ran`);
    assert.ok(o.swaps > 0, `${what}: the racer made no exchange`);
    assert.ok(o.ok >= MIN_STAGED, `${what}: only ${o.ok} of ${o.runs} runs staged (at least ${MIN_STAGED} must, or the race proves little)`);
    assert.ok((o.codes.ESOURCE ?? 0) >= MIN_CHANGED, `${what}: no exchange landed while a staging ran (no ESOURCE in ${o.runs} runs)`);
  }

  // The link the walk may see itself is refused by the area's link rules (EUNSAFE); a link or
  // anything else swapped in after the walk looked must fail as a changed source (ESOURCE).
  for (const [label, size] of [
    ['a small file', 12],
    ['a mid-size file (kernel copy)', 2 * 1024 * 1024],
    ['a large file (chunked copy)', 17 * 1024 * 1024],
  ] as const) {
    it(`${label} exchanged with a link to a root-only file: the secret is never staged`, async () => {
      const data = layout(size);
      const o = await race(path.join(src, 'data.txt'), path.join(user, 'to-secret'), data);
      verdict(`${label} <-> link to secret`, o, ['ESOURCE', 'EUNSAFE']);
    });
  }

  it('a directory exchanged with a link to a root-only directory: nothing in it is staged', async () => {
    const data = layout(12);
    const o = await race(path.join(src, 'sub'), path.join(user, 'to-secretdir'), data);
    verdict('sub/ <-> link to secret dir', o, ['ESOURCE', 'EUNSAFE']);
  });

  /** One staging in its own process, killed if it has not finished within `ms`. */
  function stageInChild(tag: string, ms: number): Promise<{ ok: true } | { ok: false; code: string; message: string } | 'hung'> {
    return new Promise((resolve) => {
      const child = spawn(process.execPath, [path.join(WORKERS, 'stage.js'), JSON.stringify({ staticDir, tag, sources: [src] })], { stdio: ['ignore', 'pipe', 'ignore'] });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), ms);
      child.once('close', (_code, signal) => {
        clearTimeout(timer);
        if (signal === 'SIGKILL') return resolve('hung');
        const r = JSON.parse(out) as { ok: boolean; code?: string; message?: string };
        resolve(r.ok ? { ok: true } : { ok: false, code: r.code ?? '?', message: r.message ?? '' });
      });
    });
  }

  it('a FIFO in the source, or exchanged with a file while it is staged, never hangs the stager', async function () {
    const data = layout(12);
    // Placed there: refused as a special file.
    fs.renameSync(path.join(user, 'fifo'), path.join(src, 'fifo'));
    const placed = await stageInChild('race/fifo', 20_000);
    assert.notEqual(placed, 'hung', 'a FIFO in the source hung the stager');
    assert.ok(placed !== 'hung' && !placed.ok && placed.code === 'EUNSAFE', `a FIFO in the source: ${JSON.stringify(placed)}`);
    fs.renameSync(path.join(src, 'fifo'), path.join(user, 'fifo'));
    // Swapped in for a file, between the walk and the copy.
    const o: Outcome = { runs: 0, swaps: 0, ok: 0, codes: {}, leaks: 0, wrong: 0, hung: 0, examples: [] };
    await startRacer(path.join(src, 'data.txt'), path.join(user, 'fifo'));
    try {
      for (let i = 0; (i < TRIALS || (!enough(o) && i < 3 * TRIALS)) && o.hung === 0; i++, o.runs++) {
        const tag = `race/t${trial++}`;
        const r = await stageInChild(tag, 20_000);
        if (r === 'hung') o.hung++;
        else tally(o, r, data, tag);
      }
    } finally {
      o.swaps = await stopRacer();
    }
    verdict('data.txt <-> FIFO', o, ['ESOURCE', 'EUNSAFE']);
  });
});
