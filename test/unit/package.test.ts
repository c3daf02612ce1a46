/**
 * What other Node programs get: `require('devserver-staging/core')` and `dist/core.js`, typed;
 * a core that never imports `vscode`; and the .vsix that `npm run package` makes.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import * as yauzl from 'yauzl';
import { formatBytes } from '../../src/core/format';
import { ROOT, cleanup, report, run, tempDir } from '../helpers';

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

/** What the .vsix may hold: the bundles, the icons, the manifest and the documents (vsce renames some). */
const SHIPPED = [
  '[Content_Types].xml',
  'extension.vsixmanifest',
  'extension/package.json',
  'extension/package.nls.json',
  'extension/l10n/bundle.l10n.json',
  'extension/readme.md',
  'extension/changelog.md',
  'extension/LICENSE.txt',
  'extension/dist/extension.js',
  'extension/dist/cli.js',
  'extension/media/icon.svg',
  'extension/media/icon.png',
];
const TRANSLATION = /^extension\/(package\.nls|l10n\/bundle\.l10n)\.[a-z]{2}(-[a-z]+)?\.json$/;

/** Every file in a zip with its contents. */
function unzip(file: string): Promise<Map<string, Buffer>> {
  return new Promise((resolve, reject) => {
    yauzl.open(file, { lazyEntries: true }, (err, zip) => {
      if (err) return reject(err);
      const files = new Map<string, Buffer>();
      zip.on('error', reject);
      zip.on('end', () => resolve(files));
      zip.on('entry', (entry: yauzl.Entry) => {
        zip.openReadStream(entry, (e, stream) => {
          if (e) return reject(e);
          const chunks: Buffer[] = [];
          stream.on('data', (c: Buffer) => chunks.push(c));
          stream.on('error', reject);
          stream.on('end', () => {
            files.set(entry.fileName, Buffer.concat(chunks));
            zip.readEntry();
          });
        });
      });
      zip.readEntry();
    });
  });
}

describe('the .vsix', function () {
  this.timeout(120_000);
  let dir: string;
  let vsix: string;
  let files: Map<string, Buffer>;
  let wasProduction: boolean;

  before(async () => {
    // `npm run package` rebuilds dist/ for production; the build that was there is put back after.
    wasProduction = !fs.existsSync(path.join(ROOT, 'dist', 'extension.js.map'));
    dir = tempDir('dss-vsix-');
    vsix = path.join(dir, 'x.vsix');
    // From the working tree as it is, with out/, src/, test/ and node_modules/ beside it, so a
    // .vscodeignore that lets any of them in is caught.
    const r = await run('npm', ['run', 'package', '--', '--out', vsix], { cwd: ROOT });
    assert.equal(r.code, 0, `npm run package failed:\n${r.stdout}\n${r.stderr}`);
    files = await unzip(vsix);
  });

  after(async () => {
    const r = await run(process.execPath, ['scripts/build.mjs', ...(wasProduction ? ['--production'] : [])], { cwd: ROOT });
    cleanup(dir);
    assert.equal(r.code, 0, `could not rebuild dist/:\n${r.stderr}`);
  });

  it('holds only what runs: the bundles, the icons, the manifest, README, CHANGELOG and licence', () => {
    const names = [...files.keys()];
    const unexpected = names.filter((n) => !SHIPPED.includes(n) && !TRANSLATION.test(n));
    assert.deepEqual(unexpected, [], 'files the .vsix must not hold: add them to .vscodeignore');
    assert.deepEqual(SHIPPED.filter((n) => !files.has(n)), [], 'files the .vsix lacks');
    const size = (name: string): string => formatBytes(files.get(`extension/dist/${name}`)!.length);
    report(`${path.basename(vsix)}: ${formatBytes(fs.statSync(vsix).size)}, ${names.length} files; dist/extension.js ${size('extension.js')}, dist/cli.js ${size('cli.js')}`);
  });

  it('ships minified bundles without source maps', () => {
    for (const name of ['extension.js', 'cli.js']) {
      const text = files.get(`extension/dist/${name}`)!.toString('utf8');
      assert.doesNotMatch(text, /sourceMappingURL/, name);
      const perLine = Math.round(text.length / text.split('\n').length);
      assert.ok(perLine > 500, `${name} is minified (${perLine} characters a line)`);
    }
  });

  it('declares a 128×128 PNG icon for the marketplace', () => {
    assert.match(files.get('extension.vsixmanifest')!.toString('utf8'), /<Icon>extension\/media\/icon\.png<\/Icon>/);
    const png = files.get('extension/media/icon.png')!;
    assert.equal(png.subarray(1, 4).toString('latin1'), 'PNG');
    // IHDR, the first chunk, starts with the width and the height.
    assert.deepEqual([png.readUInt32BE(16), png.readUInt32BE(20)], [128, 128]);
  });

  it('runs the command-line tool it ships', async () => {
    const cli = path.join(dir, 'cli.js');
    fs.writeFileSync(cli, files.get('extension/dist/cli.js')!);
    const staticDir = path.join(dir, 'static');
    fs.mkdirSync(staticDir);
    const status = [cli, '-d', staticDir, '--json', 'status', 'eve/R1'];
    const r = await run(process.execPath, [cli, '-d', staticDir, 'lock', '--create-once', 'eve/R1', '--', process.execPath, ...status]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal((JSON.parse(r.stdout) as { state: string }).state, 'held');
    const released = await run(process.execPath, status);
    assert.equal((JSON.parse(released.stdout) as { state: string }).state, 'free', released.stderr);
  });
});
