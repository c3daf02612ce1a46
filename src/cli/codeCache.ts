/**
 * A command's bundle compiled from V8's code cache, where the build left one beside it. Compiling
 * the lock command's bundle (175 KiB) is most of what `lock -- true` costs over Node starting a
 * command: with the cache, made by the build from a run of the command, V8 takes the bytecode of
 * every function that run compiled instead of compiling them again, about a quarter of the
 * command's instructions.
 *
 * The cache is named after the bundle's size and modification time: V8 checks that a cache fits
 * its V8 version and flags, but of the source only its length, so a cache must never outlive the
 * bundle it was made from. A cache that does not fit (another Node, other flags) is rejected by
 * V8 and the bundle compiled as usual. The .vsix ships no caches: whatever Node runs the tool
 * there is unknown.
 *
 * `DEVSERVER_STAGING_CODE_CACHE=write` makes the caches (scripts/build.mjs, from runs of the
 * commands in a scratch directory).
 */
import * as fs from 'fs';
import * as Module from 'module';
import * as path from 'path';
import * as vm from 'vm';

type Compile = (module: Module, filename: string) => void;

/** Node's loader for .js files: the one seam where a bundle's compiling can be given the cache. */
const extensions = (Module as unknown as { _extensions: Record<string, Compile> })._extensions;

/** What became of the caches in this process: for tests, and for whoever wonders whether theirs is used. */
export const codeCacheUse = { accepted: 0, rejected: 0, written: 0 };

/** The cache of `filename` as it is now. */
function cacheName(filename: string, st: fs.Stats): string {
  return `${filename}.${st.size}-${Math.trunc(st.mtimeMs)}.v8cache`;
}

/** Runs `load` (which requires a command's bundle) with the bundles it requires compiled from their caches. */
export function withCodeCache<T>(load: () => T): T {
  const writing = process.env.DEVSERVER_STAGING_CODE_CACHE === 'write';
  const plain = extensions['.js'];
  extensions['.js'] = (module, filename) => {
    let source: string;
    let cache: Buffer | undefined;
    let name: string;
    try {
      name = cacheName(filename, fs.statSync(filename));
      if (!writing) cache = fs.readFileSync(name);
      source = fs.readFileSync(filename, 'utf8');
    } catch {
      plain(module, filename);
      return;
    }
    const script = new vm.Script(Module.wrap(source), { filename, ...(cache !== undefined ? { cachedData: cache } : {}) });
    if (cache !== undefined) codeCacheUse[script.cachedDataRejected === true ? 'rejected' : 'accepted']++;
    // The functions the command compiles as it runs go into the cache too: it is made at the end.
    if (writing) {
      process.once('exit', () => {
        fs.writeFileSync(name, script.createCachedData());
        codeCacheUse.written++;
      });
    }
    const wrapper = script.runInThisContext() as (exports: unknown, require: NodeJS.Require, module: Module, filename: string, dirname: string) => void;
    wrapper.call(module.exports, module.exports, Module.createRequire(filename), module, filename, path.dirname(filename));
  };
  try {
    return load();
  } finally {
    extensions['.js'] = plain;
  }
}
