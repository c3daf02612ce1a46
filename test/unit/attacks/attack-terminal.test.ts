/**
 * A hostile co-user writes escape sequences where the command line will print them: in a lock's
 * owner record (user, host, purpose, client, time), in a build's name, and in the names of the
 * files someone stages. Whoever runs `list`, `status`, `watch`, a `lock` that finds the build
 * held, or `stage` and `verify` of such files must see them as text: no control character but
 * newline and tab reaches the terminal (or the CI log that shows one), and no forged line appears.
 */
import { strict as assert } from 'assert';
import { spawn, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { LOCK_NAME, OWNER_FILE } from '../../../src/core/base/protocol';
import { CLI, cleanup, cli, tempDir, waitFor } from '../../helpers';

/** What a terminal would obey: C0 but newline and tab, DEL, C1. */
const OBEYED = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;
const TITLE = '\u001b]0;pwned\u0007';
const CLEAR = '\u001b[2J\u001b[H';
const FORGED = 'free  board/R9';
const C1_CSI = '\u009b31m';

function assertInert(what: string, text: string): void {
  const at = OBEYED.exec(text);
  assert.equal(at, null, `${what} sends ${JSON.stringify(at?.[0])} to the terminal:\n${JSON.stringify(text)}`);
  for (const line of text.split('\n')) assert.ok(!line.startsWith(FORGED), `${what} shows a forged line: ${JSON.stringify(line)}`);
}

describe('attack: escape sequences in owner records and build names reach the terminal only as text', function () {
  this.timeout(60_000);
  let root: string;
  let staticDir: string;
  let holder: ChildProcess | undefined;

  before(async () => {
    root = tempDir('dss-terminal-');
    staticDir = path.join(root, 'static');
    fs.mkdirSync(path.join(staticDir, 'board', 'R1'), { recursive: true });
    fs.mkdirSync(path.join(staticDir, 'board', `R2${C1_CSI}`), { recursive: true });
    holder = spawn(process.execPath, [CLI, 'lock', '--purpose', `nightly${TITLE}`, 'board/R1', '--', 'sleep', '60'], {
      env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir },
      stdio: 'ignore',
    });
    const record = path.join(staticDir, 'board', 'R1', LOCK_NAME, OWNER_FILE);
    await waitFor(() => (fs.existsSync(record) ? true : undefined), 20_000, 'the lock to be held');
    // The co-user rewrites the record: every field a person reads carries a sequence.
    const owner = JSON.parse(fs.readFileSync(record, 'utf8')) as Record<string, unknown>;
    Object.assign(owner, {
      user: `mallory${CLEAR}`,
      hostname: `build${TITLE}host`,
      purpose: `nightly\n${FORGED}  nobody@nowhere`,
      clientId: `client${C1_CSI}`,
    });
    fs.writeFileSync(record, JSON.stringify(owner));
  });

  after(() => {
    holder?.kill('SIGKILL');
    cleanup(root);
  });

  it('list shows the holder, the purpose and the build names escaped', async () => {
    const r = await cli(staticDir, ['list', 'board']);
    assert.equal(r.code, 0, r.stderr);
    assertInert('list', r.stdout + r.stderr);
    assert.match(r.stdout, /mallory\\u001b\[2J/);
    assert.match(r.stdout, /R2\\u009b31m/);
    assert.match(r.stdout, /"nightly\\nfree {2}board\/R9/);
  });

  it('status shows every field of the record escaped', async () => {
    const r = await cli(staticDir, ['status', 'board/R1']);
    assert.equal(r.code, 0, r.stderr);
    assertInert('status', r.stdout + r.stderr);
    assert.match(r.stdout, /build\\u001b]0;pwned\\u0007host/);
    assert.match(r.stdout, /client\\u009b31m/);
  });

  it("a lock that finds the build held says whose it is, escaped, in its error", async () => {
    const r = await cli(staticDir, ['lock', 'board/R1', '--', 'true']);
    assert.notEqual(r.code, 0);
    assertInert('lock', r.stdout + r.stderr);
    assert.match(r.stderr, /held: a lock by "mallory\\u001b\[2J\\u001b\[H"@/);
  });

  it('watch prints its lines escaped', async () => {
    const watch = spawn(process.execPath, [CLI, 'watch', 'board'], { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir } });
    let out = '';
    watch.stdout.on('data', (b: Buffer) => (out += b.toString('utf8')));
    watch.stderr.on('data', (b: Buffer) => (out += b.toString('utf8')));
    await waitFor(() => (out.includes('held') ? true : undefined), 20_000, 'watch to show the held build');
    watch.kill('SIGINT');
    await new Promise((r) => watch.once('exit', r));
    assertInert('watch', out);
    assert.match(out, /mallory\\u001b\[2J/);
  });

  it('stage and verify show hostile file names escaped, in their progress lines on a pipe too', async () => {
    // C0 characters in a name are refused by the stager; C1 ones (a CSI as one character) are not.
    const source = path.join(root, 'source');
    fs.mkdirSync(source);
    fs.writeFileSync(path.join(source, `image${C1_CSI}.bin`), 'x'.repeat(1000));
    fs.writeFileSync(path.join(source, `notes${C1_CSI}.txt`), 'y');
    const staged = await cli(staticDir, ['stage', 'board/R3', source]);
    assert.equal(staged.code, 0, staged.stderr);
    assertInert('stage', staged.stdout + staged.stderr);
    // Written on a pipe: the progress line names the latest file finished (both finish within its second), escaped.
    assert.match(staged.stderr, /done: .*(image\\u009b31m\.bin|notes\\u009b31m\.txt)/);
    fs.rmSync(path.join(staticDir, 'board', 'R3', `notes${C1_CSI}.txt`));
    const verified = await cli(staticDir, ['verify', 'board/R3']);
    assert.equal(verified.code, 1, verified.stderr);
    assertInert('verify', verified.stdout + verified.stderr);
    assert.match(verified.stdout, /notes\\u009b31m\.txt/);
  });
});
