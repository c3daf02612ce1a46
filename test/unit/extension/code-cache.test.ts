/**
 * The command bundles compiled from V8's code caches: the build leaves one beside each bundle but
 * `watch`'s, made from a run of the command; a command run takes its cache; a cache of another
 * version of the bundle is never used, and one V8 rejects (another Node, a damaged file) only
 * costs the compiling it would have saved.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { ROOT, cleanup, run, tempDir } from '../../helpers';

const CODE_CACHE = path.join(ROOT, 'out', 'src', 'cli', 'codeCache.js');

/** Requires `bundle` through withCodeCache in a fresh Node; answers its exports' keys and what became of the cache. */
async function load(bundle: string, env: NodeJS.ProcessEnv = {}): Promise<{ exports: string[]; use: { accepted: number; rejected: number; written: number } }> {
  const probe = `
    const { withCodeCache, codeCacheUse } = require(${JSON.stringify(CODE_CACHE)});
    const exported = withCodeCache(() => require(${JSON.stringify(bundle)}));
    process.on('exit', () => require('fs').writeSync(1, JSON.stringify({ exports: Object.keys(exported), use: codeCacheUse })));`;
  const r = await run(process.execPath, ['-e', probe], { env: { ...process.env, ...env } });
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as { exports: string[]; use: { accepted: number; rejected: number; written: number } };
}

describe('code caches of the command bundles', function () {
  this.timeout(60_000);
  let dir: string;
  before(() => {
    dir = tempDir('dss-code-cache-');
  });
  after(() => cleanup(dir));

  it('are left by the build beside every command bundle but watch, each named after its bundle as it is', () => {
    const cli = path.join(ROOT, 'dist', 'cli');
    const bundles = fs.readdirSync(cli).filter((f) => /Command\.js$/.test(f));
    assert.ok(bundles.length >= 10, bundles.join(' '));
    for (const b of bundles) {
      const st = fs.statSync(path.join(cli, b));
      const expected = `${b}.${st.size}-${Math.trunc(st.mtimeMs)}.v8cache`;
      assert.equal(fs.existsSync(path.join(cli, expected)), b !== 'watchCommand.js', expected);
    }
  });

  it('is taken by a command run, and one of another version of the bundle is never used', async () => {
    const bundle = path.join(dir, 'statusCommand.js');
    fs.copyFileSync(path.join(ROOT, 'dist', 'cli', 'statusCommand.js'), bundle);
    const written = await load(bundle, { DEVSERVER_STAGING_CODE_CACHE: 'write' });
    assert.deepEqual(written.use, { accepted: 0, rejected: 0, written: 1 });
    assert.ok(written.exports.includes('main'));
    const taken = await load(bundle);
    assert.deepEqual(taken.use, { accepted: 1, rejected: 0, written: 0 });
    assert.deepEqual(taken.exports, written.exports);
    // The bundle rewritten: its cache (of the old text) is not looked at.
    fs.appendFileSync(bundle, '\n');
    const after = await load(bundle);
    assert.deepEqual(after.use, { accepted: 0, rejected: 0, written: 0 });
    assert.deepEqual(after.exports, written.exports);
  });

  it('rejected by V8 (damaged), costs nothing but the compiling it would have saved', async () => {
    const bundle = path.join(dir, 'listCommand.js');
    fs.copyFileSync(path.join(ROOT, 'dist', 'cli', 'listCommand.js'), bundle);
    const st = fs.statSync(bundle);
    fs.writeFileSync(`${bundle}.${st.size}-${Math.trunc(st.mtimeMs)}.v8cache`, Buffer.alloc(4096, 0x5a));
    const r = await load(bundle);
    assert.deepEqual(r.use, { accepted: 0, rejected: 1, written: 0 });
    assert.ok(r.exports.includes('main'));
  });
});
