import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { ROOT, cleanup, run, tempDir } from '../../helpers';

/**
 * Every string the extension shows goes through vscode.l10n.t; the English bundle that
 * translators start from must hold exactly those strings. `npm run l10n` rewrites it.
 */
describe('localisation bundle', () => {
  it('l10n/bundle.l10n.json holds exactly the strings of vscode.l10n.t in src/', async function () {
    this.timeout(60_000);
    const out = tempDir('dss-l10n-');
    try {
      const r = await run(process.execPath, [path.join(ROOT, 'node_modules', '@vscode', 'l10n-dev', 'dist', 'cli.js'), 'export', '-o', out, path.join(ROOT, 'src')], { cwd: ROOT });
      assert.equal(r.code, 0, r.stderr);
      const fresh = JSON.parse(fs.readFileSync(path.join(out, 'bundle.l10n.json'), 'utf8')) as Record<string, string>;
      const committed = JSON.parse(fs.readFileSync(path.join(ROOT, 'l10n', 'bundle.l10n.json'), 'utf8')) as Record<string, string>;
      assert.ok(Object.keys(fresh).length > 50, 'strings were found');
      assert.deepEqual(committed, fresh, 'l10n/bundle.l10n.json is out of date: run npm run l10n');
    } finally {
      cleanup(out);
    }
  });

  it('package.json points VS Code at the bundle folder', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { l10n?: string };
    assert.equal(pkg.l10n, './l10n');
  });
});
