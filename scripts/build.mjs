// Bundles the extension, the command-line tool and the core with esbuild; writes the core's type
// declarations with tsc. `node scripts/build.mjs [--production]`
import * as esbuild from 'esbuild';
import { execFileSync, spawnSync } from 'node:child_process';
import { builtinModules, createRequire } from 'node:module';
import { readFileSync, readdirSync, writeFileSync, mkdirSync, mkdtempSync, rmSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
const production = process.argv.includes('--production');
const common = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  sourcemap: !production,
  // Minified after the bundle is built (see `bundle`), so that its helpers still have their names.
  minify: false,
  write: false,
  logLevel: 'warning',
  define: { __VERSION__: JSON.stringify(pkg.version) },
};

/*
 * The command line is the entry dist/cli.js (argument parsing, the command table, and commander
 * for help and usage errors, which runs only then) plus one bundle per command in dist/cli/, which
 * the entry requires when that command runs: a `status` loads what `status` needs and no more
 * (not the staging and archive libraries). CommonJS rather than ES modules split into shared
 * chunks: on Node 20 the ES module loader alone adds several milliseconds to every run, and the
 * code the command bundles share costs disk, not time.
 */
const commandFiles = readdirSync('src/cli').filter((f) => f.endsWith('Command.ts'));
const commandsExternal = {
  name: 'commands-external',
  setup(build) {
    // The table's `require('./listCommand')` becomes a require of dist/cli/listCommand.js.
    build.onResolve({ filter: /^\.\/\w+Command$/ }, (args) => ({ path: `./cli/${args.path.slice(2)}.js`, external: true }));
    // commander, needed only for help and usage errors, in a file of its own: not even parsed otherwise.
    build.onResolve({ filter: /^commander$/ }, () => ({ path: './cli/commander.js', external: true }));
  },
};
/*
 * What proper-lockfile does when it is loaded (graceful-fs patches fs.close, signal-exit installs
 * its handlers) matters only to code that takes locks with it. Declared free of side effects, it is
 * left out of a command bundle that uses nothing of it: `status` takes only describeHolder from
 * lock/refusals.ts. A bundle that takes locks keeps it, and all it does on loading.
 */
const lockfileOnlyWhereUsed = {
  name: 'lockfile-only-where-used',
  setup(build) {
    const path = createRequire(import.meta.url).resolve('proper-lockfile');
    build.onResolve({ filter: /^proper-lockfile$/ }, () => ({ path, sideEffects: false }));
  },
};

/*
 * proper-lockfile falls back to graceful-fs when it is not given an `fs`; the core always gives it
 * one (src/core/lock/lockfs.ts), so graceful-fs would only be loaded to patch Node's fs for the whole
 * process (in VS Code, for every extension in the host) and cost a lock-taking command about
 * 6 ms of start-up. Its require is pointed at Node's own fs.
 */
const plainFs = {
  name: 'plain-fs',
  setup(build) {
    build.onResolve({ filter: /^graceful-fs$/ }, () => ({ path: 'fs', external: true }));
  },
};

/*
 * signal-exit, which proper-lockfile loads, takes one function of Node's assert, whose loading
 * costs a lock-taking command about 1 ms and makes process.stderr a stream. It gets a shim with
 * that function; any other importer of assert gets Node's.
 */
const signalExitAssert = {
  name: 'signal-exit-assert',
  setup(build) {
    build.onResolve({ filter: /^assert$/ }, (args) =>
      /[\\/]node_modules[\\/]signal-exit[\\/]/.test(args.importer) ? { path: path.resolve('scripts/shims/assert-equal.cjs') } : undefined,
    );
  },
};

/*
 * `import * as fs from 'fs'` in a CommonJS bundle becomes `__toESM(require("fs"))` in every file
 * that has it: a copy of the module's properties, each a getter, made again per importing file
 * (17 copies of fs alone in the lock command, 4 ms of its start; 42 of the vscode API in the
 * extension). Our code only reads properties of such a namespace, never its `default`, so for
 * Node's own modules and vscode the module itself serves. Only esbuild's own helper, by its name
 * before minifying, is replaced: a library's `factory(require("stream/web"))` (a UMD wrapper)
 * looks the same and must stay. The bare require is padded with spaces to the call's length, so
 * that source maps stay true.
 */
const PLAIN = new Set([...builtinModules, ...builtinModules.map((m) => `node:${m}`), 'vscode']);
function plainNamespaces(code) {
  return code.replace(/\b__toESM\(require\("([^"]+)"\)\)/g, (call, name) => (PLAIN.has(name) ? `require("${name}")`.padEnd(call.length) : call));
}

/** Builds, takes out the namespace copies, minifies for production, writes. */
async function bundle(options) {
  const result = await esbuild.build({ ...common, ...options });
  for (const file of result.outputFiles) {
    let text = file.text;
    if (file.path.endsWith('.js')) {
      text = plainNamespaces(text);
      if (production) text = (await esbuild.transform(text, { minify: true, target: common.target, format: 'cjs', platform: 'node' })).code;
    }
    mkdirSync(path.dirname(file.path), { recursive: true });
    writeFileSync(file.path, text);
  }
}

rmSync('dist', { recursive: true, force: true });
mkdirSync('dist', { recursive: true });
await Promise.all([
  bundle({ entryPoints: ['src/extension/extension.ts'], outfile: 'dist/extension.js', external: ['vscode'], plugins: [plainFs, signalExitAssert] }),
  bundle({ entryPoints: ['src/cli/main.ts'], outfile: 'dist/cli.js', banner: { js: '#!/usr/bin/env node' }, plugins: [commandsExternal] }),
  // Their worker threads' files are those in dist/, one directory up (src/core/base/threads.ts).
  bundle({
    entryPoints: commandFiles.map((f) => `src/cli/${f}`),
    outdir: 'dist/cli',
    define: { ...common.define, __WORKERS_DIR__: JSON.stringify('..') },
    plugins: [lockfileOnlyWhereUsed, plainFs, signalExitAssert],
  }),
  bundle({ entryPoints: { commander: 'node_modules/commander/index.js' }, outdir: 'dist/cli' }),
  bundle({ entryPoints: ['src/core/index.ts'], outfile: 'dist/core.js', plugins: [plainFs, signalExitAssert] }),
  // The worker threads' files, beside the extension's and the library's bundles (src/core/base/threads.ts):
  // the model's watches, the staging's copying workers, verification's hashers.
  bundle({
    entryPoints: { watchWorker: 'src/core/watch/watchWorker.ts', copyWorker: 'src/core/stage/copyWorker.ts', hashWorker: 'src/core/stage/hashWorker.ts' },
    outdir: 'dist',
  }),
]);
chmodSync('dist/cli.js', 0o755);

/*
 * V8's code caches of the command bundles (src/cli/codeCache.ts), each made from a run of its
 * command in a scratch static directory, so that it holds every function such a run compiles.
 * The runs' own outcome does not matter (a force-release of a free build fails, and still
 * compiles the command). `watch` runs until stopped and has none.
 */
function trainCodeCaches() {
  const scratch = mkdtempSync(path.join(tmpdir(), 'dss-build-'));
  try {
    const staticDir = path.join(scratch, 'static');
    for (const d of ['b/1', 'b/2']) mkdirSync(path.join(staticDir, d), { recursive: true });
    const source = path.join(scratch, 'artifact.bin');
    writeFileSync(source, 'x'.repeat(4096));
    const runs = [
      ['list'],
      ['status', 'b/1'],
      ['lock', 'b/1', '--', 'true'],
      ['stage', 'b/3', source],
      ['verify', 'b/3'],
      ['history', 'b/1'],
      ['du'],
      ['prune', '--keep', '10', '--dry-run'],
      ['reserve', 'b/1', '--for', '1h'],
      ['release', 'b/1'],
      ['force-release', 'b/1'],
      ['destroy', 'b/2', '--force'],
    ];
    const env = { ...process.env, DEVSERVER_STAGING_CODE_CACHE: 'write', DEVSERVER_STATIC_DIR: staticDir };
    delete env.NODE_OPTIONS;
    for (const args of runs) spawnSync(process.execPath, ['dist/cli.js', ...args], { env, stdio: 'ignore', timeout: 60_000 });
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
trainCodeCaches();

// Declarations for the core only: what other Node programs import.
execFileSync(process.execPath, ['node_modules/typescript-native/bin/tsc', '-p', 'tsconfig.core.json'], { stdio: 'inherit' });
writeFileSync('dist/core.d.ts', "export * from './types/index';\n");
