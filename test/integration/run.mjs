#!/usr/bin/env node
// The one entry point for the integration suites: runs out/test/integration/*.test.js inside a
// real VS Code, through @vscode/test-electron's runTests either way.
//
//   --vscode=headless  (default on Linux) code-server in a headless Chromium, installed on first
//                      use into .cache/headless/ (or $VSCODE_HEADLESS_CACHE); needs no display,
//                      no VS Code download and no compiler.
//   --vscode=desktop   a desktop VS Code that @vscode/test-electron downloads (or the one at
//                      $VSCODE_EXECUTABLE_PATH); the usual route on a laptop.
// The route can also be set with DEVSERVER_STAGING_VSCODE=headless|desktop.
// The headless route then checks the tree in the browser (test/ui/); --no-ui skips that, and
// --update-screenshots copies its screenshots into media/. It also runs test/integration/restricted/
// in a workspace that is not trusted (Restricted Mode), whose settings try to point the extension
// elsewhere; DEVSERVER_STAGING_TEST_GREP runs it only when it matches "Restricted Mode".
import { runTests } from '@vscode/test-electron';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(fileURLToPath(import.meta.url), '..', '..', '..');
const flag = process.argv.find((a) => a.startsWith('--vscode='))?.slice('--vscode='.length);
const route = flag ?? process.env.DEVSERVER_STAGING_VSCODE ?? (os.platform() === 'linux' ? 'headless' : 'desktop');
if (route !== 'headless' && route !== 'desktop') {
  console.error(`Unknown VS Code route "${route}": use --vscode=headless or --vscode=desktop.`);
  process.exit(2);
}

const extensionTestsPath = path.join(root, 'out', 'test', 'integration', 'index.js');
if (!fs.existsSync(extensionTestsPath) || !fs.existsSync(path.join(root, 'dist', 'extension.js'))) {
  console.error('Build first: npm run build && npm run compile-tests (npm test does both).');
  process.exit(2);
}
// A workspace of its own, so that the tests never see the developer's settings or folders.
const workspace = fs.mkdtempSync(path.join(os.tmpdir(), 'devserver-staging-it-'));
let code = 1;
try {
  code = await runTests({
    extensionDevelopmentPath: root,
    extensionTestsPath,
    vscodeExecutablePath: route === 'headless' ? path.join(root, 'scripts', 'vscode', 'code-headless.mjs') : process.env.VSCODE_EXECUTABLE_PATH,
    launchArgs: [workspace, '--disable-extensions'],
    extensionTestsEnv: { DEVSERVER_STAGING_IT_WORKSPACE: workspace },
  }).catch((err) => {
    if (err && typeof err.code === 'number') return err.code;
    console.error(`Could not run VS Code (${route}): ${err instanceof Error ? err.message : err}`);
    if (route === 'desktop') console.error('Without access to VS Code\'s download servers, use --vscode=headless.');
    return 1;
  });
} finally {
  fs.rmSync(workspace, { recursive: true, force: true });
}
// Restricted Mode needs workspace trust, which only the headless route can turn on for a run.
const grep = process.env.DEVSERVER_STAGING_TEST_GREP;
if (route === 'headless' && (grep === undefined || grep === '' || new RegExp(grep).test('Restricted Mode'))) {
  const untrusted = fs.mkdtempSync(path.join(os.tmpdir(), 'devserver-staging-restricted-'));
  try {
    // A repository's settings that point the extension at directories it chose, turn its
    // confirmations off and set timings that are no number or too large.
    fs.mkdirSync(path.join(untrusted, '.vscode'));
    fs.writeFileSync(
      path.join(untrusted, '.vscode', 'settings.json'),
      JSON.stringify({
        'devserverStaging.staticDirs': ['/', '~', '..', '${workspaceFolder}/static'],
        'devserverStaging.confirmDestructiveActions': false,
        'devserverStaging.staleSeconds': 'soon',
        'devserverStaging.refreshSeconds': 1e12,
        'devserverStaging.pollSeconds': 1e12,
      }),
    );
    const restricted = await runTests({
      extensionDevelopmentPath: root,
      extensionTestsPath: path.join(root, 'out', 'test', 'integration', 'restricted', 'index.js'),
      vscodeExecutablePath: path.join(root, 'scripts', 'vscode', 'code-headless.mjs'),
      launchArgs: [untrusted, '--disable-extensions'],
      // Probes measured even on a local filesystem: where one may be written, it would be.
      extensionTestsEnv: { DEVSERVER_STAGING_IT_WORKSPACE: untrusted, VSCODE_HEADLESS_RESTRICTED: '1', DEVSERVER_STAGING_CLOCK_PROBE: '1' },
    }).catch((err) => (err && typeof err.code === 'number' ? err.code : 1));
    code ||= restricted;
  } finally {
    fs.rmSync(untrusted, { recursive: true, force: true });
  }
}
// The same extension seen through the browser, as a user sees it: only the headless route has
// a browser to look with.
if (route === 'headless' && !process.argv.includes('--no-ui') && code !== 0) {
  console.log('\nui: skipped, because the integration suites did not pass.');
} else if (route === 'headless' && !process.argv.includes('--no-ui')) {
  const { runUiCheck } = await import('../ui/tree.ui.mjs');
  const ui = await runUiCheck({ updateScreenshots: process.argv.includes('--update-screenshots') }).catch((err) => {
    console.error(`The UI check could not run: ${err instanceof Error ? err.message : err}`);
    return 1;
  });
  code ||= ui;
}
process.exit(code);
