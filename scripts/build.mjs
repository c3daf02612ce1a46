// Bundles the extension, the command-line tool and the core with esbuild; writes the core's type
// declarations with tsc. `node scripts/build.mjs [--watch] [--production]`
import * as esbuild from 'esbuild';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync, mkdirSync, rmSync, chmodSync } from 'node:fs';

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
const production = process.argv.includes('--production');
const common = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  sourcemap: !production,
  minify: production,
  logLevel: 'warning',
  define: { __VERSION__: JSON.stringify(pkg.version) },
};

rmSync('dist', { recursive: true, force: true });
mkdirSync('dist', { recursive: true });
await Promise.all([
  esbuild.build({ ...common, entryPoints: ['src/extension.ts'], outfile: 'dist/extension.js', external: ['vscode'] }),
  esbuild.build({ ...common, entryPoints: ['src/cli.ts'], outfile: 'dist/cli.js', banner: { js: '#!/usr/bin/env node' } }),
  esbuild.build({ ...common, entryPoints: ['src/core/index.ts'], outfile: 'dist/core.js' }),
]);
chmodSync('dist/cli.js', 0o755);

// Declarations for the core only: what other Node programs import.
execFileSync(process.execPath, ['node_modules/typescript-native/bin/tsc', '-p', 'tsconfig.core.json'], { stdio: 'inherit' });
writeFileSync('dist/core.d.ts', "export * from './types/index';\n");
