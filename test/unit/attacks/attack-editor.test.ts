/**
 * What a hostile co-user of the static directory can make the editor do, and cannot: what they
 * write reaches every surface as inert text (checked against the grammar VS Code itself reads
 * notifications with, taken from its own workbench where the headless VS Code is installed), a
 * scan lists each real directory once whatever links they plant and refuses a static directory that
 * holds everything, a removal acts only on the lock a dialog named, and nothing they write makes
 * the model stall (history read at a glance, timers kept below Node's limit, timings validated).
 */
import { strict as assert } from 'assert';
import type { ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { destroy, forceRelease, inspect, LockStates, prune, shownLock, type LockInfo } from '../../../src/core';
import { readPrintable } from '../../../src/core/base/format';
import { lastHeld } from '../../../src/core/log/history';
import { DEFAULT_TIMING, MAX_STALE_MS, MAX_TIMER_MS, META_DIR, HISTORY_DIR, OWNER_FILE, clampTiming, historyDirOf, historySegmentName } from '../../../src/core/base/protocol';
import { ScannedDirs } from '../../../src/core/watch/scope';
import { inThreadWatcher } from '../../../src/core/watch/watcher';
import { literal } from '../../../src/extension/markdown';
import { clipboardText, dialogLine, logText, notificationText, pickText, rowText } from '../../../src/extension/shown';
import { CLI, ROOT, callsPerTurn, cleanup, expectMessage, fingerprint, killAll, readToken, rejectsWith, report, run, startWorker, tempDir, track, waitFor } from '../../helpers';
import { installedWorkbench, linksIn, notificationParser, portedNotificationParser, type LinkedNode } from '../../vscodeText';

const COMMAND = 'command:workbench.action.terminal.sendSequence?%5B%7B%22text%22%3A%22id%5Cn%22%7D%5D';

/** What co-users write, each made to act in some surface of the editor. */
const HOSTILE = [
  `[Show Log](${COMMAND})`,
  `[x](COMMAND:workbench.action.quit)`,
  `[y](https://attacker.example/a "title")`,
  `[z](file:///etc/passwd 'z')`,
  `[[nested]](${COMMAND})`,
  `[a\nb](${COMMAND})`,
  `[c](${COMMAND})\u202e\u2066gnp.exe`,
  'R1\nfree  board/R9',
  'evil\u001b]0;title\u0007\u001b[2J',
  'zero\u200bwidth\u2028line\u2029para\u0085next',
  '$(zap) $(sync~spin) \\$(escaped) $(not an icon)',
  'www.attacker.com alice@attacker.com //attacker.com/x',
  'lone \udc80 surrogate',
];

/** Control, format and separator characters: never shown raw. */
const RAW = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/u;

/** VS Code's own reading of a notification where its workbench is installed, else a port of it. */
function notificationReader(): { parse: (m: string) => LinkedNode[]; whose: string } {
  const workbench = installedWorkbench(ROOT);
  if (workbench === undefined) return { parse: portedNotificationParser, whose: 'a port of VS Code 1.139 (no headless VS Code installed here)' };
  return { parse: notificationParser(workbench), whose: `VS Code's own, from ${path.relative(ROOT, workbench)}` };
}

describe('attack: what co-users write, through the editor', function () {
  this.timeout(120_000);

  describe('every surface shows it as text', () => {
    const { parse, whose } = notificationReader();

    it('notifications: no link or command VS Code would make, one line, no control or format character', () => {
      report(`notifications read with ${whose}`);
      let attacks = 0;
      for (const s of HOSTILE) {
        // As the commands put it in a message: among the editor's words, next to other fields.
        for (const message of [s, `Kept: eve/R1 (held by ${s}@${s} (pid 42)).`, `${s.slice(0, 4)}@${s.slice(4)} since now`]) {
          if (linksIn(parse(message)).length > 0) attacks++;
          const shown = notificationText(message);
          assert.deepEqual(linksIn(parse(shown)), [], `${JSON.stringify(message)} shown as ${JSON.stringify(shown)}`);
          assert.ok(!RAW.test(shown) && !/[\r\n]/.test(shown), JSON.stringify(shown));
        }
      }
      // The attack is real: raw, the same texts make links, commands among them.
      assert.ok(attacks >= 10, `${attacks} of the raw messages made links`);
      assert.ok(linksIn(parse(`Kept: ${HOSTILE[0]}`)).some((l) => l.href.startsWith('command:')));
    });

    it('VS Code\'s own reading and the port agree, where VS Code is installed', function () {
      const workbench = installedWorkbench(ROOT);
      if (workbench === undefined) this.skip();
      const own = notificationParser(workbench);
      for (const s of [...HOSTILE, ...HOSTILE.map(notificationText), 'x'.repeat(1200) + HOSTILE[0]]) assert.deepEqual(portedNotificationParser(s), own(s), JSON.stringify(s));
    });

    it('modal dialogs: a co-user\'s newline never starts a line of the list, and no link is made', () => {
      for (const s of HOSTILE) {
        const line = dialogLine(`eve/R1 — held by ${s}`);
        assert.ok(!/[\r\n]/.test(line) && !RAW.test(line), JSON.stringify(line));
        assert.deepEqual(linksIn(parse(line)), []);
      }
    });

    it('quick picks: no icon VS Code would draw, no link, one line', () => {
      // VS Code draws $(name) and $(name~modifier) unless a backslash comes before it.
      const icons = (text: string): string[] => [...text.matchAll(/(\\)?\$\(([A-Za-z0-9-]+(?:~[A-Za-z]+)?)\)/g)].filter((m) => m[1] === undefined).map((m) => m[2]);
      assert.deepEqual(icons(HOSTILE[10]), ['zap', 'sync~spin'], 'the attack draws icons');
      for (const s of HOSTILE) {
        const shown = pickText(s);
        assert.deepEqual(icons(shown), [], JSON.stringify(shown));
        assert.ok(!RAW.test(shown) && !/[\r\n]/.test(shown), JSON.stringify(shown));
        assert.deepEqual(linksIn(parse(shown)), []);
      }
      // What is no icon is shown as it was written.
      assert.equal(pickText('$(not an icon) \\$(escaped)'), '$(not an icon) \\$(escaped)');
    });

    it('tree rows and the log: one line, no control or format character; the clipboard: as the command line reads names back', () => {
      for (const s of HOSTILE) {
        for (const shown of [rowText(s), logText(s)]) assert.ok(!RAW.test(shown) && !/[\r\n]/.test(shown), JSON.stringify(shown));
        const copied = clipboardText(`/srv/static/${s}`);
        assert.ok(!RAW.test(copied) && !/[\r\n]/.test(copied), JSON.stringify(copied));
        assert.equal(readPrintable(copied), `/srv/static/${s}`, 'the name comes back whole');
      }
      assert.equal(clipboardText('/srv/static/eve/R1'), '/srv/static/eve/R1', 'a plain path is copied as it is');
    });

    it('Markdown (the details page, tooltips) as VS Code renders it, linkify on: no link from www., e-mail or // names', function () {
      let md: { renderInline(s: string): string };
      try {
        // Installed with @vscode/vsce; the integration test renders with VS Code's own engine.
        const MarkdownIt = require('markdown-it') as new (o: object) => { renderInline(s: string): string };
        md = new MarkdownIt({ html: true, linkify: true });
      } catch {
        this.skip();
      }
      for (const s of ['www.attacker.com', 'alice@attacker.com', '//attacker.com/x', 'see https://attacker.com/a', 'x.com', ...HOSTILE]) {
        const html = md.renderInline(literal(s));
        assert.ok(!/<a |<img |<script/.test(html), `${JSON.stringify(s)} rendered as ${html}`);
      }
      // The attack is real: raw, linkify makes links of them.
      for (const s of ['www.attacker.com', 'alice@attacker.com']) assert.ok(md.renderInline(s).includes('<a '), s);
    });
  });

  describe('a scan lists each real directory once', () => {
    let staticDir: string;
    let states: LockStates | undefined;
    const timing = { staleMs: 4_000, refreshMs: 1_000 };
    const warnings: string[] = [];

    beforeEach(() => {
      staticDir = tempDir('dss-scan-');
      warnings.length = 0;
    });

    afterEach(() => {
      states?.dispose();
      states = undefined;
      cleanup(staticDir);
    });

    it('two links to the folder they are in: one build, listed once, the links shown as that folder', async () => {
      const board = path.join(staticDir, 'board');
      fs.mkdirSync(path.join(board, 'R1'), { recursive: true });
      fs.writeFileSync(path.join(board, 'R1', 'staged.timestamp'), '');
      fs.symlinkSync('.', path.join(board, 'a'));
      fs.symlinkSync('.', path.join(board, 'b'));
      // And a folder elsewhere that is a link to the board.
      fs.mkdirSync(path.join(staticDir, 'other'));
      fs.symlinkSync('../board', path.join(staticDir, 'other', 'link'));
      // The links lead where they were planted to: the folder itself, at any depth.
      assert.equal(fs.statSync(path.join(board, 'a', 'b', 'a')).ino, fs.statSync(board).ino);
      states = new LockStates(timing, { warn: (m) => warnings.push(m) }, { watcher: inThreadWatcher });
      states.scan([staticDir]);
      const s = states;
      const twice = (): boolean => s.sameAs(staticDir, 'other/link') !== undefined || s.sameAs(staticDir, 'board') !== undefined;
      await waitFor(() => (s.sameAs(staticDir, 'board/a') !== undefined && s.sameAs(staticDir, 'board/b') !== undefined && twice()) || s.work.listings > 50 ? true : undefined, 20_000, 'the links found to be listed directories');
      await s.settled();
      // The root, board and other: each real directory once.
      assert.equal(s.work.listings, 3);
      assert.deepEqual(s.buildsUnder(staticDir, '').map((r) => r.tag), ['board/R1']);
      assert.equal(s.sameAs(staticDir, 'board/a'), 'board');
      assert.equal(s.sameAs(staticDir, 'board/b'), 'board');
      // Asked for, a link's folder is listed (its folders again only as what they are).
      const inside = await s.children(staticDir, 'board/a');
      assert.deepEqual(inside.map((r) => r.tag).sort(), ['board/a/R1', 'board/a/a', 'board/a/b']);
      await s.settled();
      assert.equal(s.work.listings, 4);
    });

    it('refuses the root of the filesystem, a home directory and a directory above one, listing and watching nothing', async () => {
      const home = tempDir('dss-home-');
      const saved = process.env.HOME;
      process.env.HOME = home;
      try {
        assert.equal(os.homedir(), home);
        for (const dir of ['/', home, path.dirname(home)]) {
          states?.dispose();
          states = new LockStates(timing, { warn: (m) => warnings.push(m) }, { watcher: inThreadWatcher });
          await rejectsWith(states.children(dir, ''), 'EBADSTATICDIR', /not a static directory of builds/);
          states.scan([dir]);
          await states.settled();
          assert.equal(states.work.listings, 0, dir);
          assert.equal(states.buildsUnder(dir, '').length, 0);
        }
        // So does `devserver-stage watch`, which follows a static directory the same way.
        const r = await run(process.execPath, [CLI, '-d', '/', 'watch', '--json'], { timeout: 20_000 });
        assert.notEqual(r.code, 0);
        assert.match(r.stderr + r.stdout, /not a static directory of builds/);
      } finally {
        process.env.HOME = saved;
        cleanup(home);
      }
    });

    it('stops listing folders on its own past its limit', () => {
      const seen = new ScannedDirs(3);
      const listed = (): boolean => true;
      assert.equal(seen.claim('1:1', '', listed), true);
      assert.equal(seen.claim('1:2', 'a', listed), true);
      assert.equal(seen.claim('1:2', 'a/b', listed), false, 'the same directory under another tag');
      assert.equal(seen.claim('1:2', 'a/b', () => false), true, 'unless the tag that had it is gone');
      assert.equal(seen.claim('1:3', 'c', listed), true);
      assert.equal(seen.claim('1:4', 'd', listed), 'full');
      assert.ok(seen.stopped);
    });
  });

  describe('a removal acts on the lock the dialog named', () => {
    let staticDir: string;
    const timing = { staleMs: 3_000, refreshMs: 1_000 };
    const tag = 'eve/R1';
    let bob: ChildProcess | undefined;

    beforeEach(() => {
      staticDir = tempDir('dss-named-');
      fs.mkdirSync(path.join(staticDir, tag), { recursive: true });
      fs.writeFileSync(path.join(staticDir, tag, 'image.bin'), 'x');
      fs.writeFileSync(path.join(staticDir, tag, 'staged.timestamp'), '');
    });

    afterEach(async () => {
      bob = undefined;
      await killAll();
      cleanup(staticDir);
    });

    /** A holder in its own process. */
    async function holder(): Promise<{ child: ChildProcess; token: string }> {
      const child = track(startWorker('holder', [JSON.stringify({ staticDir, tag, ...timing, createOnce: false, clientId: 'test:holder' })]));
      const m = await expectMessage<{ type: string; token: string }>(child, (x) => x.type === 'acquired' || x.type === 'error', 20_000, 'the holder');
      assert.equal(m.type, 'acquired');
      return { child, token: m.token };
    }

    /** Alice's lock, stale (her process killed), as a dialog shows it; then Bob takes it over. */
    async function aliceThenBob(): Promise<LockInfo> {
      const alice = await holder();
      alice.child.kill('SIGKILL');
      const shown = await waitFor(async () => {
        const i = await inspect(staticDir, tag, timing);
        return i.state === 'stale' ? i : undefined;
      }, 20_000, 'alice\'s lock stale');
      assert.equal(shown.holder?.token, alice.token);
      const b = await holder();
      bob = b.child;
      // The attack happened: the lock is Bob's, live, where Alice's was shown.
      const now = await inspect(staticDir, tag, timing);
      assert.equal(now.state, 'held');
      assert.equal(now.holder?.token, b.token);
      return shown;
    }

    it('destroy with the stale lock it showed: Bob, who took it over meanwhile, keeps his lock and the build', async () => {
      const shown = await aliceThenBob();
      const before = fingerprint(path.join(staticDir, tag));
      const token = readToken(path.join(staticDir, tag, 'devserver.lock'));
      const err = await rejectsWith(destroy(staticDir, tag, { ...timing, force: true, expect: shownLock(shown) }), 'ELOCKED', /not the one that was shown/);
      assert.equal(err.changed, true);
      assert.equal(err.lock?.holder?.clientId, 'test:holder');
      assert.equal(readToken(path.join(staticDir, tag, 'devserver.lock')), token, 'Bob\'s lock in place');
      assert.equal(fingerprint(path.join(staticDir, tag)), before, 'the build as it was');
      // Force-release with the instance shown leaves Bob's lock too.
      const { state: _state, ...instance } = shownLock(shown);
      const fr = await rejectsWith(forceRelease(staticDir, tag, { ...timing, expect: instance }), 'ELOCKED', /changed before it could be removed/);
      assert.equal(fr.changed, true);
      assert.equal(readToken(path.join(staticDir, tag, 'devserver.lock')), token);
      assert.ok(bob !== undefined && bob.exitCode === null, 'Bob still holds');
    });

    it('destroy of a build shown free: a lock taken since, even a stale one, is not taken over', async () => {
      const shown = await inspect(staticDir, tag, timing);
      assert.equal(shown.state, 'free');
      const alice = await holder();
      alice.child.kill('SIGKILL');
      await waitFor(async () => ((await inspect(staticDir, tag, timing)).state === 'stale' ? true : undefined), 20_000, 'a stale lock');
      await rejectsWith(destroy(staticDir, tag, { ...timing, expect: shownLock(shown) }), 'ELOCKED');
      assert.ok(fs.existsSync(path.join(staticDir, tag, 'image.bin')));
      // Without what was shown, destroy takes a stale lock over, as before.
      await destroy(staticDir, tag, { ...timing });
      assert.equal(fs.existsSync(path.join(staticDir, tag)), false);
    });

    it('destroy with the lock it showed, unchanged, breaks exactly that one', async () => {
      const b = await holder();
      const shown = await inspect(staticDir, tag, timing);
      await destroy(staticDir, tag, { ...timing, force: true, expect: shownLock(shown) });
      assert.equal(fs.existsSync(path.join(staticDir, tag)), false);
      await expectMessage(b.child, (m) => m.type === 'lost', 20_000, 'the holder told it lost its lock');
    });

    it('prune removes only what its preview showed, each as it was shown', async () => {
      const old = (t: string, daysAgo: number): void => {
        const dir = path.join(staticDir, t);
        fs.mkdirSync(dir, { recursive: true });
        fs.writeFileSync(path.join(dir, 'a.bin'), 'a');
        const stamp = path.join(dir, 'staged.timestamp');
        fs.writeFileSync(stamp, '');
        const at = new Date(Date.now() - daysAgo * 86_400_000);
        fs.utimesSync(stamp, at, at);
      };
      old('eve/R2', 30);
      old('eve/R3', 30);
      old('eve/R5', 30);
      const preview = await prune(staticDir, { ...timing, olderThan: 7 * 86_400_000, dryRun: true });
      assert.deepEqual(preview.removed.map((c) => c.tag).sort(), ['eve/R2', 'eve/R3', 'eve/R5']);
      // Meanwhile: R3 used again (still old enough to go), R4 aged past the limit, R5 locked by someone who died.
      const stamp = path.join(staticDir, 'eve/R3', 'staged.timestamp');
      const at = new Date(Date.now() - 20 * 86_400_000);
      fs.utimesSync(stamp, at, at);
      old('eve/R4', 30);
      const dead = track(startWorker('holder', [JSON.stringify({ staticDir, tag: 'eve/R5', ...timing, createOnce: false })]));
      await expectMessage(dead, (m) => m.type === 'acquired', 20_000, 'a holder of R5');
      dead.kill('SIGKILL');
      await waitFor(async () => ((await inspect(staticDir, 'eve/R5', timing)).state === 'stale' ? true : undefined), 20_000, 'R5 stale');
      const result = await prune(staticDir, { ...timing, olderThan: 7 * 86_400_000, expect: preview.removed.map((c) => ({ tag: c.tag, lastUsedMs: c.lastUsedMs })) });
      assert.deepEqual(result.removed.map((c) => c.tag), ['eve/R2']);
      const kept = new Map(result.skipped.map((s) => [s.tag, s.skippedBecause]));
      assert.match(kept.get('eve/R3') ?? '', /used since/);
      assert.match(kept.get('eve/R4') ?? '', /not among the builds shown/);
      assert.match(kept.get('eve/R5') ?? '', /stale|held/);
      for (const t of ['eve/R3', 'eve/R4', 'eve/R5']) assert.ok(fs.existsSync(path.join(staticDir, t, 'a.bin')), t);
      assert.equal(fs.existsSync(path.join(staticDir, 'eve/R2')), false);
    });
  });

  describe('nothing a co-user writes stalls the model', () => {
    let staticDir: string;

    beforeEach(() => {
      staticDir = tempDir('dss-stall-');
    });

    afterEach(async () => {
      await killAll();
      cleanup(staticDir);
    });

    it('timings that are no number, or huge, are clamped to a sane range', () => {
      for (const staleMs of [NaN, Infinity, -5, '10' as unknown as number, 2 ** 31, 25 * 86_400_000, 1e300]) {
        const t = clampTiming({ staleMs, refreshMs: staleMs });
        assert.ok(Number.isFinite(t.staleMs) && t.staleMs >= 2_000 && t.staleMs <= MAX_STALE_MS, `${String(staleMs)}: ${t.staleMs}`);
        assert.ok(t.refreshMs >= 1_000 && t.refreshMs <= t.staleMs / 2, `${String(staleMs)}: refresh ${t.refreshMs}`);
      }
      assert.equal(clampTiming({ staleMs: NaN }).staleMs, DEFAULT_TIMING.staleMs);
      assert.ok(MAX_STALE_MS < MAX_TIMER_MS);
    });

    it('a lock with no heartbeat is stale whatever the threshold given (no number) or the record claims (years, mtime in the future): and no timer overflows', async () => {
      const tag = 'eve/R1';
      fs.mkdirSync(path.join(staticDir, tag), { recursive: true });
      const timing = { staleMs: 3_000, refreshMs: 1_000 };
      const h = track(startWorker('holder', [JSON.stringify({ staticDir, tag, ...timing, createOnce: false })]));
      await expectMessage(h, (m) => m.type === 'acquired', 20_000, 'a holder');
      h.kill('SIGKILL');
      await waitFor(() => (h.exitCode !== null || h.signalCode !== null ? true : undefined), 10_000, 'the holder gone');
      const lock = path.join(staticDir, tag, 'devserver.lock');
      const record = JSON.parse(fs.readFileSync(path.join(lock, OWNER_FILE), 'utf8')) as Record<string, unknown>;
      // Another host (judged by its heartbeat only), claiming a threshold of 35 years.
      Object.assign(record, { hostname: 'elsewhere.example', staleMs: 2 ** 40, bootId: undefined, pidNamespace: undefined });
      fs.writeFileSync(path.join(lock, OWNER_FILE), JSON.stringify(record));
      const old = new Date(Date.now() - 8 * 86_400_000);
      fs.utimesSync(lock, old, old);
      // A threshold that is no number counts as none given: the lock is stale, not held.
      assert.equal((await inspect(staticDir, tag, { staleMs: NaN })).state, 'stale');
      assert.equal((await inspect(staticDir, tag, { staleMs: 'x' as unknown as number })).state, 'stale');
      // A held lock judged by the model: its expiry timer stays below Node's limit.
      const overflows: string[] = [];
      const onWarning = (w: Error): void => void (w.name === 'TimeoutOverflowWarning' && overflows.push(w.message));
      process.on('warning', onWarning);
      const states = new LockStates(timing, { warn: () => undefined }, { watcher: inThreadWatcher });
      try {
        const future = new Date(Date.now() + 30 * 365 * 86_400_000);
        fs.utimesSync(lock, future, future);
        states.scan([staticDir]);
        await waitFor(() => states.entry(staticDir, tag), 10_000, 'the lock judged');
        assert.equal(states.entry(staticDir, tag)?.state, 'held');
        await states.settled();
        await new Promise((r) => setImmediate(r));
        assert.deepEqual(overflows, []);
      } finally {
        states.dispose();
        process.off('warning', onWarning);
      }
    });

    it('a build of 100,000 files is made into rows a slice at a time, the event loop turning between slices', async () => {
      const files = 100_000;
      const tag = 'eve/R1';
      const dir = path.join(staticDir, tag);
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, 'staged.timestamp'), '');
      for (let i = 0; i < files; i++) fs.writeFileSync(path.join(dir, `f${i}`), '');
      // Each name is asked once whether it is bookkeeping, as the model calls the module.
      const states = new LockStates({ staleMs: 3_000, refreshMs: 1_000 }, { warn: () => undefined }, { watcher: inThreadWatcher });
      const { result: rows, most, total } = await callsPerTurn(require('../../../src/core/base/protocol') as object, 'isBookkeeping', () => true, () => states.artifactDir(staticDir, tag, '')).finally(() => states.dispose());
      assert.equal(rows.length, files, 'every file a row, the mark of staging not');
      assert.ok(total >= files, `each name was looked at (${total} of ${files})`);
      assert.ok(most < files * 0.8, `at most ${most} of ${files} names made into rows in one turn of the event loop`);
    });

    it('a hover reads the history at a glance: 40 planted segments of 4 MiB cost it at most 1 MiB, read without a synchronous call', async () => {
      const tag = 'eve/R1';
      fs.mkdirSync(path.join(staticDir, tag), { recursive: true });
      const [fan, dir] = historyDirOf(tag);
      const hist = path.join(staticDir, META_DIR, HISTORY_DIR, fan, dir);
      fs.mkdirSync(hist, { recursive: true });
      const line = `${JSON.stringify({ tag, kind: 'acquired', time: new Date().toISOString(), holder: { user: 'x', hostname: 'h', pid: 1, clientId: 'c' } })}\n`;
      const segment = Buffer.from(line.repeat(Math.ceil((4 * 1024 * 1024) / line.length)));
      for (let i = 0; i < 40; i++) fs.writeFileSync(path.join(hist, historySegmentName(`host${i}`, 0)), segment);
      const rchar = (): number => Number(/rchar: (\d+)/.exec(fs.readFileSync('/proc/self/io', 'utf8'))![1]);
      const syncCalls: string[] = [];
      // The module itself (an import's namespace only reads through to it), as the core calls it.
      const fsm = require('fs') as Record<string, (...a: unknown[]) => unknown>;
      const saved = new Map<string, (...a: unknown[]) => unknown>();
      for (const name of ['readSync', 'openSync', 'readdirSync', 'opendirSync', 'fstatSync']) {
        saved.set(name, fsm[name]);
        fsm[name] = (...a: unknown[]) => (syncCalls.push(name), saved.get(name)!(...a));
      }
      let turns = 0;
      const spin = (): void => void (turns++, stop || setImmediate(spin));
      let stop = false;
      setImmediate(spin);
      const before = rchar();
      let last;
      try {
        last = await lastHeld(staticDir, tag);
      } finally {
        stop = true;
        for (const [name, f] of saved) fsm[name] = f;
      }
      const read = rchar() - before;
      report(`lastHeld over 40 planted segments of 4 MiB: ${read} bytes read, ${turns} turns of the event loop meanwhile`);
      assert.equal(last, undefined);
      assert.ok(read < 1.5 * 1024 * 1024, `${read} bytes read`);
      assert.deepEqual(syncCalls, []);
      assert.ok(turns > 0, 'the event loop had its turns');
    });
  });
});
