/**
 * What a hostile co-user, or bad luck, can do to the readers of a build: `verify` (and
 * `devserver-stage verify`), the extension's model of the static directory (src/extension/model/), and the
 * Markdown the details page and tooltips render from names on disk.
 *
 * The kernel is the referee: a file made a sparse terabyte by a co-user while it is read (a small
 * C helper woken by inotify when the reader first reads), directories exchanged with links to
 * outside with renameat2(RENAME_EXCHANGE) in a tight loop (`exchanger` in test/attack.ts) while
 * verify and the model read them,
 * outside copies that match the manifest exactly (so that reading them would pass as whole),
 * FIFOs and a device where files and marks go, a second real user (`runuser -u nobody`), names that
 * are not UTF-8 or hold escape sequences, and manifests written by hand to hurt.
 */
import { strict as assert } from 'assert';
import { spawn, spawnSync, type ChildProcess } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { formatProblem } from '../../../src/cli/verifyCommand';
import { readBuildArtifacts, readBuildDir } from '../../../src/core/build/browse';
import { inspect, list } from '../../../src/core/lock/inspect';
import { stage } from '../../../src/core/stage/stage';
import { MANIFEST_FILE, TIMESTAMP_FILE } from '../../../src/core/stage/types';
import { verify, type VerifyResult } from '../../../src/core/verify';
import { codeSpan, literal } from '../../../src/extension/markdown';
import { LockStates } from '../../../src/core';
import { changes, cliTimed, exchanger, fingerprint, hasTool, helperCommand } from '../../attack';
import { cleanup, isRoot, rejectsWith, report, run, tempDir } from '../../helpers';

const timing = { staleMs: 4_000, refreshMs: 1_000 };
const quiet = { warn: (): void => undefined };
const TIB = 2 ** 40;

/** The problems as `kind path` lines. */
const brief = (r: VerifyResult): string[] => r.problems.map((p) => `${p.kind} ${p.path}`);

/** grow FILE SIZE: test/workers/grow.ts in C, for where koffi cannot be loaded. */
const GROWER_C = `
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv) {
  struct stat st;
  char buf[4096];
  sigset_t set;
  int sig, fd, in;
  if (argc < 3) return 2;
  fd = open(argv[1], O_WRONLY);
  if (fd < 0 || fstat(fd, &st) != 0) return 1;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigprocmask(SIG_BLOCK, &set, NULL);
  in = inotify_init();
  inotify_add_watch(in, argv[1], IN_ACCESS);
  printf("ready\\n");
  fflush(stdout);
  if (read(in, buf, sizeof buf) <= 0) return 1;
  ftruncate(fd, atoll(argv[2]));
  printf("grown\\n");
  fflush(stdout);
  sigwait(&set, &sig);
  ftruncate(fd, st.st_size);
  return 0;
}
`;

/** A line from the child's stdout. */
function line(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    child.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim()));
    child.once('error', reject);
  });
}

/** A helper process, its output and its end watched from the start: one that ends early is still seen to end. */
interface Helper {
  child: ChildProcess;
  ended: Promise<string>;
  output(): string;
}

function startHelper(cmd: string[], args: string[]): Helper {
  const child = spawn(cmd[0], [...cmd.slice(1), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const ended = new Promise<string>((resolve) => child.once('close', (code, signal) => resolve(`exit ${code ?? signal}${err === '' ? '' : `: ${err.trim()}`}`)));
  return { child, ended, output: () => out.trim() };
}

/** Stops a helper with SIGTERM (SIGKILL 2 s later) and hands back what it printed (the swapper's count). */
async function stop(h: Helper): Promise<string> {
  h.child.kill('SIGTERM');
  const kill = setTimeout(() => h.child.kill('SIGKILL'), 2_000);
  await h.ended;
  clearTimeout(kill);
  return h.output();
}

/** The longest time the event loop went without running a timer while `fn` ran. */
async function longestStall<T>(fn: () => Promise<T>): Promise<{ value: T; stallMs: number }> {
  let last = performance.now();
  let stallMs = 0;
  const tick = setInterval(() => {
    const now = performance.now();
    stallMs = Math.max(stallMs, now - last);
    last = now;
  }, 5);
  try {
    const value = await fn();
    // A stall that ends with `fn` is seen by the next tick only.
    await new Promise((r) => setTimeout(r, 15));
    return { value, stallMs };
  } finally {
    clearInterval(tick);
  }
}

describe('attack: the readers of a build (verify, the model, the details page)', function () {
  this.timeout(60_000);
  let root: string;
  let staticDir: string;
  let src: string;
  let outside: string;
  let bin: string;
  /** The helpers' commands (renameat2 in a loop; a file grown when read), or why there are none. */
  let swapper: string[] | string;
  let grower: string[] | string;

  before(() => {
    bin = tempDir('dss-attack-view-bin-');
    swapper = exchanger(bin);
    grower = helperCommand('grow', GROWER_C, bin);
  });

  /** The helper's command; a test that needs one that cannot be had here is skipped, saying why. */
  function need(helper: string[] | string, ctx: Mocha.Context): string[] {
    if (typeof helper !== 'string') return helper;
    console.log(`      skipped: ${helper}`);
    return ctx.skip();
  }
  after(() => cleanup(bin));

  beforeEach(async () => {
    root = tempDir('dss-attack-view-');
    fs.chmodSync(root, 0o755);
    staticDir = path.join(root, 'static');
    src = path.join(root, 'src');
    outside = path.join(root, 'outside');
    fs.mkdirSync(staticDir);
    fs.mkdirSync(path.join(src, 'sub'), { recursive: true });
    fs.writeFileSync(path.join(src, 'small.bin'), crypto.randomBytes(900_000));
    fs.writeFileSync(path.join(src, 'large.bin'), crypto.randomBytes(3 * 1024 * 1024));
    for (let i = 0; i < 8; i++) fs.writeFileSync(path.join(src, 'sub', `f${i}.bin`), crypto.randomBytes(4096));
    await stage(staticDir, 'eve/R1', [src]);
  });
  afterEach(() => cleanup(root));

  const area = (): string => path.join(staticDir, 'eve', 'R1');

  /**
   * Runs `step` again and again for `ms` while `a` and `b` are exchanged (renameat2) in a tight
   * loop, and leaves both as they were; how many exchanges and runs there were.
   */
  async function duringExchanges(a: string, b: string, ms: number, step: () => Promise<void>): Promise<{ swaps: string; runs: number }> {
    const s = startHelper(swapper as string[], [a, b]);
    let early: string | undefined;
    void s.ended.then((how) => (early ??= how));
    let runs = 0;
    try {
      for (const until = Date.now() + ms; Date.now() < until && early === undefined; runs++) await step();
    } catch (err) {
      await stop(s);
      throw err;
    }
    // A swapper that ended before it was told to made no attack to speak of.
    assert.equal(early, undefined, `the swapper ended on its own: ${early}`);
    const swaps = await stop(s);
    assert.ok(Number(swaps) > 0, `the names were exchanged (the swapper says ${JSON.stringify(swaps)})`);
    return { swaps, runs };
  }

  describe('verify', () => {
    it('a file a co-user makes a sparse terabyte while it is read is grown at once: never read on, the event loop never held', async function () {
      const grow = need(grower, this);
      const seen: string[] = [];
      // The small file is hashed on the main thread, the large one in a worker thread.
      for (const name of ['small.bin', 'large.bin']) {
        const size = fs.statSync(path.join(area(), name)).size;
        let grown = 0;
        for (let attempt = 0; attempt < 4 && grown < 2; attempt++) {
          const g = startHelper(grow, [path.join(area(), name), String(TIB)]);
          assert.equal(await line(g.child), 'ready');
          const t0 = Date.now();
          const { value: r, stallMs } = await longestStall(() => verify(staticDir, 'eve/R1')).finally(() => stop(g));
          const ms = Date.now() - t0;
          const p = r.problems.find((x) => x.path === name);
          if (p !== undefined) grown++;
          seen.push(`${name}: ${p === undefined ? 'read before it grew' : `${p.kind}, now ${p.actual?.size} bytes`}; ${ms} ms, event loop held ${Math.round(stallMs)} ms, ${r.checkedBytes} bytes hashed`);
          assert.ok(ms < 3_000, `verify read on into the terabyte: ${seen.join('; ')}`);
          assert.ok(stallMs < 1_000, `the event loop was held ${Math.round(stallMs)} ms: ${seen.join('; ')}`);
          // The other files, and one byte past the recorded size at most.
          assert.ok(r.checkedBytes <= 900_000 + 3 * 1024 * 1024 + 8 * 4096 + 1, `${r.checkedBytes} bytes hashed`);
          if (p !== undefined) {
            assert.equal(p.kind, 'grown');
            assert.equal(p.actual?.size, TIB, 'the size it has now, not where reading stopped');
            assert.equal(p.expected?.size, size);
          }
        }
      }
      report(seen.join('\n      '));
    });

    it('a sparse terabyte in place of a small artifact is grown without a byte read', async () => {
      fs.truncateSync(path.join(area(), 'sub', 'f3.bin'), TIB);
      const t0 = Date.now();
      const r = await verify(staticDir, 'eve/R1');
      assert.deepEqual(brief(r), ['grown sub/f3.bin']);
      assert.ok(Date.now() - t0 < 2_000);
      assert.equal(r.checkedBytes, 900_000 + 3 * 1024 * 1024 + 7 * 4096);
    });

    it('artifacts named __proto__, constructor and toString are staged, recorded and verified like any other', async () => {
      const odd = path.join(root, 'odd');
      fs.mkdirSync(odd);
      for (const name of ['__proto__', 'constructor', 'toString', 'hasOwnProperty']) fs.writeFileSync(path.join(odd, name), `${name}\n`);
      await stage(staticDir, 'eve/R2', [odd]);
      const artifacts = await readBuildArtifacts(staticDir, 'eve/R2');
      assert.deepEqual(artifacts.map((e) => e.name).sort(), ['__proto__', 'constructor', 'hasOwnProperty', 'toString']);
      assert.deepEqual(brief(await verify(staticDir, 'eve/R2')), []);
      // Gone: a manifest that lists __proto__ must not verify as whole without it.
      fs.rmSync(path.join(staticDir, 'eve/R2/__proto__'));
      fs.rmSync(path.join(staticDir, 'eve/R2/constructor'));
      assert.deepEqual(brief(await verify(staticDir, 'eve/R2')), ['missing __proto__', 'missing constructor']);
    });

    it('hostile manifests: names that climb, absolute, with NUL or a newline, not objects: ECORRUPT; duplicate names: the last; an entry through a linked folder: missing, never read through it', async () => {
      const file = path.join(area(), MANIFEST_FILE);
      const good = JSON.parse(fs.readFileSync(file, 'utf8')) as { artifacts: Record<string, Record<string, unknown>> };
      const entry = good.artifacts['sub/f1.bin'];
      const write = (text: string): void => {
        fs.rmSync(file);
        fs.writeFileSync(file, text);
      };
      for (const name of ['../outside/x', 'sub/../../x', '/etc/passwd', 'a\u0000b', 'a\nb', 'a\\b', '', 'sub//f1.bin', './sub']) {
        write(JSON.stringify({ version: 1, artifacts: { [name]: { ...entry, name } } }));
        await rejectsWith(verify(staticDir, 'eve/R1'), 'ECORRUPT', 'is not a relative path inside the area');
      }
      for (const text of ['', '{', 'null', '[]', '{"version":1,"artifacts":[]}', '{"version":1,"artifacts":{"x":1}}', '{"version":2,"artifacts":{}}']) {
        write(text);
        await rejectsWith(verify(staticDir, 'eve/R1'), 'ECORRUPT');
      }
      // The same name twice: JSON's last one is what is checked, and it is wrong here.
      const text = JSON.stringify(good);
      const dup = JSON.stringify({ ...entry, size: 1 });
      write(text.replace('"artifacts":{', `"artifacts":{"sub/f1.bin":${dup},`).replace(/}}\s*$/, `,"sub/f1.bin":${dup}}}`));
      assert.deepEqual(brief(await verify(staticDir, 'eve/R1')), ['grown sub/f1.bin']);
      // Listed through a link inside the build to a folder outside that holds exactly what is recorded.
      fs.mkdirSync(outside);
      fs.copyFileSync(path.join(src, 'sub', 'f1.bin'), path.join(outside, 'f1.bin'));
      fs.symlinkSync(outside, path.join(area(), 'out'));
      const withLink = JSON.parse(text) as typeof good;
      withLink.artifacts['out/f1.bin'] = { ...entry, name: 'out/f1.bin' };
      write(JSON.stringify(withLink));
      const r = await verify(staticDir, 'eve/R1');
      assert.deepEqual(brief(r), ['unlisted out', 'missing out/f1.bin']);
      assert.match(r.problems[1].detail ?? '', /out is a symbolic link, not a directory/);
    });

    it('a FIFO as the build, as a folder on the way, a device as an artifact: reported, nothing waited on', async function () {
      this.timeout(20_000);
      if (!hasTool('mkfifo')) this.skip();
      fs.rmSync(path.join(area(), 'sub'), { recursive: true });
      assert.equal(spawnSync('mkfifo', [path.join(area(), 'sub')]).status, 0);
      // Devices need root: as root, making them must work.
      const devices = isRoot;
      if (devices) assert.equal(spawnSync('mknod', [path.join(area(), 'dev'), 'c', '1', '3']).status, 0, 'mknod as root');
      if (devices) {
        fs.rmSync(path.join(area(), 'small.bin'));
        assert.equal(spawnSync('mknod', [path.join(area(), 'small.bin'), 'c', '1', '5']).status, 0);
      }
      const t0 = Date.now();
      const r = await verify(staticDir, 'eve/R1');
      assert.ok(Date.now() - t0 < 5_000);
      const want = [...(devices ? ['unlisted dev', 'not-a-file small.bin'] : []), 'unlisted sub', ...Array.from({ length: 8 }, (_, i) => `missing sub/f${i}.bin`)].sort();
      assert.deepEqual(brief(r).sort(), want);
      assert.match(r.problems.find((p) => p.path === 'sub/f0.bin')!.detail ?? '', /sub is a FIFO, not a directory/);
      if (devices) assert.equal(r.problems.find((p) => p.path === 'small.bin')!.actual?.type, 'device');
      // The build itself a FIFO.
      assert.equal(spawnSync('mkfifo', [path.join(staticDir, 'eve', 'R9')]).status, 0);
      await rejectsWith(verify(staticDir, 'eve/R9'), 'EBADTAG', 'not a directory');
    });

    it('a file whose name is not UTF-8 cannot hide behind a listed artifact that decodes alike; the CLI shows escape sequences, never sends them', async () => {
      // "\uFFFD.bin" is valid UTF-8; "\xff.bin" decodes to the same string.
      fs.writeFileSync(path.join(src, '\uFFFD.bin'), 'listed\n');
      await stage(staticDir, 'eve/R1', [path.join(src, '\uFFFD.bin')], { add: true });
      const areaBuf = Buffer.from(area());
      fs.writeFileSync(Buffer.concat([areaBuf, Buffer.from('/\xff.bin', 'latin1')]), 'planted\n');
      const evil = 'x\u001b]0;pwned\u0007\u001b[2J';
      fs.writeFileSync(path.join(area(), evil), '');
      const r = await verify(staticDir, 'eve/R1');
      // The planted name as its bytes are: not the listed one it decodes alike to.
      assert.deepEqual(brief(r), [`unlisted ${evil}`, 'unlisted \udcff.bin']);
      assert.match(r.problems[1].detail ?? '', /not valid UTF-8/);
      const lines = r.problems.map(formatProblem);
      assert.ok(lines.every((l) => !/[\u0000-\u001f\u007f-\u009f]/.test(l)), JSON.stringify(lines));
      const cliRun = await cliTimed(staticDir, ['verify', 'eve/R1'], { timeoutMs: 20_000 });
      assert.equal(cliRun.code, 1, cliRun.stderr);
      assert.ok(!cliRun.stdout.includes('\u001b'), JSON.stringify(cliRun.stdout));
      assert.ok(cliRun.stdout.includes(JSON.stringify(evil)), cliRun.stdout);
      assert.ok(cliRun.stdout.includes('"\\xff.bin"'), cliRun.stdout);
    });

    it('a folder of the build, or the build, exchanged with a link to a pristine copy outside while verify runs: never whole, nothing outside read', async function () {
      need(swapper, this);
      const figures: string[] = [];
      // Inside: one byte changed. Outside: exactly what the manifest records. Only a reader that
      // went outside could call the build whole.
      const f3 = path.join(area(), 'sub', 'f3.bin');
      const data = fs.readFileSync(f3);
      data[0] ^= 1;
      fs.writeFileSync(f3, data);
      for (const what of ['sub', 'build'] as const) {
        cleanup(outside);
        fs.cpSync(what === 'sub' ? path.join(src, 'sub') : area(), outside, { recursive: true });
        if (what === 'build') fs.copyFileSync(path.join(src, 'sub', 'f3.bin'), path.join(outside, 'sub', 'f3.bin'));
        const before = fingerprint(outside);
        const link = path.join(staticDir, `x-${what}`);
        fs.symlinkSync(outside, link);
        const outcomes = new Map<string, number>();
        let whole = 0;
        const { swaps, runs } = await duringExchanges(what === 'sub' ? path.join(area(), 'sub') : area(), link, 2_500, async () => {
          let key: string;
          try {
            const r = await verify(staticDir, 'eve/R1');
            if (r.ok) whole++;
            key = r.ok ? 'WHOLE' : brief(r).length === 1 ? brief(r)[0] : `${brief(r).length} problems`;
          } catch (err) {
            key = `error ${(err as { code?: string }).code}`;
          }
          outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
        });
        fs.rmSync(link);
        figures.push(`${what} exchanged ${swaps} times over ${runs} runs: ${[...outcomes].map(([k, v]) => `${v} ${k}`).join(', ')}`);
        assert.equal(whole, 0, `verify called the build whole ${whole} times, so it read outside: ${figures.join('; ')}`);
        assert.deepEqual(changes(outside, before, fingerprint(outside)), []);
        assert.ok(Number(swaps) > 0, `the directories were never exchanged: ${figures.join('; ')}`);
        // Read through to the changed byte: the race was met where it matters, in the real build.
        const found = outcomes.get('changed sub/f3.bin') ?? 0;
        assert.ok(found >= 3, `verify read the real build to its changed file only ${found} times: ${figures.join('; ')}`);
      }
      report(figures.join('\n      '));
    });
  });

  describe('the model', () => {
    let states: LockStates | undefined;
    afterEach(() => {
      states?.dispose();
      states = undefined;
    });

    const plantOutside = (): void => {
      fs.mkdirSync(path.join(outside, 'deeper'), { recursive: true });
      fs.writeFileSync(path.join(outside, 'OUTSIDE.txt'), 'outside\n');
      fs.writeFileSync(path.join(outside, TIMESTAMP_FILE), '');
    };
    const names = (artifacts: { path: string }[]): string[] => artifacts.map((a) => a.path);
    const outsideIn = (paths: string[]): string[] => paths.filter((p) => /OUTSIDE|deeper|passwd|hostname/.test(p));

    it('links planted as builds, folders and artifact folders, and folders swapped for links after they were listed: nothing outside is listed', async () => {
      plantOutside();
      fs.symlinkSync(outside, path.join(staticDir, 'eve', 'R-link'));
      fs.symlinkSync(outside, path.join(staticDir, 'folder-link'));
      fs.symlinkSync('/etc', path.join(area(), 'etc'));
      states = new LockStates(timing, quiet);
      assert.deepEqual((await states.children(staticDir, '')).map((r) => r.tag), ['eve']);
      assert.deepEqual((await states.children(staticDir, 'eve')).map((r) => r.tag), ['eve/R1']);
      const top = await states.artifacts(staticDir, 'eve/R1');
      assert.deepEqual(top.map((a) => `${a.name}${a.directory ? '/' : ''}`), ['sub/', 'etc', 'large.bin', 'small.bin']);
      // A link shown as an artifact is not a folder to open; asked anyway, nothing comes back.
      assert.deepEqual(await states.artifactDir(staticDir, 'eve/R1', 'etc'), []);
      // The artifact folder swapped for a link after it was listed.
      fs.renameSync(path.join(area(), 'sub'), path.join(area(), 'sub.real'));
      fs.symlinkSync(outside, path.join(area(), 'sub'));
      assert.deepEqual(await states.artifactDir(staticDir, 'eve/R1', 'sub'), []);
      assert.deepEqual(await states.artifactDir(staticDir, 'eve/R1', 'sub/deeper'), []);
      // The build swapped for a link after it was listed (a fresh model lists its top again).
      const fresh = new LockStates(timing, quiet);
      try {
        await fresh.children(staticDir, 'eve');
        fs.renameSync(area(), path.join(staticDir, 'eve', 'R1.real'));
        fs.symlinkSync(outside, area());
        assert.deepEqual(await fresh.artifacts(staticDir, 'eve/R1'), []);
        assert.deepEqual(outsideIn(names(await fresh.artifactDir(staticDir, 'eve/R1', 'deeper'))), []);
        await fresh.measure(staticDir, '');
        assert.equal(fresh.record(staticDir, 'eve/R1')?.usage, undefined, 'a build that is a link now is not measured');
      } finally {
        fresh.dispose();
      }
      await assert.rejects(readBuildArtifacts(staticDir, 'eve/R1'), /symbolic link that leads outside/);
    });

    it('an artifact folder exchanged with a link to outside in a tight loop while the tree lists it: nothing outside, ever', async function () {
      need(swapper, this);
      plantOutside();
      const link = path.join(area(), 'x');
      fs.symlinkSync(outside, link);
      states = new LockStates(timing, quiet);
      await states.children(staticDir, 'eve');
      let inside = 0;
      const leaks: string[] = [];
      const { swaps, runs } = await duringExchanges(path.join(area(), 'sub'), link, 2_000, async () => {
        const got = [...names(await states!.artifactDir(staticDir, 'eve/R1', 'sub')), ...names(await states!.artifactDir(staticDir, 'eve/R1', 'x'))];
        if (got.some((p) => p.endsWith('f0.bin'))) inside++;
        leaks.push(...outsideIn(got));
      });
      report(`${swaps} exchanges over ${runs} listings: ${inside} saw the real folder, ${leaks.length} listed something outside`);
      assert.deepEqual(leaks.slice(0, 5), []);
      assert.ok(Number(swaps) > 0, 'the folder was never exchanged');
      assert.ok(inside >= 3, `the real folder was listed only ${inside} times`);
    });

    it('a folder of a build exchanged with a link to outside in a tight loop while builds are measured: nothing outside is counted', async function () {
      need(swapper, this);
      // Outside: a sparse terabyte, which any measure that walked there would count.
      fs.mkdirSync(outside);
      fs.writeFileSync(path.join(outside, 'huge'), '');
      fs.truncateSync(path.join(outside, 'huge'), TIB);
      const link = path.join(staticDir, 'x');
      fs.symlinkSync(outside, link);
      states = new LockStates(timing, quiet);
      await states.children(staticDir, 'eve');
      let inside = 0;
      let outsideCounted = 0;
      const { swaps, runs } = await duringExchanges(path.join(area(), 'sub'), link, 2_000, async () => {
        delete states!.record(staticDir, 'eve/R1')!.usage;
        await states!.measure(staticDir, 'eve');
        const bytes = states!.record(staticDir, 'eve/R1')?.usage?.bytes ?? 0;
        if (bytes >= TIB) outsideCounted++;
        else if (bytes > 900_000 + 3 * 1024 * 1024 + 8 * 4096) inside++;
      });
      report(`${swaps} exchanges over ${runs} measures: ${inside} counted the real folder, ${outsideCounted} counted outside`);
      assert.equal(outsideCounted, 0);
      assert.ok(Number(swaps) > 0, 'the folder was never exchanged');
      assert.ok(inside >= 3, `the real folder was counted only ${inside} times`);
    });

    it('as another user: a folder it may not read hides nothing beside it, and nothing throws unhandled', async function () {
      if (!isRoot || !hasTool('runuser')) {
        console.log('      skipped: needs root and runuser to act as nobody');
        this.skip();
      }
      for (const tag of ['private/R1', 'public/R2']) {
        fs.mkdirSync(path.join(staticDir, tag), { recursive: true });
        fs.writeFileSync(path.join(staticDir, tag, TIMESTAMP_FILE), '');
      }
      fs.chmodSync(path.join(staticDir, 'private'), 0o700);
      fs.mkdirSync(path.join(area(), 'closed'));
      fs.chmodSync(path.join(area(), 'closed'), 0o700);
      const model = path.join(__dirname, '..', '..', '..', 'src', 'core', 'watch', 'states.js');
      const script = `
        process.on('unhandledRejection', (e) => { console.log(JSON.stringify({ unhandled: String(e) })); process.exit(3); });
        const { LockStates } = require(${JSON.stringify(model)});
        (async () => {
          const s = process.argv[1];
          const states = new LockStates({ staleMs: 4000, refreshMs: 1000 }, { warn: () => undefined });
          states.scan([s]);
          const out = { root: (await states.children(s, '')).map((r) => r.tag + ':' + r.kind) };
          out.private = await states.children(s, 'private').then((c) => c.length, (e) => e.code);
          out.public = (await states.children(s, 'public')).map((r) => r.tag);
          out.eve = (await states.artifacts(s, 'eve/R1')).map((a) => a.name);
          out.closed = await states.artifactDir(s, 'eve/R1', 'closed');
          await states.measure(s, '');
          out.measured = states.builds().filter((b) => b.usage !== undefined).map((b) => b.tag).sort();
          await new Promise((r) => setTimeout(r, 300));
          states.dispose();
          console.log(JSON.stringify(out));
        })();`;
      const r = await run('runuser', ['-u', 'nobody', '--', process.execPath, '-e', script, staticDir]);
      assert.ok(!/runuser: /.test(r.stderr), `runuser could not run node as nobody (as root): ${r.stderr}`);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      const out = JSON.parse(r.stdout) as Record<string, unknown>;
      assert.deepEqual(out, {
        root: ['eve:folder', 'private:folder', 'public:folder'],
        private: 'EIO',
        public: ['public/R2'],
        eve: ['closed', 'sub', 'large.bin', 'small.bin'],
        closed: [],
        measured: ['eve/R1', 'public/R2'],
      });
    });

    it('10,000 builds in a folder, names with newlines and names that are not UTF-8: every build once, no row twice, none hidden, each one inspectable by the name listed', async () => {
      const big = path.join(staticDir, 'big');
      fs.mkdirSync(big);
      for (let i = 0; i < 10_000; i++) fs.mkdirSync(path.join(big, `R${i}`));
      for (let i = 0; i < 10_000; i += 1) fs.writeFileSync(path.join(big, `R${i}`, TIMESTAMP_FILE), '');
      const staticBuf = Buffer.from(staticDir);
      // Two names that decode alike, and a valid one that they decode to.
      for (const raw of ['/bad\xff', '/bad\xfe']) fs.mkdirSync(Buffer.concat([staticBuf, Buffer.from(raw, 'latin1')]));
      fs.mkdirSync(path.join(staticDir, 'bad\uFFFD'));
      fs.mkdirSync(path.join(staticDir, 'two\nlines'));
      fs.writeFileSync(path.join(staticDir, 'two\nlines', TIMESTAMP_FILE), '');
      fs.mkdirSync(Buffer.concat([Buffer.from(area()), Buffer.from('/art\xff', 'latin1')]));
      fs.mkdirSync(path.join(area(), 'art\uFFFD'));
      states = new LockStates(timing, quiet);
      const t0 = Date.now();
      const top = (await states.children(staticDir, '')).map((r) => r.tag);
      // Each byte that is not UTF-8 kept as U+DC00 + the byte: three names, three rows.
      const expected = ['bad\udcfe', 'bad\udcff', 'bad\uFFFD', 'big', 'eve', 'two\nlines'];
      assert.deepEqual([...top].sort(), expected);
      const builds = await states.children(staticDir, 'big');
      const ms = Date.now() - t0;
      assert.equal(builds.length, 10_000);
      assert.equal(new Set(builds.map((b) => b.tag)).size, 10_000);
      assert.ok(builds.every((b) => b.kind === 'build'));
      const arts = (await states.artifacts(staticDir, 'eve/R1')).map((a) => a.name);
      assert.deepEqual(arts, ['art\uFFFD', 'sub', 'large.bin', 'small.bin']);
      assert.deepEqual((await list(staticDir)).map((e) => e.tag).sort(), expected);
      // Looked at by the names listed, each is the directory it names (a kept byte is acted on as itself).
      for (const tag of ['bad\udcff', 'two\nlines']) assert.equal((await inspect(staticDir, tag)).exists, true, tag);
      assert.equal(states.record(staticDir, 'two\nlines')?.kind, 'build');
      assert.equal(states.record(staticDir, 'bad\udcfe')?.kind, 'folder');
      report(`10,000 builds listed in ${ms} ms`);
    });

    it('a manifest crafted to be parsed in one piece: the details page does not parse it past its limit and says what reads it in full', async () => {
      const file = path.join(area(), MANIFEST_FILE);
      const sound = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
      // Valid, and a manifest of the same artifacts, but not laid out as the tool writes it: 6 MiB of
      // empty objects beside them would be parsed whole, as one piece.
      fs.writeFileSync(`${file}.new`, JSON.stringify({ ...sound, x: new Array(2_100_000).fill({}) }));
      fs.renameSync(`${file}.new`, file);
      assert.ok(fs.statSync(file).size > 6 * 1024 * 1024);
      const err = await rejectsWith(readBuildArtifacts(staticDir, 'eve/R1', undefined, { maxParse: 4 * 1024 * 1024 }), 'ETOOBIG', /The command-line tool reads it in full\./);
      assert.deepEqual([err.reason, err.next], ['manifest-size', [{ kind: 'verify' }]]);
      assert.ok(err.message.includes(file), err.message);
      // Without the limit (the command line), it is read in full: the same ten artifacts.
      assert.equal((await readBuildArtifacts(staticDir, 'eve/R1')).length, 10);
      assert.equal((await verify(staticDir, 'eve/R1')).ok, true);
    });

    it('FIFOs where the marks of a build and its manifest go: listed, measured and shown without waiting on them', async function () {
      this.timeout(20_000);
      if (!hasTool('mkfifo')) this.skip();
      for (const [tag, mark] of [
        ['eve/R2', TIMESTAMP_FILE],
        ['eve/R3', MANIFEST_FILE],
      ] as const) {
        fs.mkdirSync(path.join(staticDir, tag));
        assert.equal(spawnSync('mkfifo', [path.join(staticDir, tag, mark)]).status, 0);
      }
      fs.rmSync(path.join(area(), MANIFEST_FILE));
      assert.equal(spawnSync('mkfifo', [path.join(area(), MANIFEST_FILE)]).status, 0);
      const t0 = Date.now();
      states = new LockStates(timing, quiet);
      assert.deepEqual((await states.children(staticDir, 'eve')).map((r) => `${r.tag}:${r.kind}`), ['eve/R1:build', 'eve/R2:build', 'eve/R3:build']);
      assert.deepEqual((await states.artifacts(staticDir, 'eve/R3')).map((a) => a.name), []);
      await states.measure(staticDir, 'eve');
      assert.equal(states.record(staticDir, 'eve/R2')?.usage?.bytes, 0);
      await rejectsWith(readBuildArtifacts(staticDir, 'eve/R1'), 'EIO', /FIFO/);
      await rejectsWith(verify(staticDir, 'eve/R3'), 'EIO', /FIFO/);
      assert.deepEqual((await readBuildDir(staticDir, 'eve/R3')).map((e) => `${e.name} ${e.file}`), [`${MANIFEST_FILE} false`]);
      assert.ok(Date.now() - t0 < 5_000, `took ${Date.now() - t0} ms`);
    });
  });

  describe('Markdown from names on disk', () => {
    const HOSTILE = [
      '<img src=x onerror=alert(1)>',
      '[Update now](command:workbench.action.terminal.sendSequence?%5B%7B%22text%22%3A%22id%5Cn%22%7D%5D)',
      '![x](https://attacker.example/track.png)',
      '<command:devserverStaging.destroy>',
      'a\rb\n# heading\r\n| x | y |',
      '`code` ``two`` $(zap) $x^2$ ~~gone~~ **bold** _it_',
      'https://attacker.example/a and www.attacker.example',
      '&lt;img src=x&gt; &#91;x&#93;(command:x)',
    ];

    it('literal() and codeSpan() leave no link, image, HTML, line break or early end of a code span', () => {
      for (const s of HOSTILE) {
        const l = literal(s);
        assert.ok(!/[\r\n]/.test(l), JSON.stringify(l));
        // Every punctuation character that could open markup is escaped.
        assert.ok(!/(^|[^\\])[[\]<>`&$:]/.test(l.replace(/\\\\/g, '')), JSON.stringify(l));
        const c = codeSpan(`/srv/static/${s}`);
        const fence = /^`+/.exec(c)![0];
        assert.ok(!c.slice(fence.length, -fence.length).includes(fence), `${JSON.stringify(c)}: the fence occurs inside`);
        assert.ok(!/[\r\n]/.test(c));
      }
    });

    it('rendered as VS Code renders Markdown (markdown-it, HTML on, linkify on): text only', function () {
      let render: (s: string) => string;
      try {
        const MarkdownIt = require('markdown-it') as new (o: object) => { render(s: string): string };
        const mdIt = new MarkdownIt({ html: true, linkify: true });
        render = (s) => mdIt.render(s);
      } catch {
        console.log('      skipped: markdown-it (what VS Code renders Markdown with) is not installed');
        this.skip();
      }
      for (const s of HOSTILE) {
        const page = [`# ${literal(s)}`, '', codeSpan(`/srv/static/${s}`), '', '| | |', '|---|---|', `| Source | ${literal(s)} |`, `| Holder | ${literal(s)}@${literal(s)} |`].join('\n');
        const html = render!(page);
        assert.ok(!/<a |<img |<script|<h[2-6]|<(?!\/?(h1|p|code|table|thead|tbody|tr|th|td)>)[a-z/]/.test(html), `${JSON.stringify(s)} rendered as ${html}`);
        assert.equal((html.match(/<h1>/g) ?? []).length, 1, html);
        assert.equal((html.match(/<code>/g) ?? []).length, 1, html);
        // The table keeps its two rows.
        assert.equal((html.match(/<tr>/g) ?? []).length, 3, html);
      }
    });
  });
});
