/**
 * What other Node programs get: `require('devserver-staging/core')` and `dist/core.js`, typed;
 * a core that never imports `vscode`; the manifest and the README a Marketplace visitor reads;
 * and the .vsix that `npm run package` makes.
 */
import { strict as assert } from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import * as yauzl from 'yauzl';
import { EXTENSION_ID, commandsNeedingTrust } from '../../../src/extension/commands/trust';
import { formatBytes } from '../../../src/core/base/format';
import { python } from '../../fixtures';
import { CLI, ROOT, cleanup, report, run, tempDir } from '../../helpers';

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

  it('stages a directory and verifies it with the built core, whose worker threads run from dist/', async () => {
    const dir = tempDir('dss-core-');
    try {
      const tree = path.join(dir, 'tree');
      fs.mkdirSync(path.join(tree, 'sub'), { recursive: true });
      // Large enough that verification hashes it in a worker thread.
      fs.writeFileSync(path.join(tree, 'large.bin'), Buffer.alloc(3 * 1024 * 1024, 7));
      fs.writeFileSync(path.join(tree, 'sub', 'small.txt'), 'small\n');
      fs.mkdirSync(path.join(dir, 'static'));
      const script = `const c = require('devserver-staging/core');
        (async () => {
          const staged = await c.stage(process.argv[1], 'eve/R1', [process.argv[2]]);
          const verified = await c.verify(process.argv[1], 'eve/R1');
          console.log(JSON.stringify({ files: staged.added.length, ok: verified.ok, checked: verified.checkedFiles }));
        })();`;
      const r = await run(process.execPath, ['-e', script, path.join(dir, 'static'), tree], { cwd: ROOT });
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(JSON.parse(r.stdout), { files: 2, ok: true, checked: 2 });
    } finally {
      cleanup(dir);
    }
  });

  it('a hashing thread that cannot start (its file missing from an install) fails verify as the tool\'s fault, never calls the build damaged', async () => {
    const dir = tempDir('dss-core-broken-');
    try {
      // The built core and its copying worker, without the hashing worker.
      const install = path.join(dir, 'install');
      fs.mkdirSync(install);
      for (const f of ['core.js', 'copyWorker.js']) fs.copyFileSync(path.join(ROOT, 'dist', f), path.join(install, f));
      const tree = path.join(dir, 'tree');
      fs.mkdirSync(tree);
      fs.writeFileSync(path.join(tree, 'large.bin'), Buffer.alloc(3 * 1024 * 1024, 7));
      fs.mkdirSync(path.join(dir, 'static'));
      const script = `const c = require(process.argv[3]);
        (async () => {
          await c.stage(process.argv[1], 'eve/R1', [process.argv[2]]);
          const out = await c.verify(process.argv[1], 'eve/R1').then((v) => ({ ok: v.ok, problems: v.problems.map((p) => p.kind) }), (err) => ({ code: err.code, message: err.message }));
          console.log(JSON.stringify(out));
        })();`;
      const r = await run(process.execPath, ['-e', script, path.join(dir, 'static'), tree, path.join(install, 'core.js')], { cwd: dir });
      assert.equal(r.code, 0, r.stderr);
      const out = JSON.parse(r.stdout) as { code?: string; message?: string; ok?: boolean };
      assert.equal(out.code, 'EIO', r.stdout);
      assert.match(out.message ?? '', /installation may be damaged/);
    } finally {
      cleanup(dir);
    }
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

describe('bundles and the process they run in', () => {
  it("leave Node's fs as it is: graceful-fs, which would patch it for every extension in the host, is not loaded", async () => {
    const bundles = ['extension.js', 'core.js', 'cli/lockCommand.js', 'cli/stageCommand.js'].map((b) => path.join(ROOT, 'dist', b));
    for (const bundle of bundles) assert.doesNotMatch(fs.readFileSync(bundle, 'utf8'), /node_modules\/graceful-fs\//, bundle);
    // vscode is not there outside the editor: a stand-in that answers anything is enough to load
    // the extension's bundle (its top level only names things; activate() is not called).
    const probe = `
      const Module = require('module');
      const load = Module._load;
      const anything = new Proxy(function () {}, { get: (_t, k) => (k === Symbol.toPrimitive ? () => '' : anything), apply: () => anything, construct: () => anything });
      Module._load = function (request, ...rest) { return request === 'vscode' ? anything : load.call(this, request, ...rest); };
      const fs = require('fs');
      const close = fs.close, closeSync = fs.closeSync;
      for (const b of ${JSON.stringify(bundles)}) require(b);
      const patched = fs.close !== close || fs.closeSync !== closeSync || Object.getOwnPropertySymbols(fs).some((s) => String(s).includes('graceful-fs'));
      process.stdout.write(patched ? 'patched' : 'as it was');`;
    const r = await run(process.execPath, ['-e', probe]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'as it was');
  });

  /**
   * Runs the built tool on a static directory with one build, `board/build`, with `preload` (a
   * script's text) loaded first; answers, per command line, what the preload wrote on fd 3.
   */
  function reportsOf(preload: string, commands: readonly (readonly string[])[]): string[] {
    const dir = tempDir('dss-preload-');
    try {
      fs.mkdirSync(path.join(dir, 'static', 'board', 'build'), { recursive: true });
      const script = path.join(dir, 'preload.js');
      fs.writeFileSync(script, preload);
      return commands.map((args) => {
        const out = path.join(dir, 'report');
        const fd = fs.openSync(out, 'w');
        const r = spawnSync(process.execPath, ['-r', script, path.join(ROOT, 'dist', 'cli.js'), '-d', path.join(dir, 'static'), ...args], { stdio: ['ignore', 'pipe', 'pipe', fd], encoding: 'utf8' });
        fs.closeSync(fd);
        assert.equal(r.status, 0, `${args.join(' ')}: ${r.stderr}`);
        return fs.readFileSync(out, 'utf8');
      });
    } finally {
      cleanup(dir);
    }
  }

  it('start status, list and lock without the Node modules they do not need (crypto, fs.promises, perf_hooks, assert)', () => {
    // Each of these costs a command a twentieth to a sixth of Node's own start (bench/README.md, part i).
    const commands = [['status', 'board/build'], ['list'], ['lock', 'board/build', '--', 'true']];
    const reports = reportsOf("process.on('exit', () => require('fs').writeSync(3, JSON.stringify(process.moduleLoadList)));\n", commands);
    const unwanted = /^NativeModule (crypto|internal\/fs\/promises|perf_hooks|assert)$/;
    reports.forEach((report, i) => assert.deepEqual((JSON.parse(report) as string[]).filter((m) => unwanted.test(m)), [], commands[i].join(' ')));
  });

  it('ask statfs once per command of status and list, whatever they ask of the static directory', () => {
    // The Io (synchronous or not) and the clock (measured or not) both follow the filesystem's type.
    const counter = "const fs = require('fs'); let n = 0; const statfs = fs.statfs; fs.statfs = function (...a) { n++; return statfs.apply(this, a); }; process.on('exit', () => fs.writeSync(3, String(n)));\n";
    assert.deepEqual(reportsOf(counter, [['status', 'board/build'], ['list']]), ['1', '1']);
  });

  it("give signal-exit, in assert's place, a check that compares loosely and throws as assert.equal does", () => {
    const { equal } = require(path.join(ROOT, 'scripts', 'shims', 'assert-equal.cjs')) as { equal: (a: unknown, b: unknown, m?: string) => void };
    equal('function', 'function');
    equal(1, '1');
    assert.throws(() => equal('undefined', 'function', 'a callback must be provided'), (e: NodeJS.ErrnoException) => e.code === 'ERR_ASSERTION' && e.message === 'a callback must be provided');
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
  publisher: string;
  name: string;
  description: string;
  icon: string;
  categories: string[];
  keywords: string[];
  galleryBanner: { color: string; theme: string };
  preview?: boolean;
  repository?: unknown;
  homepage?: unknown;
  bugs?: unknown;
  contributes: {
    commands: Command[];
    menus: Record<string, MenuEntry[]>;
    keybindings: { command: string; key: string; when: string; args?: unknown }[];
    viewsWelcome: { view: string; contents: string }[];
    configuration: { properties: Record<string, { default: unknown }> };
  };
}

/** The categories the Marketplace accepts (the extension manifest reference). */
const MARKETPLACE_CATEGORIES = [
  'Programming Languages', 'Snippets', 'Linters', 'Themes', 'Debuggers', 'Formatters', 'Keymaps', 'SCM Providers', 'Other',
  'Extension Packs', 'Language Packs', 'Data Science', 'Machine Learning', 'Visualization', 'Notebooks', 'Education', 'Testing',
];

/** The images a Markdown text shows, in the order they come: `![alt](src)` and `<img src="…">`. */
function imagesOf(markdown: string): string[] {
  const found: { at: number; src: string }[] = [];
  for (const m of markdown.matchAll(/!\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) found.push({ at: m.index, src: m[1] });
  for (const m of markdown.matchAll(/<img\s[^>]*\bsrc=["']([^"']+)["']/gi)) found.push({ at: m.index, src: m[1] });
  return found.sort((a, b) => a.at - b.at).map((f) => f.src);
}

const README = (): string => fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');

/** Every contextValue the view's rows carry; a damaged build adds `.damaged` to its own. */
const BUILD_STATES = ['build.free', 'build.held', 'build.held.mine', 'build.held.reserved', 'build.held.myReservation', 'build.stale', 'build.legacy'];
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
    if ((m = /^viewItem =~ \/(.*)\/$/.exec(term))) return new RegExp(m[1]).test(contextValue);
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
    CONTEXT_VALUES.filter((v) => menus['view/item/context'].some((e) => e.command === command && (e.group === 'inline') === inline && shows(e.when ?? '', v)));

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
    for (const e of [...menus['view/item/context'], ...menus['view/title']]) {
      if (e.group === 'inline' || e.group?.startsWith('navigation') === true) assert.ok(byId.get(e.command)!.icon, `${e.command} is shown as a button and has an icon`);
    }
  });

  it('offers each command on the rows it acts on, a damaged build included', () => {
    const builds = CONTEXT_VALUES.filter((v) => v.startsWith('build.'));
    assert.deepEqual(rowsOf('devserverStaging.destroy'), builds);
    assert.deepEqual(rowsOf('devserverStaging.destroyFolderBuilds'), ['folder']);
    assert.deepEqual(rowsOf('devserverStaging.forceRelease'), ['build.held', 'build.held.reserved', 'build.stale', 'build.legacy', 'build.held.damaged', 'build.held.reserved.damaged', 'build.stale.damaged', 'build.legacy.damaged']);
    // A reservation: others break it as a lock; its owner moves its end or releases it.
    assert.deepEqual(rowsOf('devserverStaging.reserve'), ['build.free', 'build.stale', 'build.free.damaged', 'build.stale.damaged']);
    assert.deepEqual(rowsOf('devserverStaging.extendReservation'), ['build.held.myReservation', 'build.held.myReservation.damaged']);
    assert.deepEqual(rowsOf('devserverStaging.releaseReservation'), ['build.held.myReservation', 'build.held.myReservation.damaged']);
    assert.deepEqual(rowsOf('devserverStaging.releaseReservation', true), ['build.held.myReservation', 'build.held.myReservation.damaged']);
    assert.deepEqual(rowsOf('devserverStaging.lockWhenFree'), ['build.held', 'build.held.reserved', 'build.stale', 'build.legacy', 'build.held.damaged', 'build.held.reserved.damaged', 'build.stale.damaged', 'build.legacy.damaged']);
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
      for (const e of menus['view/item/context'].filter((e) => e.command === id && e.group !== 'inline')) assert.match(e.group ?? '', /^8_destructive@/, id);
    }
  });

  it('shows a missing static directory with two different buttons: create it, or add another', () => {
    const inline = menus['view/item/context'].filter((e) => e.group?.startsWith('inline') === true && shows(e.when ?? '', 'staticDir.problem'));
    const icons = inline.map((e) => commands.find((c) => c.command === e.command)!.icon);
    assert.deepEqual(inline.map((e) => e.command), ['devserverStaging.createStaticDir', 'devserverStaging.chooseStaticDir']);
    assert.equal(new Set(icons).size, 2, `distinct icons: ${icons.join(', ')}`);
  });

  it('needs a trusted workspace for exactly the commands that change the disk, and the command wrapper reads that from here', () => {
    const manifestSide = commands.filter((c) => c.enablement === 'isWorkspaceTrusted').map((c) => c.command).sort();
    const wrapper = [...(commandsNeedingTrust(manifest) ?? [])].sort();
    assert.deepEqual(wrapper, manifestSide);
    for (const id of ['devserverStaging.destroy', 'devserverStaging.destroyFolderBuilds', 'devserverStaging.cleanUp', 'devserverStaging.forceReleaseAllStale', 'devserverStaging.stageBuild', 'devserverStaging.addArtifacts', 'devserverStaging.forceRelease', 'devserverStaging.lockForWindow', 'devserverStaging.lockWhenFree', 'devserverStaging.createStaticDir', 'devserverStaging.reserve', 'devserverStaging.extendReservation', 'devserverStaging.releaseReservation']) {
      assert.ok(wrapper.includes(id), id);
    }
    // The wrapper finds this very manifest, and keeps no list of its own that could drift from it.
    assert.equal(EXTENSION_ID, `${manifest.publisher}.${manifest.name}`);
    const source = fs.readFileSync(path.join(ROOT, 'src', 'extension', 'commands', 'command.ts'), 'utf8');
    assert.match(source, /commandsNeedingTrust\(vscode\.extensions\.getExtension\(EXTENSION_ID\)\?\.packageJSON\)/);
    assert.doesNotMatch(source, /['"`]devserverStaging\.\w+['"`]/, 'no command id is spelled in the wrapper');
    // Unreadable or foreign: nothing to go by, and the wrapper then refuses every command.
    for (const unreadable of [undefined, null, {}, { contributes: {} }, { contributes: { commands: 'x' } }]) assert.equal(commandsNeedingTrust(unreadable), undefined);
    assert.deepEqual([...commandsNeedingTrust({ contributes: { commands: [{ command: 'a', enablement: 'isWorkspaceTrusted && view == x' }, { command: 'b', enablement: '!isWorkspaceTrusted' }, { command: 'c' }] } })!], ['a']);
  });

  it('hides from the palette the commands that need a row', () => {
    const hidden = menus['commandPalette'].filter((e) => e.when === 'false').map((e) => e.command).sort();
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

  it('has what the Marketplace lists: one sentence, honest categories, keywords, a banner, the preview flag', () => {
    assert.match(manifest.description, /^[A-Z][^.!?]*[.]$/, 'one sentence');
    assert.ok(manifest.description.length <= 200, `${manifest.description.length} characters`);
    assert.ok(manifest.categories.length > 0);
    for (const c of manifest.categories) assert.ok(MARKETPLACE_CATEGORIES.includes(c), `a Marketplace category: ${c}`);
    // The Marketplace takes at most 30 tags, and vsce adds its own (`keybindings`) to the keywords.
    assert.ok(manifest.keywords.length > 0 && manifest.keywords.length <= 25, `${manifest.keywords.length} keywords`);
    assert.equal(new Set(manifest.keywords.map((k) => k.toLowerCase())).size, manifest.keywords.length, 'no keyword twice');
    assert.match(manifest.galleryBanner.color, /^#[0-9a-fA-F]{6}$/);
    assert.ok(['dark', 'light'].includes(manifest.galleryBanner.theme), manifest.galleryBanner.theme);
    assert.equal(typeof manifest.preview, 'boolean');
    assert.match(manifest.icon, /\.png$/, 'the Marketplace shows a PNG icon, not an SVG');
    // Links the listing shows must lead somewhere: none is better than an invented one.
    for (const key of ['repository', 'homepage', 'bugs'] as const) {
      const value = manifest[key];
      if (value === undefined) continue;
      const url = typeof value === 'string' ? value : (value as { url?: string }).url;
      assert.match(url ?? '', /^https:\/\//, `${key} is an https URL`);
    }
  });

  it('words the welcome view as it renders: no code spans, the button named as the command', () => {
    const text = nls[manifest.contributes.viewsWelcome[0].contents.replace(/%/g, '')];
    assert.doesNotMatch(text, /`/);
    const add = commands.find((c) => c.command === 'devserverStaging.chooseStaticDir')!;
    assert.ok(text.includes(`[${title(add)}](command:devserverStaging.chooseStaticDir)`), text);
  });
});

describe('the README', () => {
  const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as Manifest;
  const nls = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.nls.json'), 'utf8')) as Record<string, string>;
  const text = README();

  it('opens with a picture of the extension, before its first section', () => {
    const [first] = imagesOf(text);
    assert.ok(first !== undefined, 'the README shows an image');
    assert.ok(text.indexOf(first) < text.indexOf('\n## '), `${first} comes before the first section`);
    assert.match(first, /^media\/screenshots\/[\w.-]+\.png$/, 'a screenshot kept beside the README, shipped in the .vsix');
    assert.equal(fs.readFileSync(path.join(ROOT, first)).subarray(1, 4).toString('latin1'), 'PNG', first);
  });

  it('shows only images that are there, as PNG', () => {
    for (const src of imagesOf(text)) {
      assert.doesNotMatch(src, /^[a-z]+:/i, `${src}: a file of the package, not a URL`);
      assert.match(src, /\.png$/, `${src}: the Marketplace refuses SVG in a README`);
      assert.ok(fs.existsSync(path.join(ROOT, src)), `${src} exists`);
    }
  });

  it('names every command of the manifest, by its title and its id', () => {
    for (const c of manifest.contributes.commands) {
      const title = nls[c.title.replace(/%/g, '')];
      assert.ok(text.includes(`**${title}** (\`${c.command}\`)`), `the README's commands table has ${title} (${c.command})`);
    }
  });

  it('gives every setting with its default', () => {
    for (const [key, p] of Object.entries(manifest.contributes.configuration.properties)) {
      const shown = typeof p.default === 'string' ? p.default : JSON.stringify(p.default);
      assert.ok(text.includes(`| \`${key}\` | \`${shown}\` |`), `the settings table has ${key} with its default ${shown}`);
    }
  });

  it('is joined by a map of the unit tests that names every file, in the section of its folder', () => {
    const unit = path.join(ROOT, 'test', 'unit');
    const map = fs.readFileSync(path.join(unit, 'README.md'), 'utf8');
    assert.deepEqual(fs.readdirSync(unit).filter((f) => f.endsWith('.test.ts')), [], 'every test file is in the folder of its group');
    // Each section of the map names its folder in its heading: "## The lock and its protocol (`lock/`)".
    const sections = map.split(/^## /m).slice(1);
    const folders = fs.readdirSync(unit, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
    let count = 0;
    for (const folder of folders) {
      const rows = sections.filter((s) => s.split('\n')[0].endsWith(`(\`${folder}/\`)`)).join('\n');
      const files = fs.readdirSync(path.join(unit, folder)).filter((f) => f.endsWith('.test.ts'));
      count += files.length;
      assert.deepEqual(files.filter((f) => !rows.includes(`| \`${f}\` |`)), [], `test/unit/README.md has a row for each file of ${folder}/, under its heading`);
    }
    assert.ok(count > 30, `${count} test files found`);
  });

  it('links to every document of docs/, and each link of a document leads to a file that is there', () => {
    const docs = fs.readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md'));
    assert.ok(docs.length >= 5, docs.join(' '));
    for (const d of docs) assert.ok(text.includes(`](docs/${d})`), `the README links to docs/${d}`);
    for (const d of ['README.md', ...docs.map((f) => `docs/${f}`)]) {
      const body = fs.readFileSync(path.join(ROOT, d), 'utf8');
      for (const m of body.matchAll(/\]\(([^)#\s]+)(#[^)\s]*)?\)/g)) {
        if (/^[a-z]+:/i.test(m[1])) continue;
        assert.ok(fs.existsSync(path.join(ROOT, path.dirname(d), m[1])), `${d} links to ${m[1]}, which is there`);
      }
    }
  });

  it('names every command and option of devserver-stage in docs/cli.md, and every command in its own section', async function () {
    this.timeout(60_000);
    const reference = fs.readFileSync(path.join(ROOT, 'docs', 'cli.md'), 'utf8');
    const top = await run(process.execPath, [CLI, '--help']);
    assert.equal(top.code, 0, top.stderr);
    const section = (help: string, name: string): string => help.split(`${name}:\n`)[1]?.split('\n\n')[0] ?? '';
    const commands = [...section(top.stdout, 'Commands').matchAll(/^ {2}([a-z][\w-]*)/gm)].map((m) => m[1]).filter((c) => c !== 'help');
    assert.ok(commands.length >= 10, commands.join(' '));
    const optionsOf = (help: string): string[] => [...section(help, 'Options').matchAll(/^ {2}(?:-\w, )?(--[\w-]+)/gm)].map((m) => m[1]).filter((o) => o !== '--help');
    for (const option of optionsOf(top.stdout)) assert.ok(reference.includes(`\`${option}`) || reference.includes(`, \`${option}`), `docs/cli.md has the global option ${option}`);
    for (const command of commands) {
      assert.ok(reference.includes(`| \`${command}`), `docs/cli.md's table has ${command}`);
      assert.ok(text.includes(`\`${command}\``), `the README's section on the command-line tool names ${command}`);
      const help = await run(process.execPath, [CLI, command, '--help']);
      assert.equal(help.code, 0, help.stderr);
      const row = reference.split('\n').find((l) => l.startsWith(`| \`${command}`))!;
      for (const option of optionsOf(help.stdout)) assert.ok(row.includes(option), `docs/cli.md's row of ${command} has ${option}`);
    }
  });
});

/** The worker threads' files (src/core/<layer>/<name>Worker.ts; see src/core/base/threads.ts), each bundled to dist/ once for every bundle. */
const WORKERS = (fs.readdirSync(path.join(ROOT, 'src', 'core'), { recursive: true }) as string[])
  .filter((f) => /(^|\/)\w+Worker\.ts$/.test(f))
  .map((f) => `dist/${path.basename(f, '.ts')}.js`)
  .sort();

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
  'extension/SECURITY.md',
  // The documents the README links to.
  ...fs
    .readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `extension/docs/${f}`),
  'extension/changelog.md',
  'extension/LICENSE.txt',
  'extension/dist/extension.js',
  // The worker threads: the extension's watches, the staging's copies, verification's hashes.
  ...WORKERS.map((f) => `extension/${f}`),
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
  let tree: string;

  before(async () => {
    dir = tempDir('dss-vsix-');
    vsix = path.join(dir, 'x.vsix');
    // `npm run package` rebuilds dist/ for production: done in a copy of the working tree, so the
    // files that run beside this one (three at a time) never find dist/ gone. The copy is the tree as
    // it is, with out/, src/, test/ and node_modules/ beside it, so a .vscodeignore that lets any of
    // them in is caught.
    tree = tempDir('dss-vsix-tree-');
    const skipped = new Set(['.git', '.cache', 'node_modules', 'dist']);
    fs.cpSync(ROOT, tree, { recursive: true, verbatimSymlinks: true, filter: (src) => !skipped.has(path.relative(ROOT, src)) });
    fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(tree, 'node_modules'));
    const r = await run('npm', ['run', 'package', '--', '--out', vsix], { cwd: tree });
    assert.equal(r.code, 0, `npm run package failed:\n${r.stdout}\n${r.stderr}`);
    files = await unzip(vsix);
  });

  after(() => {
    cleanup(dir);
    cleanup(tree);
  });

  it('holds only what runs and what the README shows: the bundles, the icons, the screenshots, the manifest, README, CHANGELOG and licence', () => {
    const names = [...files.keys()];
    const shown = imagesOf(README()).map((src) => `extension/${src}`);
    const unexpected = names.filter((n) => !SHIPPED.includes(n) && !TRANSLATION.test(n) && !shown.includes(n));
    assert.deepEqual(unexpected, [], 'files the .vsix must not hold: add them to .vscodeignore');
    assert.deepEqual(SHIPPED.filter((n) => !files.has(n)), [], 'files the .vsix lacks');
    const size = (name: string): string => formatBytes(files.get(`extension/dist/${name}`)!.length);
    report(`${path.basename(vsix)}: ${formatBytes(fs.statSync(vsix).size)}, ${names.length} files; dist/extension.js ${size('extension.js')}, dist/cli.js ${size('cli.js')}`);
  });

  it("ships every image the README shows, so that the Marketplace and VS Code's extension page show them", () => {
    const shown = imagesOf(README());
    assert.ok(shown.length > 0);
    for (const src of shown) {
      const packed = files.get(`extension/${src}`);
      assert.ok(packed !== undefined, `the .vsix holds ${src} (name it in .vscodeignore)`);
      assert.ok(packed.equals(fs.readFileSync(path.join(ROOT, src))), `${src} as it is in the working tree`);
    }
    // vsce rewrites the README it packs; its first image must still be the first and still relative.
    assert.equal(imagesOf(files.get('extension/readme.md')!.toString('utf8'))[0], shown[0]);
  });

  it('declares the listing: description, categories, tags, banner and the preview flag', () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as Manifest;
    const xml = files.get('extension.vsixmanifest')!.toString('utf8');
    const escaped = (t: string): string => t.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/'/g, '&apos;').replace(/"/g, '&quot;');
    assert.ok(xml.includes(`>${escaped(manifest.description)}</Description>`), 'the description');
    assert.match(xml, new RegExp(`<Categories>${manifest.categories.join(',')}</Categories>`));
    const tags = /<Tags>([^<]*)<\/Tags>/.exec(xml)![1].split(',');
    for (const k of manifest.keywords) assert.ok(tags.includes(k), `tag ${k}`);
    assert.ok(tags.length <= 30, `${tags.length} tags: the Marketplace takes at most 30`);
    assert.ok(xml.includes(`Branding.Color" Value="${manifest.galleryBanner.color}"`), 'the banner colour');
    assert.ok(xml.includes(`Branding.Theme" Value="${manifest.galleryBanner.theme}"`), 'the banner theme');
    assert.match(xml, manifest.preview === true ? /<GalleryFlags>[^<]*\bPreview\b/ : /<GalleryFlags>(?![^<]*Preview)/);
  });

  it('ships minified bundles without source maps', () => {
    for (const name of ['dist/extension.js', ...WORKERS, ...CLI_BUNDLES]) {
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
    // The bundles as shipped, and nothing else: the entry finds each command's bundle beside it,
    // and the command bundles their worker threads' files one directory up.
    const shipped = path.join(dir, 'shipped');
    for (const f of [...CLI_BUNDLES, ...WORKERS]) {
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
    // The archive libraries as minified into the staging bundle: xz, the one with a UMD wrapper.
    const archive = path.join(dir, 'build.tar.xz');
    await python('import io, sys, tarfile\nwith tarfile.open(sys.argv[1], "w:xz") as t:\n    i = tarfile.TarInfo("readme.txt"); i.size = 3; t.addfile(i, io.BytesIO(b"xz\\n"))', archive);
    const staged = await run(process.execPath, [cli, '-d', staticDir, 'stage', 'eve/R2', archive], elsewhere);
    assert.equal(staged.code, 0, staged.stderr);
    assert.equal(fs.readFileSync(path.join(staticDir, 'eve', 'R2', 'readme.txt'), 'utf8'), 'xz\n');
    // A directory, copied by the copying workers; verified, its large file by a hashing worker.
    const tree = path.join(dir, 'tree');
    fs.mkdirSync(path.join(tree, 'sub'), { recursive: true });
    fs.writeFileSync(path.join(tree, 'large.bin'), Buffer.alloc(3 * 1024 * 1024, 7));
    fs.writeFileSync(path.join(tree, 'sub', 'small.txt'), 'small\n');
    const copied = await run(process.execPath, [cli, '-d', staticDir, 'stage', 'eve/R3', tree], elsewhere);
    assert.equal(copied.code, 0, copied.stderr);
    assert.ok(fs.readFileSync(path.join(staticDir, 'eve', 'R3', 'large.bin')).equals(fs.readFileSync(path.join(tree, 'large.bin'))));
    const verified = await run(process.execPath, [cli, '-d', staticDir, '--json', 'verify', 'eve/R3'], elsewhere);
    assert.equal(verified.code, 0, `${verified.stdout}\n${verified.stderr}`);
    const result = JSON.parse(verified.stdout) as { ok: boolean; checkedFiles: number };
    assert.deepEqual([result.ok, result.checkedFiles], [true, 2]);
  });
});
