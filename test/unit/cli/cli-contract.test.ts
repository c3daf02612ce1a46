/**
 * What scripts rely on from the built tool: a closed stdout ends it quietly, every error is one
 * JSON object with --json, a signal while waiting for a lock gives 128 + that signal.
 */
import { strict as assert } from 'assert';
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { FENCE_FILE } from '../../../src/core/base/protocol';
import { acquire } from '../../../src/core/lock/lock';
import { inspect } from '../../../src/core/lock/inspect';
import { CLI, catchesSignal, cleanup, cli, run, tempDir, waitFor } from '../../helpers';

const PYTHON = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

/**
 * Runs the tool with its stdout on a pipe whose reading end is closed before the tool starts:
 * every write to it fails with EPIPE, whatever the timing.
 */
function withClosedStdout(staticDir: string, args: readonly string[], stderrToo = false): ReturnType<typeof run> {
  const script = [
    'import os, subprocess, sys',
    'r, w = os.pipe()',
    'os.close(r)',
    `p = subprocess.run(sys.argv[1:], stdout=w, stderr=${stderrToo ? 'w' : 'subprocess.PIPE'})`,
    'sys.stderr.buffer.write(p.stderr or b"")',
    'sys.exit(p.returncode if p.returncode >= 0 else 128 - p.returncode)',
  ].join('\n');
  return run(PYTHON, ['-c', script, process.execPath, CLI, ...args], { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir } });
}

describe('devserver-stage as scripts use it', () => {
  let root: string;
  let staticDir: string;

  beforeEach(() => {
    root = tempDir('dss-cli-contract-');
    staticDir = path.join(root, 'static');
    fs.mkdirSync(staticDir);
  });
  afterEach(() => cleanup(root));

  describe('a closed stdout', () => {
    it('list piped into `head -c 10` (far more output than the pipe holds) ends quietly with 0', async () => {
      // About 400 KB of output: the tool is still writing when head has gone.
      for (let i = 0; i < 2000; i++) fs.mkdirSync(path.join(staticDir, `board-${String(i).padStart(4, '0')}-${'x'.repeat(180)}`));
      const r = await run('bash', ['-c', `set -o pipefail; "${process.execPath}" "${CLI}" list | head -c 10 >/dev/null`], {
        env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir },
      });
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stderr, '');
    });

    it('list, status --json, du and stage with no reader at all: no stack trace, the usual status', async () => {
      const src = path.join(root, 'artifact.bin');
      fs.writeFileSync(src, 'artifact\n');
      const staged = await withClosedStdout(staticDir, ['stage', 'eve/R1', src]);
      assert.equal(staged.code, 0, staged.stderr);
      assert.ok(fs.existsSync(path.join(staticDir, 'eve/R1/artifact.bin')), 'staging went to its end');
      for (const args of [['list'], ['--json', 'status', 'eve/R1'], ['du'], ['--json', 'du']]) {
        const r = await withClosedStdout(staticDir, args);
        assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
        assert.equal(r.stderr, '', args.join(' '));
      }
      // The status of a command that fails is kept.
      const failed = await withClosedStdout(staticDir, ['status', '../up']);
      assert.equal(failed.code, 2);
      assert.match(failed.stderr, /Invalid tag/);
      assert.doesNotMatch(failed.stderr, /EPIPE|at /);
      // stderr gone as well: the error cannot be shown, the status still says it.
      assert.equal((await withClosedStdout(staticDir, ['status', '../up'], true)).code, 2);
      assert.equal((await withClosedStdout(staticDir, ['--json', 'list'], true)).code, 0);
    });

    it('a stdout left non-blocking by whoever opened it, read slower than the tool writes: all of it arrives, in order, exit 0', async () => {
      // About 240 KB, far more than the pipe holds: the tool meets a full pipe it may not wait on.
      for (let i = 0; i < 2000; i++) fs.mkdirSync(path.join(staticDir, `board-${String(i).padStart(4, '0')}-${'x'.repeat(100)}`));
      const script = [
        'import os, subprocess, sys, time',
        'r, w = os.pipe()',
        'os.set_blocking(w, False)',
        'p = subprocess.Popen(sys.argv[1:], stdout=w, stderr=subprocess.PIPE)',
        'os.close(w)',
        'time.sleep(1)',
        'out = b""',
        'while True:',
        '    chunk = os.read(r, 65536)',
        '    if not chunk: break',
        '    out += chunk',
        'sys.stdout.buffer.write(out)',
        'sys.stderr.buffer.write(p.stderr.read())',
        'sys.exit(p.wait())',
      ].join('\n');
      const env = { ...process.env, DEVSERVER_STATIC_DIR: staticDir };
      const slow = await run(PYTHON, ['-c', script, process.execPath, CLI, 'list'], { env });
      assert.equal(slow.code, 0, slow.stderr);
      assert.equal(slow.stderr, '');
      const plain = await cli(staticDir, ['list']);
      assert.equal(plain.code, 0, plain.stderr);
      assert.ok(plain.stdout.length > 200_000, `${plain.stdout.length} bytes`);
      assert.equal(slow.stdout, plain.stdout);
    });

    it('a write error other than a gone reader (a full disk) is an error, exit 1', async function () {
      if (!fs.existsSync('/dev/full')) this.skip();
      const r = await run('sh', ['-c', `"${process.execPath}" "${CLI}" list >/dev/full`], { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir } });
      assert.equal(r.code, 1);
      assert.match(r.stderr, /could not write the output: ENOSPC/);
    });
  });

  it('with --json every error is one JSON object on stderr, usage errors included; without it, text as before', async () => {
    fs.mkdirSync(path.join(staticDir, 'free'));
    const cases: [string[], string, RegExp][] = [
      [['--json', 'frobnicate'], 'EUSAGE', /unknown command 'frobnicate'/],
      [['--json', 'list', '--bogus'], 'EUSAGE', /unknown option '--bogus'/],
      [['list', '--bogus', '--json'], 'EUSAGE', /unknown option '--bogus'/],
      [['--json', 'status'], 'EUSAGE', /missing required argument 'tag'/],
      [['--json', '--stale', 'soon', 'list'], 'EUSAGE', /argument 'soon' is invalid/],
      [['--json', 'prune', '--keep', 'many'], 'EUSAGE', /argument 'many' is invalid/],
      [['--json', 'prune'], 'EUSAGE', /prune needs --keep N or --older-than/],
      [['--json', 'stage', 'eve/R1', path.join(root, 'x'), '--max-size', 'lots'], 'EUSAGE', /argument 'lots' is invalid/],
      [['--json', 'lock', 'eve/R1'], 'EUSAGE', /missing required argument 'command'/],
      [['--json', 'status', '../etc'], 'EBADTAG', /Invalid tag/],
      [['--json', 'force-release', 'free'], 'ENOTHELD', /./],
    ];
    for (const [args, code, message] of cases) {
      const r = await cli(staticDir, args);
      const what = args.join(' ');
      assert.equal(r.code, code === 'ENOTHELD' ? 1 : 2, `${what}: ${r.stderr}`);
      assert.equal(r.stdout, '', what);
      const lines = r.stderr.trimEnd().split('\n');
      assert.equal(lines.length, 1, `${what}: one line: ${r.stderr}`);
      const body = JSON.parse(lines[0]) as { error: { code: string; message: string } };
      assert.deepEqual(Object.keys(body), ['error'], what);
      assert.equal(body.error.code, code, what);
      assert.match(body.error.message, message, what);
      assert.doesNotMatch(body.error.message, /^error:/, what);
    }
    // `--json` after `--` belongs to the command, not to the tool.
    const plain = await cli(staticDir, ['frobnicate', '--', '--json']);
    assert.equal(plain.code, 2);
    assert.match(plain.stderr, /^error: unknown command 'frobnicate'\n\(run with --help for usage\)/);
    const text = await cli(staticDir, ['list', '--bogus']);
    assert.equal(text.code, 2);
    assert.match(text.stderr, /^error: unknown option '--bogus'/);
  });

  it('a signal while waiting for a lock exits 128 + the signal (143 SIGTERM, 129 SIGHUP, 130 SIGINT), for lock and stage', async () => {
    const lease = await acquire(staticDir, 'busy', { purpose: 'held by the test' });
    const src = path.join(root, 'artifact.bin');
    fs.writeFileSync(src, 'artifact\n');
    try {
      const runs = (['SIGTERM', 'SIGHUP', 'SIGINT'] as const).flatMap((signal) =>
        [
          ['lock', '--wait', '60', 'busy', '--', 'true'],
          ['stage', '--add', '--wait', '60', 'busy', src],
          ['--json', 'lock', '--wait', '60', 'busy', '--', 'true'],
        ].map((args) => {
          const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir }, stdio: ['ignore', 'pipe', 'pipe'] });
          let stderr = '';
          child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
          child.stdout.resume();
          const exit = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
          return { signal, args, child, exit, stderr: () => stderr };
        }),
      );
      for (const r of runs) {
        // The kernel says when the tool has its handlers: it is waiting, or about to.
        await waitFor(() => (catchesSignal(r.child.pid!, 'SIGHUP') ? true : undefined), 30_000, `${r.args.join(' ')} waiting`);
        r.child.kill(r.signal);
      }
      const expected = { SIGTERM: 143, SIGHUP: 129, SIGINT: 130 };
      for (const r of runs) {
        const what = `${r.signal} to ${r.args.join(' ')}`;
        assert.equal(await r.exit, expected[r.signal], `${what}: ${r.stderr()}`);
        if (r.args[0] === '--json') {
          const body = JSON.parse(r.stderr().trimEnd()) as { error: { code: string; message: string } };
          assert.equal(body.error.code, 'ECANCELED', what);
          assert.match(body.error.message, /Stopped waiting for the lock/, what);
        } else {
          assert.match(r.stderr(), /Stopped waiting for the lock/, what);
        }
      }
      assert.equal((await inspect(staticDir, 'busy')).holder?.token, lease.holder.token, 'the lock is still the test’s');
      assert.deepEqual(fs.readdirSync(path.join(staticDir, 'busy')).filter((n) => n !== 'devserver.lock' && n !== FENCE_FILE), [], 'nothing staged');
    } finally {
      await lease.release();
    }
  });
});
