/**
 * A lock this window holds, lost to another process, in the real VS Code: "yours" leaves the row,
 * the folder's count and the status bar as soon as the view sees the lock go (before the window's
 * own lease hears of it), and the user is told who broke it and when, in words, with no errno or
 * descriptor path, in a notification VS Code keeps until it is dismissed.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { spawn } from 'child_process';
import * as vscode from 'vscode';
import type { DevserverStagingApi } from '../../src/extension/extension';
import type { Prompts, Severity } from '../../src/extension/prompts';
import type { RowNode } from '../../src/extension/tree/provider';
import { CLI, cleanup, exitOf, killAll, stderrOf, tempDir, track, waitFor } from '../helpers';
import { api } from './activate.test';
import { makeBuild } from './fixture';
import { nodeOf as walk } from './walk';

let ext: DevserverStagingApi;
let staticDir: string;
let notify: Prompts['notify'];
/** Notifications shown, each with the answer the user has not given yet. */
let told: { severity: Severity; message: string; actions: string[]; dismiss: () => void }[] = [];

const settings = (): vscode.WorkspaceConfiguration => vscode.workspace.getConfiguration('devserverStaging');
const nodeOf = (tag: string): Promise<RowNode> => walk(ext, staticDir, tag);
const who = `${os.userInfo().username}@${os.hostname()}`;
/** What a heartbeat meets and no user should read. */
const LEAKS = /ENOENT|ESTALE|errno|\/proc\/self\/fd|stat '/;

/** The row of `tag` as VS Code would draw it now. */
async function rowOf(tag: string): Promise<vscode.TreeItem> {
  return ext.tree.getTreeItem(await nodeOf(tag));
}

/** The CLI in another process: its pid is who the history names. */
async function cliRun(args: string[]): Promise<number> {
  const child = track(spawn(process.execPath, [CLI, '--static-dir', staticDir, ...args], { stdio: ['ignore', 'pipe', 'pipe'] }));
  const { code } = await exitOf(child);
  assert.equal(code, 0, stderrOf(child));
  return child.pid!;
}

describe('a lock this window lost', function () {
  this.timeout(60_000);

  before(async () => {
    ext = await api();
    staticDir = tempDir('dss-lost-');
    for (const v of ['R1', 'R2', 'R3']) makeBuild(staticDir, `eve/${v}`);
    // Heartbeats 10 s apart: the view sees the lock go long before this window's lease does.
    await settings().update('refreshSeconds', 10, vscode.ConfigurationTarget.Global);
    await settings().update('staleSeconds', 40, vscode.ConfigurationTarget.Global);
    await settings().update('staticDirs', [staticDir], vscode.ConfigurationTarget.Global);
    await waitFor(() => nodeOf('eve/R1').catch(() => undefined), 5_000, 'the fixture in the tree');
    // Losses of earlier suites, not dismissed there, would be counted in the status bar.
    for (const l of [...ext.losses.all]) ext.losses.dismiss(l);
    notify = ext.prompts.notify;
    ext.prompts.notify = (severity, message, ...actions) =>
      new Promise((resolve) => {
        told.push({ severity, message, actions, dismiss: () => resolve(undefined) });
      });
  });

  afterEach(() => {
    for (const t of told) t.dismiss();
    told = [];
  });

  after(async () => {
    ext.prompts.notify = notify;
    for (const l of ext.windowLocks.all) await ext.windowLocks.release(l.staticDir, l.tag).catch(() => undefined);
    for (const l of [...ext.losses.all]) ext.losses.dismiss(l);
    for (const k of ['staticDirs', 'refreshSeconds', 'staleSeconds']) await settings().update(k, undefined, vscode.ConfigurationTarget.Global);
    await killAll();
    cleanup(staticDir);
  });

  it('force-released: yours leaves the row, the folder and the status bar at once, and the user is told who did it and when', async () => {
    const lease = await ext.windowLocks.lock(staticDir, 'eve/R1');
    await waitFor(async () => ((await rowOf('eve/R1')).contextValue === 'build.held.mine' ? true : undefined), 5_000, 'R1 shown as yours');
    assert.match(String((await rowOf('eve')).description), /· 1 yours/);
    assert.equal(ext.statusBar.text, '$(account) 1 yours');

    const pid = await cliRun(['force-release', 'eve/R1']);
    // The view follows the disk: not yours any more, while the lease has not heard yet.
    await waitFor(async () => ((await rowOf('eve/R1')).contextValue === 'build.free' ? true : undefined), 5_000, 'R1 shown free');
    assert.equal(lease.state, 'held', 'the lease had not heard yet: the view alone saw the lock go');
    assert.equal((await rowOf('eve/R1')).description, '');
    assert.doesNotMatch(String((await rowOf('eve')).description), /yours/);
    assert.equal(ext.statusBar.text, '$(unlock) no locks');

    // The lease hears it at its next heartbeat; the user is told who broke it and when.
    await waitFor(() => (told.length > 0 ? true : undefined), 20_000, 'the notification of the lost lock');
    const t = told[0];
    assert.equal(t.severity, 'error', 'an error with a button: VS Code keeps it on screen until it is dismissed');
    assert.deepEqual(t.actions, ['Show Build Details']);
    assert.match(t.message, new RegExp(`^This window lost its lock on eve/R1: ${who} \\(pid ${pid}\\) force-released it at .+\\. Work done under it may be incomplete\\.$`));
    assert.doesNotMatch(t.message, LEAKS);
    assert.doesNotMatch(t.message, /Lost the lock/);
    // Until it is dismissed, the status bar says so too.
    assert.equal(ext.statusBar.text, '$(error) 1 lost');
    t.dismiss();
    await waitFor(() => (ext.losses.all.length === 0 ? true : undefined), 5_000, 'the loss dismissed');
    assert.equal(ext.statusBar.text, '$(unlock) no locks');
    assert.equal(ext.windowLocks.has(staticDir, 'eve/R1'), false);
  });

  it('taken by another holder after a force-release: shown as theirs at once', async () => {
    await ext.windowLocks.lock(staticDir, 'eve/R2');
    await waitFor(async () => ((await rowOf('eve/R2')).contextValue === 'build.held.mine' ? true : undefined), 5_000, 'R2 shown as yours');
    await cliRun(['force-release', 'eve/R2']);
    const holder = track(spawn(process.execPath, [CLI, '--static-dir', staticDir, 'lock', 'eve/R2', '--', 'sleep', '30'], { stdio: ['ignore', 'pipe', 'pipe'] }));
    await waitFor(async () => ((await rowOf('eve/R2')).contextValue === 'build.held' ? true : undefined), 5_000, 'R2 shown held by the other');
    assert.match(String((await rowOf('eve/R2')).description), new RegExp(`^${who}$`));
    holder.kill('SIGTERM');
    await waitFor(() => (told.length > 0 ? true : undefined), 20_000, 'the notification of the lost lock');
    assert.match(told[0].message, /^This window lost its lock on eve\/R2: .* force-released it at /);
  });

  it('destroyed with its build by another process: the row goes, and the user is told the build was destroyed', async () => {
    await ext.windowLocks.lock(staticDir, 'eve/R3');
    await waitFor(async () => ((await rowOf('eve/R3')).contextValue === 'build.held.mine' ? true : undefined), 5_000, 'R3 shown as yours');
    const pid = await cliRun(['destroy', '--force', 'eve/R3']);
    assert.ok(!fs.existsSync(path.join(staticDir, 'eve/R3')));
    await waitFor(async () => ((await nodeOf('eve/R3').then(() => false, () => true)) ? true : undefined), 5_000, 'R3 gone from the view');
    assert.doesNotMatch(String((await rowOf('eve')).description), /yours/);
    await waitFor(() => (told.length > 0 ? true : undefined), 20_000, 'the notification of the lost lock');
    assert.match(told[0].message, new RegExp(`^This window lost its lock on eve/R3: ${who} \\(pid ${pid}\\) force-released it at .+ and destroyed the build\\.$`));
  });
});
