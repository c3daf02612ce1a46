/**
 * What the extension shows a VS Code user: never a hint meant for the command line ("--wait",
 * "devserver-stage prune") written in the extension (next-steps.test.ts holds the core to the
 * same); and artifacts looked at before they are opened, safely.
 */
import { strict as assert } from 'assert';
import { spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { readArtifact, sniff, MAX_TEXT_BYTES } from '../../../src/extension/commands/sniff';
import { exchanger } from '../../attack';
import { CLI_HINT, ROOT, cleanup, tempDir } from '../../helpers';

/** The extension's own sources: all of src/ but the core and the command line. */
function extensionSources(): string[] {
  const src = path.join(ROOT, 'src');
  return (fs.readdirSync(src, { recursive: true }) as string[])
    .filter((f) => f.endsWith('.ts') && !f.startsWith(`core${path.sep}`) && !f.startsWith(`cli${path.sep}`) && f !== 'cli.ts')
    .map((f) => path.join(src, f));
}

/** The string literals of a TypeScript file (quotes, apostrophes and template text), comments left out. */
function literals(text: string): string[] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
  return [...code.matchAll(/'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|`(?:[^`\\]|\\.)*`/g)].map((m) => m[0]);
}

describe('words a VS Code user reads', () => {
  it('the extension never writes a command-line hint in what it shows', () => {
    const files = extensionSources();
    assert.ok(files.some((f) => f.endsWith('extension.ts')) && files.length > 20, 'the sources were found');
    const found: string[] = [];
    for (const f of files) {
      for (const l of literals(fs.readFileSync(f, 'utf8'))) if (CLI_HINT.test(l)) found.push(`${path.relative(ROOT, f)}: ${l}`);
    }
    for (const f of ['package.nls.json', 'l10n/bundle.l10n.json']) {
      for (const [k, v] of Object.entries(JSON.parse(fs.readFileSync(path.join(ROOT, f), 'utf8')) as Record<string, string>)) if (CLI_HINT.test(v)) found.push(`${f} ${k}: ${v}`);
    }
    assert.deepEqual(found, []);
  });
});

describe('looking at an artifact before opening it', () => {
  let dir: string;
  let outside: string;
  before(() => {
    dir = tempDir('dss-sniff-');
    outside = tempDir('dss-sniff-out-');
    fs.mkdirSync(path.join(dir, 'eve', 'R1'), { recursive: true });
  });
  after(() => {
    cleanup(dir);
    cleanup(outside);
  });
  const at = (name: string): string => path.join(dir, 'eve', 'R1', name);

  it('opens text as text, and binary (a NUL byte early on) or very large files never', async () => {
    fs.writeFileSync(at('notes.txt'), 'hello\n'.repeat(2000));
    fs.writeFileSync(at('image.bin'), Buffer.concat([Buffer.from('ELF'), Buffer.alloc(10, 0), Buffer.from('rest')]));
    fs.writeFileSync(at('big.log'), '');
    fs.truncateSync(at('big.log'), MAX_TEXT_BYTES + 1);
    assert.deepEqual(await sniff(at('notes.txt'), dir), { kind: 'text', path: at('notes.txt'), size: 12000 });
    assert.equal((await sniff(at('image.bin'), dir)).kind, 'binary');
    assert.deepEqual(await sniff(at('big.log'), dir), { kind: 'binary', path: at('big.log'), size: MAX_TEXT_BYTES + 1, why: 'large' });
  });

  it('never waits on a FIFO, and opens no directory or device', async function () {
    if (spawnSync('mkfifo', [at('pipe')]).status !== 0) this.skip();
    const started = Date.now();
    assert.deepEqual(await sniff(at('pipe'), dir), { kind: 'refused', why: 'not-a-file' });
    assert.ok(Date.now() - started < 1000, 'answered at once');
    assert.deepEqual(await sniff(path.join(dir, 'eve'), dir), { kind: 'refused', why: 'not-a-file' });
    assert.deepEqual(await sniff('/dev/null', dir), { kind: 'refused', why: 'outside' });
  });

  it('follows a link inside the static directory, never one leading out of it', async () => {
    fs.writeFileSync(path.join(outside, 'secret.txt'), 'secret');
    fs.symlinkSync(path.join(outside, 'secret.txt'), at('escape.txt'));
    fs.symlinkSync('../../eve/R1/notes.txt', at('latest.txt'));
    assert.deepEqual(await sniff(at('escape.txt'), dir), { kind: 'refused', why: 'outside' });
    assert.deepEqual(await sniff(at('latest.txt'), dir), { kind: 'text', path: at('notes.txt'), size: 12000 });
  });

  it('reads an artifact level by level: a folder on its way exchanged with a link to outside in a tight loop is never read through', async function () {
    this.timeout(60_000);
    const bin = tempDir('dss-sniff-bin-');
    try {
      const swap = exchanger(bin);
      if (typeof swap === 'string') {
        console.log(`      skipped: ${swap}`);
        return this.skip();
      }
      fs.mkdirSync(at('sub'));
      fs.writeFileSync(at('sub/log.txt'), 'the artifact\n');
      fs.mkdirSync(path.join(outside, 'sub'));
      fs.writeFileSync(path.join(outside, 'sub', 'log.txt'), 'secret\n');
      fs.symlinkSync(path.join(outside, 'sub'), at('swap'));
      const s = spawn(swap[0], [...swap.slice(1), at('sub'), at('swap')], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      s.stdout.on('data', (d: Buffer) => (out += d.toString()));
      const ended = new Promise<void>((r) => s.once('close', () => r()));
      const seen = { artifact: 0, secret: 0, refused: 0 };
      for (const until = Date.now() + 2_000; Date.now() < until; ) {
        const got = await readArtifact(at('sub/log.txt'), dir);
        if ('kind' in got) seen.refused++;
        else if (Buffer.from(got.bytes).toString() === 'secret\n') seen.secret++;
        else seen.artifact++;
      }
      s.kill('SIGTERM');
      await ended;
      console.log(`      ${out.trim()} exchanges; read ${JSON.stringify(seen)}`);
      assert.ok(Number(out.trim()) > 0, 'the folder was exchanged');
      assert.equal(seen.secret, 0, 'nothing outside was read');
      assert.ok(seen.artifact > 0, 'the artifact was read whole at least once');
    } finally {
      cleanup(bin);
    }
  });
});
