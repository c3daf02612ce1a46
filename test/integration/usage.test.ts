/**
 * Show Usage in the real VS Code, on the demo-like fixture: a build row's page shows its holdings
 * (the one the command line holds now, still open), a folder's page its most used builds, the
 * panel is reused for the same build, runs no script, loads nothing, has command links off, and
 * a hostile holder from the history is text in it.
 */
import { strict as assert } from 'assert';
import type { ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import { acquire, flushHistory } from '../../src/core';
import { HISTORY_DIR, META_DIR, historyDirOf, historySegmentName } from '../../src/core/base/protocol';
import type { DevserverStagingApi } from '../../src/extension/extension';
import { cleanup, waitFor } from '../helpers';
import { api } from './activate.test';
import { TAGS, makeFixture } from './fixture';

const settings = (): vscode.WorkspaceConfiguration => vscode.workspace.getConfiguration('devserverStaging');

describe('Show Usage', function () {
  this.timeout(60_000);
  let ext: DevserverStagingApi;
  let staticDir: string;
  let holder: ChildProcess;

  before(async () => {
    ext = await api();
    ({ staticDir, holder } = await makeFixture());
    // Two holdings of a free build, one after the other.
    for (const clientId of ['first', 'second']) await (await acquire(staticDir, TAGS.free, { createOnce: false, clientId, purpose: `usage ${clientId}` })).release();
    // A co-user's hand-written line: a holder whose name is markup.
    const tag = TAGS.free2;
    const dir = path.join(staticDir, META_DIR, HISTORY_DIR, ...historyDirOf(tag));
    fs.mkdirSync(dir, { recursive: true });
    const evil = { user: '<script>alert(1)</script>', hostname: '<img src=x onerror=alert(2)>', pid: 66, clientId: 'evil', purpose: '[go](command:devserverStaging.destroy)' };
    fs.writeFileSync(path.join(dir, historySegmentName('evilhost', 0)), `${JSON.stringify({ tag, kind: 'released', holder: evil, fence: 1, heldMs: 60_000, time: new Date(Date.now() - 3_600_000).toISOString() })}\n`);
    await flushHistory();
    await settings().update('staticDirs', [staticDir], vscode.ConfigurationTarget.Global);
    await waitFor(() => ext.tree.nodeFor(staticDir, TAGS.held), 10_000, 'the fixture in the tree');
  });

  after(async () => {
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    holder.kill();
    await settings().update('staticDirs', undefined, vscode.ConfigurationTarget.Global);
    cleanup(staticDir);
  });

  it('opens a panel with the build\'s holdings, reused for the same build, with no script, no command link and nothing loaded', async () => {
    const node = ext.tree.nodeFor(staticDir, TAGS.held);
    assert.ok(node !== undefined && node.kind === 'build');
    const panel = await vscode.commands.executeCommand<vscode.WebviewPanel>('devserverStaging.showUsage', node);
    assert.ok(panel !== undefined, 'a panel');
    assert.equal(panel.viewType, 'devserverStaging.usage');
    assert.match(panel.title, /R120-15662\.0\.0/);
    assert.equal(panel.webview.options.enableScripts, false);
    assert.equal(panel.webview.options.enableCommandUris, false);
    assert.deepEqual(panel.webview.options.localResourceRoots, []);
    const html = panel.webview.html;
    assert.match(html, /<h1>Usage of eve-release\/R120-15662\.0\.0<\/h1>/);
    // The command line holds it now: one holding, still open, in both windows.
    assert.equal((html.match(/<rect class="hold open" [^>]*height="13">/g) ?? []).length, 2, html);
    assert.match(html, /: still held, /);
    assert.match(html, /\(integration test\)/, 'the holder\'s purpose');
    assert.match(html, /default-src 'none'/);
    assert.doesNotMatch(html, /<script|href=|src=/i);
    const again = await vscode.commands.executeCommand<vscode.WebviewPanel>('devserverStaging.showUsage', node);
    assert.equal(again, panel, 'the same panel, drawn anew');
  });

  it('on a folder row: its most used builds, each holding, and a hostile holder shown as text', async () => {
    const folder = ext.tree.nodeFor(staticDir, 'eve-release');
    assert.ok(folder !== undefined && folder.kind === 'folder');
    const panel = await vscode.commands.executeCommand<vscode.WebviewPanel>('devserverStaging.showUsage', folder);
    const html = panel.webview.html;
    const [day] = html.split('<section class="window week">');
    assert.equal((day.match(/<g class="lane">/g) ?? []).length, 3, 'three builds of eve-release were held today');
    assert.equal((day.match(/<rect class="hold released" [^>]*height="13">/g) ?? []).length, 3, 'two releases of the free build and the hand-written one');
    assert.match(day, /\(usage first\)/);
    assert.match(day, /&lt;script&gt;alert\(1\)&lt;\/script&gt;@&lt;img src=x onerror=alert\(2\)&gt;:66/);
    assert.doesNotMatch(html, /<script|<img|href=/i);
    const other = await vscode.commands.executeCommand<vscode.WebviewPanel>('devserverStaging.showUsage', ext.tree.nodeFor(staticDir, TAGS.held));
    assert.notEqual(other, panel, 'a build and its folder have a panel each');
  });

  it('from the palette: a pick of static directories, folders and builds', async () => {
    const saved = ext.prompts.pickOne;
    const offered: string[] = [];
    ext.prompts.pickOne = async (items) => {
      for (const i of items) offered.push(i.label);
      return items.find((i) => i.label === 'octopus-release/');
    };
    try {
      const panel = await vscode.commands.executeCommand<vscode.WebviewPanel>('devserverStaging.showUsage');
      assert.match(panel.webview.html, /<h1>Usage of octopus-release<\/h1>/);
    } finally {
      ext.prompts.pickOne = saved;
    }
    for (const label of ['Every build', 'eve-release/', TAGS.held, TAGS.stale]) assert.ok(offered.includes(label), `${label} offered: ${offered.join(', ')}`);
  });
});
