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
    const bundles = ['core.js', 'cli.js', ...fs.readdirSync(path.join(ROOT, 'dist', 'cli')).filter((f) => f.endsWith('.js')).map((f) => `cli/${f}`)];
    assert.ok(bundles.length > 3, 'the command bundles were found');
    for (const bundle of bundles) {
      assert.doesNotMatch(fs.readFileSync(path.join(ROOT, 'dist', bundle), 'utf8'), /require\(["']vscode["']\)/, bundle);
    }
  });
});

interface Command {
  command: string;
  title: string;
  category?: string;
  icon?: string;
  enablement?: string;
}
interface MenuEntry {
  command: string;
  when?: string;
  group?: string;
}
interface Manifest {
  contributes: {
    commands: Command[];
    menus: Record<string, MenuEntry[]>;
    keybindings: { command: string; key: string; when: string; args?: unknown }[];
    viewsWelcome: { view: string; contents: string }[];
  };
}

/** Every contextValue the view's rows carry; a damaged build adds `.damaged` to its own. */
const BUILD_STATES = ['build.free', 'build.held', 'build.held.mine', 'build.stale', 'build.legacy'];
const CONTEXT_VALUES = ['staticDir', 'staticDir.problem', 'folder', ...BUILD_STATES, ...BUILD_STATES.map((v) => `${v}.damaged`), 'artifactFolder', 'artifact'];

/**
 * A `when` clause of the view's menus, decided for one row: only the forms the manifest uses
 * (`view == …`, `viewItem == …`, `viewItem != …`, `viewItem =~ /…/`, `isWeb`, joined by `&&`).
 */
function shows(when: string, contextValue: string, isWeb = false): boolean {
  return when.split('&&').every((raw) => {
    const term = raw.trim();
    let m: RegExpExecArray | null;
    if ((m = /^view == (\S+)$/.exec(term))) return m[1] === 'devserverStaging.areas';
    if ((m = /^viewItem == (\S+)$/.exec(term))) return contextValue === m[1];
    if ((m = /^viewItem != (\S+)$/.exec(term))) return contextValue !== m[1];
    if ((m = /^viewItem =~ \/(.*)\/$/.exec(term))) return new RegExp(m[1]!).test(contextValue);
    if (term === '!isWeb') return !isWeb;
    throw new Error(`a when clause this test cannot read: ${term}`);
  });
}

describe('the manifest', () => {
  const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as Manifest;
  const nls = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.nls.json'), 'utf8')) as Record<string, string>;
  const { commands, menus } = manifest.contributes;
  const title = (c: Command): string => nls[c.title.replace(/%/g, '')] ?? c.title;
  /** The rows whose context menu (or inline buttons, with group 'inline') offer `command`. */
  const rowsOf = (command: string, inline = false): string[] =>
    CONTEXT_VALUES.filter((v) => menus['view/item/context']!.some((e) => e.command === command && (e.group === 'inline') === inline && shows(e.when ?? '', v)));

  it('gives every command a localized title and the category', () => {
    for (const c of commands) {
      assert.match(c.title, /^%command\.\w+%$/, c.command);
      assert.ok(title(c) !== c.title, `${c.command} has a title in package.nls.json`);
      assert.equal(c.category, '%category%', c.command);
    }
  });

  it('names only contributed commands in menus and keybindings, and gives inline ones an icon', () => {
    const byId = new Map(commands.map((c) => [c.command, c]));
    for (const [menu, entries] of Object.entries(menus)) for (const e of entries) assert.ok(byId.has(e.command), `${menu} names ${e.command}`);
    for (const k of manifest.contributes.keybindings) assert.ok(byId.has(k.command), `a keybinding names ${k.command}`);
    for (const e of [...menus['view/item/context']!, ...menus['view/title']!]) {
      if (e.group === 'inline' || e.group?.startsWith('navigation') === true) assert.ok(byId.get(e.command)!.icon, `${e.command} is shown as a button and has an icon`);
    }
  });

  it('offers each command on the rows it acts on, a damaged build included', () => {
    const builds = CONTEXT_VALUES.filter((v) => v.startsWith('build.'));
    assert.deepEqual(rowsOf('devserverStaging.destroy'), builds);
    assert.deepEqual(rowsOf('devserverStaging.destroyFolderBuilds'), ['folder']);
    assert.deepEqual(rowsOf('devserverStaging.forceRelease'), ['build.held', 'build.stale', 'build.legacy', 'build.held.damaged', 'build.stale.damaged', 'build.legacy.damaged']);
    assert.deepEqual(rowsOf('devserverStaging.forceRelease', true), ['build.stale', 'build.stale.damaged']);
    assert.deepEqual(rowsOf('devserverStaging.lockForWindow'), ['build.free', 'build.stale', 'build.free.damaged', 'build.stale.damaged']);
    assert.deepEqual(rowsOf('devserverStaging.releaseWindowLock'), ['build.held.mine', 'build.held.mine.damaged']);
    // Staging into a damaged build fails before anything is written: not offered there.
    assert.deepEqual(rowsOf('devserverStaging.addArtifacts'), ['build.free', 'build.held.mine']);
    assert.deepEqual(rowsOf('devserverStaging.stageBuild'), ['staticDir', 'folder', ...builds]);
    assert.deepEqual(rowsOf('devserverStaging.copyTag'), ['folder', ...builds]);
    assert.deepEqual(rowsOf('devserverStaging.openArtifact'), ['artifact']);
    assert.deepEqual(rowsOf('devserverStaging.cleanUp'), ['staticDir', 'folder']);
    assert.deepEqual(rowsOf('devserverStaging.forceReleaseAllStale'), ['staticDir', 'folder']);
    assert.deepEqual(rowsOf('devserverStaging.removeStaticDir'), ['staticDir', 'staticDir.problem']);
    assert.deepEqual(rowsOf('devserverStaging.copyPath'), CONTEXT_VALUES.filter((v) => v !== 'staticDir.problem'));
  });

  it('puts destructive commands in their own group', () => {
    for (const id of ['devserverStaging.destroy', 'devserverStaging.destroyFolderBuilds', 'devserverStaging.forceRelease', 'devserverStaging.forceReleaseAllStale', 'devserverStaging.cleanUp']) {
      for (const e of menus['view/item/context']!.filter((e) => e.command === id && e.group !== 'inline')) assert.match(e.group ?? '', /^8_destructive@/, id);
    }
  });

  it('shows a missing static directory with two different buttons: create it, or add another', () => {
    const inline = menus['view/item/context']!.filter((e) => e.group?.startsWith('inline') === true && shows(e.when ?? '', 'staticDir.problem'));
    const icons = inline.map((e) => commands.find((c) => c.command === e.command)!.icon);
    assert.deepEqual(inline.map((e) => e.command), ['devserverStaging.createStaticDir', 'devserverStaging.chooseStaticDir']);
    assert.equal(new Set(icons).size, 2, `distinct icons: ${icons.join(', ')}`);
  });

  it('needs a trusted workspace for exactly the commands that change the disk, as the command wrapper does', () => {
    const source = fs.readFileSync(path.join(ROOT, 'src', 'commands', 'command.ts'), 'utf8');
    const list = /NEEDS_TRUST = new Set\(\[([^\]]*)\]/.exec(source)![1]!;
    const wrapper = [...list.matchAll(/'([\w.]+)'/g)].map((m) => m[1]!).sort();
    const manifestSide = commands.filter((c) => c.enablement === 'isWorkspaceTrusted').map((c) => c.command).sort();
    assert.deepEqual(manifestSide, wrapper);
    for (const id of ['devserverStaging.destroy', 'devserverStaging.destroyFolderBuilds', 'devserverStaging.cleanUp', 'devserverStaging.forceReleaseAllStale', 'devserverStaging.stageBuild', 'devserverStaging.createStaticDir']) {
      assert.ok(wrapper.includes(id), id);
    }
  });

  it('hides from the palette the commands that need a row', () => {
    const hidden = menus['commandPalette']!.filter((e) => e.when === 'false').map((e) => e.command).sort();
    assert.deepEqual(hidden, ['devserverStaging.createStaticDir', 'devserverStaging.destroyFolderBuilds', 'devserverStaging.openArtifact', 'devserverStaging.showMore']);
  });

  it('binds keys only while the view has the focus, and never while typing in it', () => {
    assert.ok(manifest.contributes.keybindings.length > 0);
    for (const k of manifest.contributes.keybindings) {
      assert.match(k.when, /(^|&& )focusedView == devserverStaging\.areas( &&|$)/, k.key);
      assert.match(k.when, /!inputFocus/, k.key);
    }
    const del = manifest.contributes.keybindings.find((k) => k.key === 'delete');
    assert.deepEqual([del?.command, del?.args], ['devserverStaging.destroy', { selection: true }]);
  });

  it('words the welcome view as it renders: no code spans, the button named as the command', () => {
    const text = nls[manifest.contributes.viewsWelcome[0]!.contents.replace(/%/g, '')]!;
    assert.doesNotMatch(text, /`/);
    const add = commands.find((c) => c.command === 'devserverStaging.chooseStaticDir')!;
    assert.ok(text.includes(`[${title(add)}](command:devserverStaging.chooseStaticDir)`), text);
  });
});

/** The command line's bundles: the entry, commander (for help and usage errors), and one per command, each loaded when needed. */
const CLI_BUNDLES = [
  'dist/cli.js',
  'dist/cli/commander.js',
  ...fs
    .readdirSync(path.join(ROOT, 'src', 'cli'))
    .filter((f) => f.endsWith('Command.ts'))
    .map((f) => `dist/cli/${f.replace(/\.ts$/, '.js')}`),
];

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
  ...CLI_BUNDLES.map((f) => `extension/${f}`),
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
    for (const name of ['dist/extension.js', ...CLI_BUNDLES]) {
      const text = files.get(`extension/${name}`)!.toString('utf8');
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

  it('runs the command-line tool it ships, from any directory', async () => {
    // The bundles as shipped, and nothing else: the entry finds each command's bundle beside it.
    const shipped = path.join(dir, 'shipped');
    for (const f of CLI_BUNDLES) {
      fs.mkdirSync(path.dirname(path.join(shipped, f)), { recursive: true });
      fs.writeFileSync(path.join(shipped, f), files.get(`extension/${f}`)!);
    }
    const cli = path.join(shipped, 'dist', 'cli.js');
    const staticDir = path.join(dir, 'static');
    fs.mkdirSync(staticDir);
    const status = [cli, '-d', staticDir, '--json', 'status', 'eve/R1'];
    const elsewhere = { cwd: staticDir };
    const r = await run(process.execPath, [cli, '-d', staticDir, 'lock', '--create-once', 'eve/R1', '--', process.execPath, ...status], elsewhere);
    assert.equal(r.code, 0, r.stderr);
    assert.equal((JSON.parse(r.stdout) as { state: string }).state, 'held');
    const released = await run(process.execPath, status, elsewhere);
    assert.equal((JSON.parse(released.stdout) as { state: string }).state, 'free', released.stderr);
    // Help and usage errors come from the parser the entry loads only for them.
    const help = await run(process.execPath, [cli, 'status', '--help'], elsewhere);
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /^Usage: devserver-stage status/);
    assert.equal((await run(process.execPath, [cli, 'frobnicate'], elsewhere)).code, 2);
  });
});
