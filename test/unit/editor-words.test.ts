/**
 * What the extension shows a VS Code user: never a hint meant for the command line ("--wait",
 * "devserver-stage prune"), whether written in the extension or passed on from the core; and
 * artifacts looked at before they are opened, safely.
 */
import { strict as assert } from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { acquire } from '../../src/core/lock';
import { parseManifest } from '../../src/core/manifest';
import { limitOf } from '../../src/core/stage/space';
import { resolveStaticDir } from '../../src/core/tags';
import { sniff, MAX_TEXT_BYTES } from '../../src/commands/sniff';
import { CLI_HINT, errorMessage, withoutCliHints } from '../../src/errors';
import { ROOT, cleanup, tempDir } from '../helpers';

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
      // CLI_HINT itself is the pattern, not a message.
      for (const l of literals(fs.readFileSync(f, 'utf8'))) if (CLI_HINT.test(l) && !l.includes('\\b')) found.push(`${path.relative(ROOT, f)}: ${l}`);
    }
    for (const f of ['package.nls.json', 'l10n/bundle.l10n.json']) {
      for (const [k, v] of Object.entries(JSON.parse(fs.readFileSync(path.join(ROOT, f), 'utf8')) as Record<string, string>)) if (CLI_HINT.test(v)) found.push(`${f} ${k}: ${v}`);
    }
    assert.deepEqual(found, []);
  });

  it('the core’s messages lose their command-line hints, and keep the rest', async () => {
    const dir = tempDir('dss-words-');
    try {
      fs.mkdirSync(path.join(dir, 'eve', 'R1'), { recursive: true });
      const lease = await acquire(dir, 'eve/R1', { createOnce: false });
      const messages: string[] = [];
      await acquire(dir, 'eve/R1', { createOnce: false }).catch((e: unknown) => messages.push(errorMessage(e)));
      await acquire(dir, 'eve/R1/inner', { createOnce: false }).catch((e: unknown) => messages.push(errorMessage(e)));
      await lease.release();
      await parseManifest('{', '/srv/static/eve/R1/.devserver-staging.manifest.json').catch((e: unknown) => messages.push(errorMessage(e)));
      messages.push(errorMessage(limitOf(1024, undefined).tooBig('x.tar', '/srv/static/eve/R1')));
      messages.push(errorMessage(limitOf(1 << 30, { freeBytes: 300 << 20, marginBytes: 256 << 20 }).tooBig('x.tar', '/srv/static/eve/R1')));
      await resolveStaticDir('').catch((e: unknown) => messages.push(errorMessage(e)));
      assert.equal(messages.length, 6, messages.join('\n'));
      for (const m of messages) {
        assert.doesNotMatch(m, CLI_HINT, m);
        assert.ok(m.length > 20 && m.endsWith('.'), m);
      }
      assert.match(messages[0], /is held: a lock by \S+@\S+ \(pid \d+\)/);
      assert.match(messages[2], /is damaged: it is not JSON/);
      assert.match(messages[5], /^No static directory given\.$/);
    } finally {
      cleanup(dir);
    }
  });

  it('leaves paths alone that merely look like hints', () => {
    const text = 'Could not read /srv/devserver-stage/x--y. Check it.';
    assert.equal(withoutCliHints(text), text);
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
});
