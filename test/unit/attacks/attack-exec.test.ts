/**
 * `devserver-stage watch` and `watch --exec CMD` against what a hostile co-user writes and bad luck: holder
 * records planted by hand with shell syntax, control, bidi and format characters, lone surrogates,
 * bytes that are not UTF-8 and fields as large as a record may be (the kernel refuses an
 * environment string over 128 KiB: `E2BIG`); a flood of builds locked at once; a command that
 * hangs and ignores every signal. The command sees each event as values only, the watch goes on
 * after every one, runs one command at a time with a bounded queue, and ends when it is told to.
 */
import { strict as assert } from 'assert';
import { spawn, spawnSync, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { readPrintable } from '../../../src/core/base/format';
import { HISTORY_DIR, LOCK_NAME, META_DIR, OWNER_FILE, historyDirOf } from '../../../src/core/base/protocol';
import { changes, fingerprint, pidAlive, plantCanaries } from '../../attack';
import { CLI, ENV_RECORDER, cleanup, cli, exitOf, killAll, recordedEnvs, run, stagedBuilds, tempDir, track, waitFor } from '../../helpers';


/** The largest environment string the kernel takes (`MAX_ARG_STRLEN`, 32 pages). */
const MAX_ARG_STRLEN = 32 * 4096;

/**
 * A lock as a co-user plants it by hand: a record of a holder on another host (judged by its
 * heartbeat, so held), whose JSON text is `fields` spliced in as raw bytes, put in place whole.
 */
function plantLock(area: string | Buffer, fields: Buffer): void {
  const at = (name: string): Buffer => Buffer.concat([Buffer.from(area), Buffer.from(`/${name}`)]);
  fs.mkdirSync(at('planting'));
  const head = `{"pid":4242,"hostname":"elsewhere","acquiredAt":"${new Date().toISOString()}","token":"t${Date.now()}","fence":7,`;
  fs.writeFileSync(at(`planting/${OWNER_FILE}`), Buffer.concat([Buffer.from(head), fields, Buffer.from('}')]));
  fs.renameSync(at('planting'), at(LOCK_NAME));
}

const text = (fields: Record<string, string>): Buffer => Buffer.from(JSON.stringify(fields).slice(1, -1));
/** A JSON string field whose value is `count` bytes 0xFF: each becomes U+FFFD, three bytes in UTF-8. */
const notUtf8 = (name: string, count: number): Buffer => Buffer.concat([Buffer.from(`"${name}":"`), Buffer.alloc(count, 0xff), Buffer.from('"')]);

function watchExec(staticDir: string, args: readonly string[], env: NodeJS.ProcessEnv): { child: ChildProcess; out: () => string; err: () => string } {
  const child = track(spawn(process.execPath, [CLI, '--static-dir', staticDir, '--json', 'watch', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } }));
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  return { child, out: () => out, err: () => err };
}

const snapshotRead = (out: string): true | undefined => (out.includes('"snapshot"') ? true : undefined);

describe('attack: watch --exec against hostile records, floods and a stubborn command', function () {
  this.timeout(120_000);
  let root: string;
  let staticDir: string;
  let outside: string;
  let scratch: string;
  let before: Map<string, string>;

  beforeEach(() => {
    root = tempDir('dss-attack-exec-');
    staticDir = path.join(root, 'static');
    outside = path.join(root, 'outside');
    scratch = path.join(root, 'scratch');
    fs.mkdirSync(staticDir);
    fs.mkdirSync(scratch);
    plantCanaries(outside);
    before = fingerprint(outside);
  });
  afterEach(async () => {
    // A test that failed midway leaves no watch running.
    await killAll();
    assert.deepEqual(changes(outside, before, fingerprint(outside)), [], 'nothing outside the static directory changed');
    cleanup(root);
  });

  it('runs the command for every planted record, however hostile or large, and goes on after each', async () => {
    const marker = path.join(outside, 'pwned');
    const shell = `$(touch ${marker}) \`touch ${marker}\`; touch ${marker} & touch ${marker} | touch ${marker}\n'"`;
    const records: [string, Buffer][] = [
      // Fields of 60,000 bytes that are not UTF-8: 180,000 bytes each in the environment, over the kernel's limit.
      ['huge-user', Buffer.concat([notUtf8('user', 60_000), Buffer.from(',"purpose":"p"')])],
      ['huge-host-purpose', Buffer.concat([Buffer.from('"user":"u",'), notUtf8('purpose', 30_000), Buffer.from(','), notUtf8('clientId', 30_000)])],
      ['shell', text({ user: shell, purpose: shell, clientId: shell })],
      ['controls', text({ user: 'mallory\u001b]0;pwned\u0007\u001b[2J', purpose: 'a\u0001\u007f\u0085\u009b31m\u202eevil\u2028\u2029\u200b\ufeff', clientId: 'c' })],
      ['surrogates', Buffer.from('"user":"lone\\ud800 and \\udfff","purpose":"\\ud83d","clientId":"c"')],
      ['benign', text({ user: 'bob', purpose: 'after all of them', clientId: 'c' })],
    ];
    const file = path.join(scratch, 'events');
    // A command of the watch's own environment names a variable of the events: the events' values win.
    const w = watchExec(staticDir, ['--exec', `${JSON.stringify(process.execPath)} -e "${ENV_RECORDER.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`], { OUT_FILE: file, DSS_BY_USER: 'outer', DSS_HOLDER_USER: 'outer' });
    for (const [name] of records) {
      fs.mkdirSync(path.join(staticDir, 'board', name), { recursive: true });
      fs.writeFileSync(path.join(staticDir, 'board', name, 'staged.timestamp'), '');
    }
    await waitFor(() => snapshotRead(w.out()), 20_000, 'the snapshot');
    let trials = 0;
    for (const [name, fields] of records) {
      plantLock(path.join(staticDir, 'board', name), fields);
      await waitFor(() => (recordedEnvs(file).some((e) => e.DSS_TAG === `board/${name}` && e.DSS_EVENT === 'taken') ? true : undefined), 20_000, `the command for ${name}`).catch((err: Error) => {
        throw new Error(`${err.message} (watch ${w.child.exitCode === null ? 'running' : `exited ${w.child.exitCode}`}; stderr: ${w.err().slice(0, 400)})`);
      });
      trials++;
    }
    assert.equal(trials, records.length);
    assert.equal(w.child.exitCode, null, 'the watch still runs');
    const seen = new Map(recordedEnvs(file).filter((e) => e.DSS_EVENT === 'taken').map((e) => [e.DSS_TAG, e]));
    for (const [name] of records) {
      const env = seen.get(`board/${name}`)!;
      // Each value reached the command: the kernel took every string of the environment.
      for (const [k, v] of Object.entries(env)) assert.ok(Buffer.byteLength(`${k}=${v}`) < MAX_ARG_STRLEN, `${name}: ${k} is ${Buffer.byteLength(v)} bytes`);
      const line = JSON.parse(env.DSS_EVENT_JSON) as { tag: string; user: string };
      assert.equal(line.tag, `board/${name}`);
      assert.equal(env.DSS_BY_USER, undefined, `${name}: no one broke a lock, whatever the watch's own environment says`);
      assert.notEqual(env.DSS_HOLDER_USER, 'outer');
    }
    // The planted values, as values: the shell syntax whole, the huge field there (cut short).
    assert.equal(seen.get('board/shell')!.DSS_HOLDER_PURPOSE, shell);
    assert.equal(seen.get('board/shell')!.DSS_HOLDER_USER, shell);
    assert.ok(seen.get('board/huge-user')!.DSS_HOLDER_USER.startsWith('\ufffd'.repeat(400)));
    assert.ok(seen.get('board/huge-host-purpose')!.DSS_HOLDER_PURPOSE.startsWith('\ufffd'.repeat(400)));
    assert.equal(seen.get('board/controls')!.DSS_HOLDER_USER, 'mallory\u001b]0;pwned\u0007\u001b[2J');
    assert.equal(seen.get('board/surrogates')!.DSS_HOLDER_USER, 'lone\ufffd and \ufffd');
    assert.equal(seen.get('board/benign')!.DSS_HOLDER_PURPOSE, 'after all of them');
    assert.equal(fs.existsSync(marker), false, 'nothing in a record ran');
    assert.doesNotMatch(w.err(), /could not start/, w.err());
    // One JSON line per event, whatever the records hold: no forged row.
    const lines = w.out().trim().split('\n');
    for (const l of lines) assert.doesNotMatch(l, /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202e]/, l.slice(0, 200));
    const parsed = lines.map((l) => JSON.parse(l) as { event: string; tag: string; kind?: string });
    for (const [name] of records) assert.equal(parsed.filter((p) => p.tag === `board/${name}` && p.kind === 'taken').length, 1, name);
    w.child.kill('SIGINT');
    assert.equal((await exitOf(w.child)).code, 130);
  });
  it('sets no variable a co-user names: the command\'s environment is the watch\'s own and the documented DSS_* names', async () => {
    const tag = 'board/R1';
    fs.mkdirSync(path.join(staticDir, tag), { recursive: true });
    fs.writeFileSync(path.join(staticDir, tag, 'staged.timestamp'), '');
    const file = path.join(scratch, 'env');
    const own = { OUT_FILE: file, PATH: process.env.PATH ?? '/usr/bin:/bin' };
    const w = watchExec(staticDir, ['--exec', `sh -c 'env -0 > "$OUT_FILE"'`], own);
    await waitFor(() => snapshotRead(w.out()), 20_000, 'the snapshot');
    // Fields named as variables a program obeys, and values that hold another assignment.
    const planted = { user: 'x\u0000LD_PRELOAD=/tmp/evil.so\nBASH_ENV=/tmp/evil', purpose: 'PATH=/tmp/evil', clientId: 'NODE_OPTIONS=--require /tmp/evil.js', LD_PRELOAD: '/tmp/evil.so', PATH: '/tmp/evil', BASH_ENV: '/tmp/evil', NODE_OPTIONS: '--require /tmp/evil.js', DSS_EVENT: 'forged' };
    plantLock(path.join(staticDir, tag), text(planted));
    const entries = await waitFor(() => (fs.existsSync(file) && fs.statSync(file).size > 0 ? fs.readFileSync(file, 'utf8').split('\0').filter((e) => e !== '') : undefined), 20_000, 'the command ran');
    const env = new Map(entries.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
    const documented = ['DSS_EVENT', 'DSS_TAG', 'DSS_STATIC_DIR', 'DSS_STATE', 'DSS_TIME', 'DSS_HOLDER_USER', 'DSS_HOLDER_HOST', 'DSS_HOLDER_PID', 'DSS_HOLDER_PURPOSE', 'DSS_BY_USER', 'DSS_BY_HOST', 'DSS_BY_PID', 'DSS_BY_PURPOSE', 'DSS_PREVIOUS_USER', 'DSS_PREVIOUS_HOST', 'DSS_PREVIOUS_PID', 'DSS_PREVIOUS_PURPOSE', 'DSS_TOKEN', 'DSS_RESERVED_UNTIL', 'DSS_EVENT_JSON'];
    const expected = new Set([...Object.keys({ ...process.env, ...own }).filter((k) => !k.startsWith('DSS_')), ...documented]);
    // sh adds a few of its own (PWD, SHLVL, _).
    const unexpected = [...env.keys()].filter((k) => !expected.has(k) && !['PWD', 'SHLVL', '_', 'OLDPWD'].includes(k));
    assert.deepEqual(unexpected, [], 'names no one documented');
    for (const k of ['LD_PRELOAD', 'BASH_ENV', 'NODE_OPTIONS']) assert.equal(env.get(k), process.env[k], k);
    assert.equal(env.get('PATH'), own.PATH);
    assert.equal(env.get('DSS_EVENT'), 'taken');
    // The attack reached the command, as values.
    assert.equal(env.get('DSS_HOLDER_USER'), 'x\\0LD_PRELOAD=/tmp/evil.so\nBASH_ENV=/tmp/evil');
    assert.equal(env.get('DSS_HOLDER_PURPOSE'), 'PATH=/tmp/evil');
    w.child.kill('SIGTERM');
    assert.equal((await exitOf(w.child)).code, 143);
  });

  it('prints one plain line per event whatever the records hold: no forged row, no control character', async () => {
    const records: [string, Buffer][] = [
      ['shell', text({ user: 'a$(id)`id`;id', purpose: 'p', clientId: 'c' })],
      ['forge', text({ user: 'mallory\n2030-01-01T00:00:00.000Z  board/forged  free', purpose: 'x\r2030-01-01T00:00:00.000Z  board/forged  held', clientId: 'c\u2028' })],
      ['reserved', text({ user: 'r', purpose: 'note\n2030-01-01T00:00:00.000Z  board/forged  free', clientId: 'c', reservedUntil: '2030-01-01T00:00:00Z (\n2030-01-01T00:00:00.000Z  board/forged  free)' })],
      ['controls', text({ user: 'u\u001b]0;t\u0007\u009b31m\u202e', purpose: 'p', clientId: 'c' })],
      ['huge', Buffer.concat([notUtf8('user', 60_000), Buffer.from(',"purpose":"p","clientId":"c"')])],
    ];
    for (const [name] of records) {
      fs.mkdirSync(path.join(staticDir, 'board', name), { recursive: true });
      fs.writeFileSync(path.join(staticDir, 'board', name, 'staged.timestamp'), '');
    }
    const child = track(spawn(process.execPath, [CLI, '--static-dir', staticDir, 'watch'], { stdio: ['ignore', 'pipe', 'pipe'] }));
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    await waitFor(() => (out.split('\n').length > records.length ? true : undefined), 20_000, 'the snapshot');
    for (const [name, fields] of records) plantLock(path.join(staticDir, 'board', name), fields);
    const lines = (): string[] => out.split('\n').filter((l) => l !== '');
    await waitFor(() => (lines().length >= 2 * records.length ? true : undefined), 20_000, 'a line per event');
    child.kill('SIGTERM');
    assert.equal((await exitOf(child)).code, 143);
    for (const l of lines()) {
      assert.match(l, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z {2}board\/(shell|forge|reserved|controls|huge) {2}/, `a forged row: ${JSON.stringify(l.slice(0, 200))}`);
      assert.doesNotMatch(l, /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029\u202e]/u, l.slice(0, 200));
    }
    // The planted text was read, and shown escaped.
    assert.match(out, /mallory\\n2030-01-01T00:00:00.000Z {2}board\/forged {2}free/);
    assert.match(out, /u\\u001b\]0;t\\u0007\\u009b31m\\u202e/);
    assert.equal(lines().filter((l) => / board\/(shell|forge|reserved|controls|huge) {2}held/.test(l)).length, records.length);
  });

  it('names a build whose name is not UTF-8 by the form the command line takes back, never by the name of another build', async () => {
    const board = path.join(staticDir, 'board');
    fs.mkdirSync(board);
    // R\xff, and the build its bytes would name if decoded the usual way: R\ufffd (EF BF BD).
    const raw = Buffer.concat([Buffer.from(`${board}/R`), Buffer.from([0xff])]);
    fs.mkdirSync(raw);
    fs.writeFileSync(Buffer.concat([raw, Buffer.from('/staged.timestamp')]), '');
    fs.mkdirSync(path.join(board, 'R\ufffd'));
    fs.writeFileSync(path.join(board, 'R\ufffd', 'staged.timestamp'), '');
    const file = path.join(scratch, 'tag');
    const w = watchExec(staticDir, ['--exec', `sh -c 'printf %s "$DSS_TAG" > "$OUT_FILE"; "$NODE" "$CLI" --json status "$DSS_TAG" > "$OUT_FILE.status"'`], { OUT_FILE: file, NODE: process.execPath, CLI, DEVSERVER_STATIC_DIR: staticDir });
    await waitFor(() => snapshotRead(w.out()), 20_000, 'the snapshot');
    plantLock(raw, text({ user: 'mallory', purpose: 'raw', clientId: 'c' }));
    const status = await waitFor(() => (fs.existsSync(`${file}.status`) && fs.readFileSync(`${file}.status`, 'utf8').endsWith('\n') ? fs.readFileSync(`${file}.status`, 'utf8') : undefined), 20_000, 'the command ran status');
    assert.equal(readPrintable(fs.readFileSync(file, 'utf8')), 'board/R\udcff', 'DSS_TAG reads back as the build that changed');
    // The command line, given DSS_TAG, looked at the build that changed: the planted lock, not the free R\ufffd.
    const info = JSON.parse(status) as { state: string; holder?: { user: string } };
    assert.equal(info.state, 'held', status);
    assert.equal(info.holder?.user, 'mallory');
    w.child.kill('SIGTERM');
    assert.equal((await exitOf(w.child)).code, 143);
  });

  it('says who really broke a lock, whatever lines dated far ahead, planted with its token, say', async () => {
    const tag = 'board/R1';
    fs.mkdirSync(path.join(staticDir, tag), { recursive: true });
    fs.writeFileSync(path.join(staticDir, tag, 'staged.timestamp'), '');
    const file = path.join(scratch, 'events');
    const w = watchExec(staticDir, ['--exec', `${JSON.stringify(process.execPath)} -e "${ENV_RECORDER.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`], { OUT_FILE: file });
    await waitFor(() => snapshotRead(w.out()), 20_000, 'the snapshot');
    assert.equal((await cli(staticDir, ['reserve', tag, '--for', '1h'])).code, 0);
    const reserved = await waitFor(() => recordedEnvs(file).find((e) => e.DSS_EVENT === 'reserved'), 20_000, 'reserved');
    // 60 lines dated in the year 10000 with the lock's token, naming another breaker: more than the 50 newest a lookup reads.
    const dir = path.join(staticDir, META_DIR, HISTORY_DIR, ...historyDirOf(tag));
    const line = (k: number): string => `${JSON.stringify({ tag, kind: 'force-released', time: new Date(Date.parse('+010000-01-01T00:00:00Z') + k).toISOString(), holder: { user: 'boss', hostname: 'admin', pid: 1, clientId: 'c' }, fence: Number(reserved.DSS_TOKEN) })}\n`;
    fs.appendFileSync(path.join(dir, 'planted.0.jsonl'), Array.from({ length: 60 }, (_, k) => line(k)).join(''));
    const fr = await run('unshare', ['--uts', 'sh', '-c', 'hostname elsewhere && exec "$@"', 'sh', process.execPath, CLI, '--static-dir', staticDir, 'force-release', tag]);
    assert.equal(fr.code, 0, fr.stderr);
    const broken = await waitFor(() => recordedEnvs(file).find((e) => e.DSS_EVENT === 'force-released' || e.DSS_EVENT === 'removed' || e.DSS_EVENT === 'released'), 20_000, 'the end of the reservation');
    assert.equal(broken.DSS_EVENT, 'force-released');
    assert.equal(broken.DSS_BY_HOST, 'elsewhere');
    w.child.kill('SIGTERM');
    assert.equal((await exitOf(w.child)).code, 143);
  });

  it('runs one command at a time through a flood of 1,000 builds locked at once, the oldest waiting dropped and each said', async () => {
    const builds = 1_000;
    stagedBuilds(path.join(staticDir, 'flood'), builds);
    // An O_EXCL marker (mkdir) held while each command runs: two at once would clash.
    const script = 'mkdir "$OUT_DIR/running" 2>/dev/null || echo clash >> "$OUT_DIR/clash"; echo "$DSS_EVENT $DSS_TAG" >> "$OUT_DIR/ran"; sleep 0.01; rmdir "$OUT_DIR/running"';
    const w = watchExec(staticDir, ['--exec', `sh -c '${script}'`], { OUT_DIR: scratch });
    await waitFor(() => snapshotRead(w.out()), 30_000, 'the snapshot');
    for (let i = 0; i < builds; i++) plantLock(path.join(staticDir, 'flood', `R${i}`), text({ user: 'mallory', purpose: `flood ${i}`, clientId: `c${i}` }));
    const taken = (): number => w.out().split('\n').filter((l) => l.includes('"kind":"taken"')).length;
    await waitFor(() => (taken() === builds ? true : undefined), 60_000, `a line for each of the ${builds} builds`).catch((err: Error) => {
      throw new Error(`${err.message}: ${taken()} seen`);
    });
    const ranTaken = (): number => (fs.existsSync(path.join(scratch, 'ran')) ? fs.readFileSync(path.join(scratch, 'ran'), 'utf8').split('\n').filter((l) => l.startsWith('taken ')).length : 0);
    const droppedTaken = (): number => w.err().split('\n').filter((l) => / the taken event of flood\/R\d+ at .* was dropped/.test(l)).length;
    await waitFor(() => (ranTaken() + droppedTaken() === builds ? true : undefined), 60_000, 'every event run or said dropped').catch((err: Error) => {
      throw new Error(`${err.message}: ${ranTaken()} ran, ${droppedTaken()} dropped`);
    });
    assert.equal(fs.existsSync(path.join(scratch, 'clash')), false, 'never two commands at once');
    assert.ok(droppedTaken() > 0, 'the flood outran the command (else nothing was attacked)');
    assert.ok(ranTaken() > 0);
    assert.equal(w.child.exitCode, null, 'the watch still runs');
    w.child.kill('SIGTERM');
    assert.equal((await exitOf(w.child)).code, 143);
  });

  it('ends on SIGTERM while its command fills a stderr nobody reads, through a flood of events', async () => {
    const builds = 150;
    stagedBuilds(path.join(staticDir, 'noisy'), builds);
    // stderr a pipe never read (a FIFO, as a shell's 2>fifo makes): 64 KiB fill it, and a blocking write to it then waits for ever.
    const fifo = path.join(scratch, 'stderr');
    assert.equal(spawnSync('mkfifo', [fifo]).status, 0);
    const unread = fs.openSync(fifo, 'r+');
    // The watch gets the writing end only: once this test closes its end, a writer left meets no reader and ends.
    const end = fs.openSync(fifo, 'w');
    const child = track(spawn(process.execPath, [CLI, '--static-dir', staticDir, '--json', 'watch', '--exec', `sh -c 'head -c 1000000 /dev/zero >&2; exit 3'`], { stdio: ['ignore', 'pipe', end] }));
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    try {
      await waitFor(() => snapshotRead(out), 20_000, 'the snapshot');
      for (let i = 0; i < builds; i++) plantLock(path.join(staticDir, 'noisy', `R${i}`), text({ user: 'mallory', purpose: 'noise', clientId: `c${i}` }));
      // More events than the queue holds: the watch has things of its own to say on stderr.
      const taken = (): number => out.split('\n').filter((l) => l.includes('"kind":"taken"')).length;
      await waitFor(() => (taken() === builds ? true : undefined), 30_000, 'a line for each build').catch((err: Error) => {
        throw new Error(`${err.message}: ${taken()} lines; the watch stopped writing`);
      });
      child.kill('SIGTERM');
      const ended = await Promise.race([exitOf(child), new Promise<undefined>((r) => setTimeout(() => r(undefined), 20_000))]);
      assert.notEqual(ended, undefined, 'the watch did not end on SIGTERM: it waits on its stderr');
      assert.equal(ended!.code, 143);
    } finally {
      child.kill('SIGKILL');
      fs.closeSync(end);
      fs.closeSync(unread);
    }
  });

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`ends on ${signal} while its command hangs and ignores every signal, leaving the command to end on its own`, async () => {
      const trials = 2;
      let ran = 0;
      for (let t = 0; t < trials; t++) {
        const tag = `stubborn/R${t}`;
        fs.mkdirSync(path.join(staticDir, tag), { recursive: true });
        fs.writeFileSync(path.join(staticDir, tag, 'staged.timestamp'), '');
        const pidFile = path.join(scratch, `pid${t}`);
        const w = watchExec(staticDir, ['--exec', `sh -c 'trap "" TERM INT HUP QUIT; echo $$ > "$PID_FILE"; exec sleep 600'`, tag], { PID_FILE: pidFile });
        await waitFor(() => snapshotRead(w.out()), 20_000, 'the snapshot');
        plantLock(path.join(staticDir, tag), text({ user: 'mallory', purpose: 'hang', clientId: 'c' }));
        const pid = await waitFor(() => (fs.existsSync(pidFile) && fs.readFileSync(pidFile, 'utf8').endsWith('\n') ? Number(fs.readFileSync(pidFile, 'utf8')) : undefined), 20_000, 'the command started');
        try {
          w.child.kill(signal);
          const ended = await Promise.race([exitOf(w.child), new Promise<undefined>((r) => setTimeout(() => r(undefined), 20_000))]);
          assert.notEqual(ended, undefined, `the watch did not end on ${signal} while its command ran`);
          assert.equal(ended!.code, signal === 'SIGTERM' ? 143 : 130);
          // The command got the signal's like (or nothing) and ignored it: it still runs.
          assert.ok(pidAlive(pid), 'the stubborn command still runs, so the watch ended without it');
          ran++;
        } finally {
          process.kill(pid, 'SIGKILL');
          w.child.kill('SIGKILL');
        }
      }
      assert.equal(ran, trials);
    });
  }
});
