/**
 * What other Node programs get: `require('devserver-staging/core')` and `dist/core.js`, typed;
 * and a core that never imports `vscode`.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { ROOT, run } from '../helpers';

describe('package', () => {
  it('resolves devserver-staging/core to the built core with the documented API', async () => {
    const script = `const c = require('devserver-staging/core');
      const names = ['acquire','withLock','release','inspect','list','forceRelease','destroy','StagingError','Lease'];
      console.log(JSON.stringify({ file: require.resolve('devserver-staging/core'), missing: names.filter((n) => typeof c[n] !== 'function') }));`;
    const r = await run(process.execPath, ['-e', script], { cwd: ROOT });
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { file: string; missing: string[] };
    assert.equal(out.file, path.join(ROOT, 'dist', 'core.js'));
    assert.deepEqual(out.missing, []);
  });

  it('ships type declarations for the core', () => {
    const entry = fs.readFileSync(path.join(ROOT, 'dist', 'core.d.ts'), 'utf8');
    assert.match(entry, /types\/index/);
    const index = fs.readFileSync(path.join(ROOT, 'dist', 'types', 'index.d.ts'), 'utf8');
    for (const name of ['acquire', 'withLock', 'inspect', 'list', 'forceRelease', 'destroy', 'StagingError', 'LockInfo']) {
      assert.match(index, new RegExp(`\\b${name}\\b`), name);
    }
  });

  it('keeps vscode out of the core and the command-line bundle', () => {
    const core = path.join(ROOT, 'src', 'core');
    const files = (fs.readdirSync(core, { recursive: true }) as string[]).filter((f) => f.endsWith('.ts'));
    assert.ok(files.length > 10, 'the core was found');
    for (const file of files) {
      const text = fs.readFileSync(path.join(core, file), 'utf8');
      assert.doesNotMatch(text, /from ['"]vscode['"]|require\(['"]vscode['"]\)/, file);
    }
    for (const bundle of ['core.js', 'cli.js']) {
      assert.doesNotMatch(fs.readFileSync(path.join(ROOT, 'dist', bundle), 'utf8'), /require\(["']vscode["']\)/, bundle);
    }
  });
});
