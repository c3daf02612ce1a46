import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import type { DevserverStagingApi } from '../../src/extension/extension';
import type { Prompts } from '../../src/extension/prompts';
import type { RowNode as AreaNode } from '../../src/extension/tree/provider';
import { cleanup, cli, exitOf, killAll, tempDir, waitFor } from '../helpers';
import { api } from './activate.test';
import { nodeOf as walk } from './walk';
import { holdWithCli, makeBuild } from './fixture';

let ext: DevserverStagingApi;
let staticDir: string;
let originalConfirm: Prompts['confirm'];
/** What the commands asked, and what the test answers. */
let asked: { message: string; detail: string; button: string }[] = [];
let answers: boolean[] = [];

function nodeOf(tag: string): Promise<AreaNode> {
  return walk(ext, staticDir, tag);
}

async function stateOf(tag: string): Promise<string | undefined> {
  const n = await nodeOf(tag).catch(() => undefined);
  return n === undefined ? undefined : (ext.tree.getTreeItem(n)).contextValue;
}

const lockOf = (tag: string): string => path.join(staticDir, tag, 'devserver.lock');

describe('commands', function () {
  before(async () => {
    ext = await api();
    staticDir = tempDir('dss-cmd-');
    for (const v of ['R1', 'R2', 'R3', 'R4', 'R5', 'R6']) makeBuild(staticDir, `eve/${v}`);
    await vscode.workspace.getConfiguration('devserverStaging').update('staticDirs', [staticDir], vscode.ConfigurationTarget.Global);
    await waitFor(() => nodeOf('eve/R1').catch(() => undefined), 5_000, 'the fixture in the tree');
    originalConfirm = ext.prompts.confirm;
    ext.prompts.confirm = async (message, detail, button) => {
      asked.push({ message, detail, button });
      return answers.shift() ?? false;
    };
  });

  beforeEach(() => {
    asked = [];
    answers = [];
  });

  after(async () => {
    ext.prompts.confirm = originalConfirm;
    for (const l of ext.windowLocks.all) await ext.windowLocks.release(l.staticDir, l.tag);
    await vscode.workspace.getConfiguration('devserverStaging').update('staticDirs', undefined, vscode.ConfigurationTarget.Global);
    await killAll();
    cleanup(staticDir);
  });

  it('Lock for This Window takes the lock as this window, and Release lets it go', async () => {
    await vscode.commands.executeCommand('devserverStaging.lockForWindow', await nodeOf('eve/R1'));
    const owner = JSON.parse(fs.readFileSync(path.join(lockOf('eve/R1'), 'owner.json'), 'utf8')) as { clientId: string; purpose: string };
    assert.equal(owner.clientId, ext.windowLocks.clientId);
    await waitFor(async () => ((await stateOf('eve/R1')) === 'build.held.mine' ? true : undefined), 2_000, 'R1 shown as held by this window');
    assert.equal(ext.statusBar.text, '$(account) 1 yours');
    assert.match(ext.statusBar.label ?? '', /1 held by you, 0 held by others/);
    const status = await cli(staticDir, ['--json', 'status', 'eve/R1']);
    assert.equal((JSON.parse(status.stdout) as { state: string }).state, 'held');
    await vscode.commands.executeCommand('devserverStaging.releaseWindowLock', await nodeOf('eve/R1'));
    assert.equal(fs.existsSync(lockOf('eve/R1')), false);
    await waitFor(async () => ((await stateOf('eve/R1')) === 'build.free' ? true : undefined), 2_000, 'R1 shown free');
    assert.equal(ext.statusBar.text, '$(unlock) no locks');
  });

  it('tells when this window loses a lock to someone else', async () => {
    const told: string[] = [];
    const notify = ext.prompts.notify;
    ext.prompts.notify = async (severity, message) => (told.push(`${severity}: ${message}`), undefined);
    try {
      await vscode.commands.executeCommand('devserverStaging.lockForWindow', await nodeOf('eve/R2'));
      assert.ok(ext.windowLocks.has(staticDir, 'eve/R2'));
      const r = await cli(staticDir, ['force-release', 'eve/R2']);
      assert.equal(r.code, 0, r.stderr);
      await waitFor(() => (ext.windowLocks.has(staticDir, 'eve/R2') ? undefined : true), 5_000, 'the window to notice its lost lock');
      await waitFor(() => (told.length > 0 ? true : undefined), 5_000, 'the user told');
      assert.match(told[0], /^error: This window lost its lock on eve\/R2: \S+@\S+ \(pid \d+\) force-released it at /);
    } finally {
      ext.prompts.notify = notify;
    }
  });

  it('Force Release asks first, naming the holder and whether its process runs; No keeps the lock', async () => {
    const holder = await holdWithCli(staticDir, 'eve/R3');
    await waitFor(async () => ((await stateOf('eve/R3')) === 'build.held' ? true : undefined), 2_000, 'R3 held');
    answers = [false];
    await vscode.commands.executeCommand('devserverStaging.forceRelease', await nodeOf('eve/R3'));
    assert.equal(asked.length, 1);
    assert.match(asked[0].message, /eve\/R3/);
    assert.match(asked[0].detail, new RegExp(`pid ${holder.pid}`));
    assert.match(asked[0].detail, /still running/);
    assert.ok(fs.existsSync(lockOf('eve/R3')), 'kept after No');
    answers = [true];
    await vscode.commands.executeCommand('devserverStaging.forceRelease', await nodeOf('eve/R3'));
    assert.equal(fs.existsSync(lockOf('eve/R3')), false);
    // The CLI holder hears that its lock is gone and stops its command.
    const exit = await exitOf(holder);
    assert.notEqual(exit.code, 0);
    const audit = fs.readFileSync(path.join(staticDir, '.devserver-staging', 'audit.log'), 'utf8');
    assert.match(audit, /force-release/);
    assert.ok(audit.includes(ext.windowLocks.clientId), 'the audit log names this window');
  });

  it('Destroy removes every selected build after one question', async () => {
    const nodes = [await nodeOf('eve/R4'), await nodeOf('eve/R5')];
    answers = [true];
    await vscode.commands.executeCommand('devserverStaging.destroy', nodes[0], nodes);
    assert.equal(asked.length, 1);
    assert.match(asked[0].message, /Destroy 2 builds/);
    assert.equal(fs.existsSync(path.join(staticDir, 'eve/R4')), false);
    assert.equal(fs.existsSync(path.join(staticDir, 'eve/R5')), false);
    assert.ok(fs.existsSync(path.join(staticDir, 'eve/R6')), 'an unselected build stays');
    await waitFor(async () => ((await ext.tree.getChildren(await nodeOf('eve'))).length === 4 ? true : undefined), 2_000, 'the tree to drop them');
  });

  it('Destroy of a build someone else holds says so in its one question, and breaks the lock only when told', async () => {
    const holder = await holdWithCli(staticDir, 'eve/R6');
    await waitFor(async () => ((await stateOf('eve/R6')) === 'build.held' ? true : undefined), 2_000, 'R6 held');
    answers = [false];
    await vscode.commands.executeCommand('devserverStaging.destroy', await nodeOf('eve/R6'));
    assert.equal(asked.length, 1);
    assert.match(asked[0].message, new RegExp(`^Destroy eve/R6\\? It is held by \\S+@\\S+ \\(pid ${holder.pid}\\)\\.$`));
    assert.equal(asked[0].button, 'Destroy, Breaking the Lock');
    assert.ok(fs.existsSync(lockOf('eve/R6')), 'still there, still locked');
    answers = [true];
    await vscode.commands.executeCommand('devserverStaging.destroy', await nodeOf('eve/R6'));
    assert.equal(asked.length, 2, 'no second question');
    assert.equal(fs.existsSync(path.join(staticDir, 'eve/R6')), false);
    await exitOf(holder);
  });

  it('Copy Path puts the build directory on the clipboard', async () => {
    await vscode.commands.executeCommand('devserverStaging.copyPath', await nodeOf('eve/R1'));
    assert.equal(await vscode.env.clipboard.readText(), path.join(staticDir, 'eve/R1'));
  });

  it('Open in Terminal opens a terminal in the build directory', async () => {
    const before = vscode.window.terminals.length;
    await vscode.commands.executeCommand('devserverStaging.openInTerminal', await nodeOf('eve/R1'));
    await waitFor(() => (vscode.window.terminals.length > before ? true : undefined), 5_000, 'a terminal');
    const t = vscode.window.terminals[vscode.window.terminals.length - 1];
    const cwd = (t.creationOptions as vscode.TerminalOptions).cwd;
    assert.equal(typeof cwd === 'string' ? cwd : cwd?.fsPath, path.join(staticDir, 'eve/R1'));
    t.dispose();
  });

  it('Refresh lists every directory again from disk', async () => {
    const listings = ext.states.work.listings;
    await vscode.commands.executeCommand('devserverStaging.refresh');
    assert.ok((await nodeOf('eve/R1')).entry.state === 'free');
    assert.ok(ext.states.work.listings > listings, 'listed again');
  });
});
