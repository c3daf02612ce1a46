/**
 * `devserver-stage watch --exec CMD`: the command run once per event that other processes make
 * with real locks and reservations (reserved, extended, force-released from another host, taken,
 * destroyed), each with the event in its environment; a co-user's hostile note reaches it only as
 * a value, never run; a slow command holds a capped queue and says what it dropped.
 */
import { strict as assert } from 'assert';
import { spawn, spawnSync, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { commandWords } from '../../../src/cli/commandWords';
import { ExecQueue } from '../../../src/cli/watchExec';
import { textOf, type WatchLine } from '../../../src/cli/watchLines';
import { CLI, ENV_RECORDER, cleanup, cli, exitOf, recordedEnvs, run, tempDir, track, waitFor } from '../../helpers';


function watchExec(staticDir: string, exec: string, env: NodeJS.ProcessEnv): { child: ChildProcess; out: () => string; err: () => string } {
  const child = track(spawn(process.execPath, [CLI, '--static-dir', staticDir, '--json', 'watch', '--exec', exec], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } }));
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  return { child, out: () => out, err: () => err };
}

const otherHost = (staticDir: string, args: string[]): Promise<{ code: number | null; stderr: string }> =>
  run('unshare', ['--uts', 'sh', '-c', 'hostname elsewhere && exec "$@"', 'sh', process.execPath, CLI, '--static-dir', staticDir, ...args]);

describe('devserver-stage watch --exec', function () {
  let staticDir: string;
  let scratch: string;
  beforeEach(() => {
    staticDir = tempDir('dss-wexec-');
    scratch = tempDir('dss-wexec-out-');
    fs.mkdirSync(path.join(staticDir, 'eve/R1'), { recursive: true });
    fs.writeFileSync(path.join(staticDir, 'eve/R1/staged.timestamp'), '');
  });
  afterEach(() => {
    cleanup(staticDir);
    cleanup(scratch);
  });

  it('runs the command once per event other processes make, with the event and who did it in its environment', async () => {
    const file = path.join(scratch, 'events');
    const w = watchExec(staticDir, `${JSON.stringify(process.execPath)} -e "${ENV_RECORDER.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`, { OUT_FILE: file });
    await waitFor(() => (w.out().includes('"snapshot"') ? true : undefined), 10_000, 'the snapshot');
    const kinds = (): string[] => recordedEnvs(file).map((e) => e.DSS_EVENT);
    assert.equal((await cli(staticDir, ['reserve', 'eve/R1', '--for', '1h', '--note', 'demo'])).code, 0);
    await waitFor(() => (kinds().includes('reserved') ? true : undefined), 10_000, 'reserved');
    assert.equal((await cli(staticDir, ['reserve', 'eve/R1', '--extend', '--for', '2h'])).code, 0);
    await waitFor(() => (kinds().includes('extended') ? true : undefined), 10_000, 'extended');
    const fr = await otherHost(staticDir, ['force-release', 'eve/R1']);
    assert.equal(fr.code, 0, fr.stderr);
    await waitFor(() => (kinds().includes('force-released') ? true : undefined), 10_000, 'force-released');
    assert.equal((await cli(staticDir, ['destroy', 'eve/R1'])).code, 0);
    await waitFor(() => (kinds().includes('destroyed') ? true : undefined), 10_000, 'destroyed');
    const events = recordedEnvs(file);
    // The snapshot is no event; destroy takes the lock before it removes the build.
    assert.deepEqual(
      kinds().filter((k) => k !== 'taken'),
      ['reserved', 'extended', 'force-released', 'destroyed'],
    );
    const me = spawnSync('id', ['-un']).stdout.toString().trim();
    const reserved = events.find((e) => e.DSS_EVENT === 'reserved')!;
    assert.equal(reserved.DSS_TAG, 'eve/R1');
    assert.equal(reserved.DSS_STATIC_DIR, staticDir);
    assert.equal(reserved.DSS_HOLDER_USER, me);
    assert.equal(reserved.DSS_HOLDER_PURPOSE, 'demo');
    assert.ok(reserved.DSS_RESERVED_UNTIL !== undefined);
    const extended = events.find((e) => e.DSS_EVENT === 'extended')!;
    assert.ok(Date.parse(extended.DSS_RESERVED_UNTIL) > Date.parse(reserved.DSS_RESERVED_UNTIL));
    const broken = events.find((e) => e.DSS_EVENT === 'force-released')!;
    assert.equal(broken.DSS_BY_HOST, 'elsewhere');
    assert.equal(broken.DSS_BY_USER, me);
    assert.equal(broken.DSS_HOLDER_PURPOSE, 'demo', 'the holder whose reservation was broken');
    assert.notEqual(broken.DSS_HOLDER_HOST, 'elsewhere');
    const json = JSON.parse(broken.DSS_EVENT_JSON) as WatchLine;
    assert.equal(json.kind, 'force-released');
    assert.equal(json.by?.host, 'elsewhere');
    const destroyed = events.find((e) => e.DSS_EVENT === 'destroyed')!;
    assert.equal(destroyed.DSS_STATE, 'gone');
    assert.ok(destroyed.DSS_BY_PID !== undefined);
    w.child.kill('SIGINT');
    assert.equal((await exitOf(w.child)).code, 130);
    assert.equal(w.err(), '', 'every command exited 0, so nothing was said');
  });

  it('gives a hostile note to the command only as a value: nothing in it runs, in the command or a shell it starts', async () => {
    const marker = path.join(scratch, 'pwned');
    const hostile = `$(touch ${marker}) \`touch ${marker}\`\n; touch ${marker} "'`;
    const file = path.join(scratch, 'seen');
    // A shell that uses the value as a value, as a careful script does.
    const w = watchExec(staticDir, `sh -c 'printf "%s" "$DSS_HOLDER_PURPOSE" > "$OUT_FILE"; exit 4'`, { OUT_FILE: file });
    await waitFor(() => (w.out().includes('"snapshot"') ? true : undefined), 10_000, 'the snapshot');
    assert.equal((await cli(staticDir, ['reserve', 'eve/R1', '--for', '1h', '--note', hostile])).code, 0);
    await waitFor(() => (/exited with status 4/.test(w.err()) ? true : undefined), 10_000, 'the command ran');
    // The note really reached the command whole, and nothing of it was run.
    assert.equal(fs.readFileSync(file, 'utf8'), hostile);
    assert.equal(fs.existsSync(marker), false);
    assert.match(w.err(), /--exec sh for the reserved event of eve\/R1 exited with status 4\./);
    w.child.kill('SIGTERM');
    assert.equal((await exitOf(w.child)).code, 143);
  });

  it('prints who broke a lock on one line, escaped, whatever their record holds', () => {
    const hostile = 'bob\n2030-01-01T00:00:00Z  eve/R9  free\u001b]0;x\u0007';
    const text = textOf({ time: '2030-01-01T00:00:00.000Z', event: 'change', kind: 'force-released', tag: 'eve/R1', state: 'free', by: { user: hostile, host: 'h', pid: 5 } });
    assert.equal(text.split('\n').length, 2, text);
    assert.doesNotMatch(text, /[\u0000-\u001f](?!$)/);
    assert.match(text, /^2030-01-01T00:00:00.000Z {2}eve\/R1 {2}free {2}\(force-released\) {2}by "bob\\n2030-01-01T00:00:00Z {2}eve\/R9 {2}free\\u001b\]0;x\\u0007@h" pid 5$/m);
  });

  it('splits CMD into words without expanding anything, and refuses an unclosed quote', () => {
    assert.deepEqual(commandWords(`sh -c 'echo "$DSS_TAG" $(x)'`), ['sh', '-c', 'echo "$DSS_TAG" $(x)']);
    assert.deepEqual(commandWords(`notify-send "a \\"b\\"" c\\ d ''`), ['notify-send', 'a "b"', 'c d', '']);
    assert.throws(() => commandWords(`sh -c 'echo`), /unclosed ' quote/);
    assert.throws(() => commandWords('   '), /expected a command/);
  });

  it('runs one command at a time, in order; a slow one makes the oldest waiting events dropped and said, never more than the cap held', async () => {
    const gate = path.join(scratch, 'gate');
    const file = path.join(scratch, 'ran');
    fs.writeFileSync(gate, '');
    const script = `const fs=require('fs');fs.appendFileSync(${JSON.stringify(file)},process.env.DSS_TAG+' start\\n');const t=setInterval(()=>{if(!fs.existsSync(${JSON.stringify(gate)})){clearInterval(t);fs.appendFileSync(${JSON.stringify(file)},process.env.DSS_TAG+' end\\n')}},10)`;
    let said = '';
    const q = new ExecQueue([process.execPath, '-e', script], staticDir, { write: (t: string) => (said += t) }, 3);
    const line = (i: number): WatchLine => ({ time: new Date().toISOString(), event: 'change', kind: 'taken', tag: `b${i}` });
    for (let i = 0; i < 10; i++) q.put(line(i));
    await waitFor(() => (fs.existsSync(file) ? true : undefined), 10_000, 'the first command started');
    // b0 runs; b1..b9 came while it ran: the cap of 3 kept b7, b8, b9 and dropped b1..b6.
    const dropped = said.split('\n').filter((l) => l.includes('was dropped'));
    assert.equal(dropped.length, 6);
    for (let i = 1; i <= 6; i++) assert.ok(dropped[i - 1].includes(`event of b${i} at`), dropped[i - 1]);
    fs.rmSync(gate);
    await waitFor(() => (fs.readFileSync(file, 'utf8').split('\n').length === 9 ? true : undefined), 20_000, 'all commands ran');
    // Never two at once: each ended before the next started.
    assert.deepEqual(fs.readFileSync(file, 'utf8').trim().split('\n'), ['b0 start', 'b0 end', 'b7 start', 'b7 end', 'b8 start', 'b8 end', 'b9 start', 'b9 end']);
    q.stop();
  });
});
