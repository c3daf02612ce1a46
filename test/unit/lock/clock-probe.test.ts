/**
 * The clock probe under `<static>/.devserver-staging/` with a hostile co-user: links planted under
 * every name a probe could have, and in place of the bookkeeping directory itself. The kernel is
 * the referee: files outside the static directory are hashed before and after.
 */
import { strict as assert } from 'assert';
import { spawn } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { fsClockSkew, resetClockCache } from '../../../src/core/fs/clock';
import { HISTORY_DIR, META_DIR } from '../../../src/core/base/protocol';
import { CLI, cleanup, cli, deadPid, report, fingerprint, tempDir } from '../../helpers';


function pidMax(): number {
  try {
    return Number(fs.readFileSync('/proc/sys/kernel/pid_max', 'utf8').trim());
  } catch {
    return 32_768;
  }
}

/** Sets the times of `p` itself (a link is not followed). */
function age(p: string, ms: number): void {
  const t = new Date(Date.now() - ms);
  fs.lutimesSync(p, t, t);
}

describe('clock probe: never through a link', function () {
  this.timeout(120_000);
  // On a local filesystem the offset is 0 without a probe; these tests are about the probe, which
  // network filesystems make. Commands spawned here inherit it.
  let probeWas: string | undefined;
  before(() => {
    probeWas = process.env.DEVSERVER_STAGING_CLOCK_PROBE;
    process.env.DEVSERVER_STAGING_CLOCK_PROBE = '1';
  });
  after(() => {
    if (probeWas === undefined) delete process.env.DEVSERVER_STAGING_CLOCK_PROBE;
    else process.env.DEVSERVER_STAGING_CLOCK_PROBE = probeWas;
  });
  let root: string;
  let staticDir: string;
  let outside: string;
  let meta: string;

  beforeEach(() => {
    root = tempDir('dss-clock-');
    staticDir = path.join(root, 'static');
    outside = path.join(root, 'outside');
    meta = path.join(staticDir, META_DIR);
    fs.mkdirSync(path.join(staticDir, 'board', 'R1'), { recursive: true });
    fs.mkdirSync(path.join(outside, 'dir'), { recursive: true });
    fs.writeFileSync(path.join(outside, 'canary'), 'do not touch\n');
    fs.writeFileSync(path.join(outside, 'dir', 'clock.1'), 'also not\n');
    // Old times, so that a write (even of the same bytes) shows in the mtime.
    for (const p of [path.join(outside, 'canary'), path.join(outside, 'dir', 'clock.1')]) age(p, 3_600_000);
  });
  afterEach(() => cleanup(root));

  it('without the probe asked for, a local filesystem is measured at 0 and nothing is written', async () => {
    delete process.env.DEVSERVER_STAGING_CLOCK_PROBE;
    try {
      resetClockCache();
      assert.equal(await fsClockSkew(staticDir), 0);
      assert.equal(fs.existsSync(meta), false, 'no bookkeeping directory made for a measurement');
    } finally {
      process.env.DEVSERVER_STAGING_CLOCK_PROBE = '1';
    }
  });

  /** list, status and lock -- CMD all succeed; returns the pid of the CLI that ran lock. */
  async function runCommands(): Promise<number> {
    const list = await cli(staticDir, ['list']);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /folder +board/);
    const status = await cli(staticDir, ['status', 'board/R1']);
    assert.equal(status.code, 0, status.stderr);
    // $PPID of the command is the CLI itself: the pid its probe was named after.
    const lock = await cli(staticDir, ['lock', 'board/R1', '--', 'sh', '-c', 'echo $PPID']);
    assert.equal(lock.code, 0, lock.stderr);
    return Number(lock.stdout.trim());
  }

  it('links under every pid-based probe name, a dangling one and one to an outside file: outside files unchanged', async () => {
    fs.mkdirSync(meta);
    const max = pidMax();
    const t0 = performance.now();
    const target = path.join(outside, 'canary');
    // Every name an older client could use (clock.<pid>) and, for good measure, some of the new shape.
    for (let pid = 1; pid < max; pid++) fs.symlinkSync(target, path.join(meta, `clock.${pid}`));
    for (let pid = 1; pid < 2_000; pid++) fs.symlinkSync(target, path.join(meta, `clock.${pid}.${crypto.randomBytes(6).toString('hex')}`));
    fs.symlinkSync(path.join(outside, 'created-through-link'), path.join(meta, `clock.${process.pid + 1}.0`));
    const plantedList = fs.readdirSync(meta);
    const planted = plantedList.length;
    const before = fingerprint(outside);
    const cliPids: number[] = [];
    for (let i = 0; i < 3; i++) cliPids.push(await runCommands());
    assert.equal(fingerprint(outside), before, 'a file outside the static directory changed');
    assert.ok(cliPids.every((p) => p > 0 && p < max), `each CLI's pid had a planted link under its name (${cliPids.join(', ')})`);
    const plantedNames = new Set(plantedList);
    // The `lock` commands recorded their history there too: that is not a probe.
    const extra = fs.readdirSync(meta).filter((n) => !plantedNames.has(n) && n !== HISTORY_DIR);
    assert.deepEqual(extra, [], 'a probe left behind');
    report(`${planted} links planted (pid_max ${max}); 9 commands by CLIs with pids ${cliPids.join(', ')}; outside unchanged; ${Math.round(performance.now() - t0)} ms`);
  });

  it('links that have aged are removed, the link itself and never what it points to', async () => {
    fs.mkdirSync(meta);
    const target = path.join(outside, 'canary');
    const dead = await deadPid();
    const names = [`clock.${dead}`, `clock.${dead}.abc123`, `clock.${process.pid}.0`];
    for (const n of names) {
      fs.symlinkSync(target, path.join(meta, n));
      age(path.join(meta, n), 11 * 60_000);
    }
    const before = fingerprint(outside);
    const r = await cli(staticDir, ['list']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(fs.readdirSync(meta).filter((n) => n.startsWith('clock.')), []);
    assert.equal(fingerprint(outside), before);
  });

  for (const kind of ['a link to a directory outside', 'a dangling link', 'a regular file'] as const) {
    it(`.devserver-staging is ${kind}: commands work (clock offset 0) and nothing is written`, async () => {
      if (kind === 'a link to a directory outside') fs.symlinkSync(path.join(outside, 'dir'), meta);
      else if (kind === 'a dangling link') fs.symlinkSync(path.join(outside, 'made-through-link'), meta);
      else fs.writeFileSync(meta, 'not a directory\n');
      age(meta, 3_600_000);
      const before = fingerprint(outside);
      const metaBefore = fs.lstatSync(meta);
      await runCommands();
      resetClockCache();
      assert.equal(await fsClockSkew(staticDir), 0);
      assert.equal(fingerprint(outside), before, 'a file outside the static directory changed');
      const metaAfter = fs.lstatSync(meta);
      assert.equal(metaAfter.ino, metaBefore.ino);
      assert.equal(metaAfter.mtimeMs, metaBefore.mtimeMs);
      assert.equal(metaAfter.size, metaBefore.size);
    });
  }

  it('junk: probes of dead writers are removed by the next measurement; live, foreign-host and unknown fresh ones stay', async () => {
    fs.mkdirSync(meta);
    const dead = await deadPid();
    const host = os.hostname();
    const probe = (pid: number, hostname: string): string => JSON.stringify({ pid, hostname, time: Date.now() });
    const files: Record<string, { content: string; agedMs?: number; dir?: boolean; stays: boolean }> = {
      [`clock.${dead}.0a1b2c`]: { content: probe(dead, host), stays: false },
      [`clock.${dead}`]: { content: String(Date.now()), agedMs: 60_000, stays: false },
      [`clock.${dead}.ffff`]: { content: '', agedMs: 60_000, stays: false },
      [`clock.${process.pid}.1234`]: { content: probe(process.pid, host), stays: true },
      [`clock.${process.pid}.5678`]: { content: probe(process.pid, host), agedMs: 11 * 60_000, stays: false },
      [`clock.${dead}.aaaa`]: { content: probe(dead, 'another-host'), agedMs: 60_000, stays: true },
      [`clock.${dead}.bbbb`]: { content: probe(dead, 'another-host'), agedMs: 11 * 60_000, stays: false },
      // Killed between creating and writing: the writer cannot be told yet.
      [`clock.${dead}.cccc`]: { content: '', stays: true },
      [`clock.${dead}.dddd`]: { content: '', dir: true, agedMs: 60 * 60_000, stays: true },
      'notes.txt': { content: 'someone else\'s', agedMs: 60 * 60_000, stays: true },
    };
    for (const [name, f] of Object.entries(files)) {
      const p = path.join(meta, name);
      if (f.dir === true) fs.mkdirSync(p);
      else fs.writeFileSync(p, f.content);
      if (f.agedMs !== undefined) age(p, f.agedMs);
    }
    const r = await cli(staticDir, ['list']);
    assert.equal(r.code, 0, r.stderr);
    const left = new Set(fs.readdirSync(meta));
    for (const [name, f] of Object.entries(files)) assert.equal(left.has(name), f.stays, `${name} ${f.stays ? 'removed' : 'left'}`);
    assert.equal(left.size, Object.values(files).filter((f) => f.stays).length, `unexpected entries: ${[...left].join(', ')}`);
  });

  it('CLIs killed at random instants leave no probe after the next measurement', async () => {
    const KILLS = 40;
    const child = (): Promise<void> =>
      new Promise((resolve) => {
        const c = spawn(process.execPath, [CLI, 'list'], {
          env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir },
          stdio: 'ignore',
        });
        setTimeout(() => c.kill('SIGKILL'), 100 + Math.random() * 150);
        c.once('exit', () => resolve());
      });
    for (let i = 0; i < KILLS; i++) await child();
    const probes = (): string[] => (fs.existsSync(meta) ? fs.readdirSync(meta).filter((n) => n.startsWith('clock.')) : []);
    const leftByKills = probes().length;
    const r = await cli(staticDir, ['list']);
    assert.equal(r.code, 0, r.stderr);
    // Only a probe killed between its creation and its write (empty: writer unknown) may wait out the grace period.
    for (const n of probes()) assert.equal(fs.statSync(path.join(meta, n)).size, 0, `${n} left behind`);
    const leftAfter = probes().length;
    for (const n of probes()) age(path.join(meta, n), 6_000);
    assert.equal((await cli(staticDir, ['list'])).code, 0);
    assert.deepEqual(probes(), []);
    report(`${KILLS} kills: ${leftByKills} probes left by them, ${leftAfter} (empty) after the next measurement, 0 after the grace period`);
  });
});
