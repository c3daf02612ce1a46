/**
 * What a daily user meets in the real VS Code beyond the lock itself: Go to Build from the view's
 * title with a row selected, folders drawn with an icon in the default theme and counted as the
 * filter shows them, a build's page that says it is being read and names the build, Clean Up's
 * question on a static directory, Add Static Directory's dialog away from the selection, and the
 * folders left expanded remembered for the next window.
 */
import { strict as assert } from 'assert';
import * as path from 'path';
import * as vscode from 'vscode';
import type { DevserverStagingApi } from '../../src/extension/extension';
import type { Prompts } from '../../src/extension/prompts';
import type { Node, RowNode } from '../../src/extension/tree/provider';
import { cleanup, tempDir, waitFor } from '../helpers';
import { api } from './activate.test';
import { makeBuild } from './fixture';
import { nodeOf as walk, pageText } from './walk';

let ext: DevserverStagingApi;
let staticDir: string;
let saved: Prompts;

const settings = (): vscode.WorkspaceConfiguration => vscode.workspace.getConfiguration('devserverStaging');
const nodeOf = (tag: string): Promise<RowNode> => walk(ext, staticDir, tag);
const itemOf = (n: Node): vscode.TreeItem => ext.tree.getTreeItem(n);

describe('everyday use', function () {
  before(async () => {
    ext = await api();
    staticDir = tempDir('dss-day-');
    for (const v of ['R9-1.0.0', 'R10-1.0.0', 'R120-1.0.0']) makeBuild(staticDir, `eve/${v}`);
    makeBuild(staticDir, 'lab/octopus/R1-0.0.1');
    await settings().update('staticDirs', [staticDir], vscode.ConfigurationTarget.Global);
    await waitFor(() => nodeOf('lab/octopus/R1-0.0.1').catch(() => undefined), 5_000, 'the fixture in the tree');
    saved = { ...ext.prompts };
  });

  afterEach(async () => {
    Object.assign(ext.prompts, saved);
    await vscode.commands.executeCommand('devserverStaging.clearFilter');
  });

  after(async () => {
    await settings().update('staticDirs', undefined, vscode.ConfigurationTarget.Global);
    cleanup(staticDir);
  });

  it('Go to Build from the title bar with a row selected asks which build, and goes there', async () => {
    const picked: string[][] = [];
    ext.prompts.pickOne = async (items) => {
      picked.push(items.map((i) => i.label));
      return items.find((i) => i.label === 'eve/R9-1.0.0');
    };
    // VS Code passes the selected row to a title-bar command: the folder's, the static directory's, a build's.
    for (const selected of [await nodeOf('lab'), (await ext.tree.getChildren())[0], await nodeOf('eve/R120-1.0.0')]) {
      const node = await vscode.commands.executeCommand<RowNode | undefined>('devserverStaging.goToBuild', selected);
      assert.equal(node?.tag, 'eve/R9-1.0.0', `with ${selected.kind} selected`);
    }
    assert.equal(picked.length, 3, 'asked each time');
    assert.ok(picked[0].includes('lab/octopus/R1-0.0.1'));
    await waitFor(() => (ext.view.selection[0]?.kind === 'build' && ext.view.selection[0].tag === 'eve/R9-1.0.0' ? true : undefined), 5_000, 'the build selected in the view');
  });

  it('draws folders with a codicon (the default file icon theme has no folders), and counts them as the filter shows them', async () => {
    const eve = itemOf(await nodeOf('eve'));
    assert.ok(eve.iconPath instanceof vscode.ThemeIcon && eve.iconPath.id === 'folder', 'a folder codicon');
    assert.equal(eve.resourceUri, undefined, 'not left to the file icon theme');
    assert.equal(eve.description, '3 builds');
    await vscode.commands.executeCommand('devserverStaging.filter', { text: 'octopus' });
    assert.equal(itemOf(await nodeOf('lab/octopus')).description, '1 of 1 build');
    await vscode.commands.executeCommand('devserverStaging.filter', { text: 'R1' });
    assert.equal(itemOf(await nodeOf('eve')).description, '2 of 3 builds');
    assert.match(ext.view.message ?? '', /— 3 builds shown\. Change or clear the filter from the title bar\./);
  });

  it('shows a build\'s page at once, saying it is being read, titled by the build, then whole', async () => {
    const uri = await vscode.commands.executeCommand<vscode.Uri>('devserverStaging.showBuildDetails', await nodeOf('eve/R10-1.0.0'));
    assert.equal(path.posix.basename(uri.path), 'R10-1.0.0 (build details)', 'what the preview\'s tab is titled after, not a file name');
    const doc = await vscode.workspace.openTextDocument(uri);
    assert.equal(doc.languageId, 'markdown');
    const text = await pageText(uri);
    // (The page escapes `.` in names, so that no name is made a link.)
    assert.match(text, /^# eve\/R10-1\\\.0\\\.0\n/);
    assert.match(text, /\| Lock \| free \|/);
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
  });

  it('Clean Up on a static directory says that it counts across all its folders', async () => {
    const prompts: string[] = [];
    ext.prompts.input = async (options) => {
      prompts.push(options.prompt ?? '');
      return undefined;
    };
    await vscode.commands.executeCommand('devserverStaging.cleanUp', (await ext.tree.getChildren())[0]);
    assert.match(prompts[0], /of the whole static directory, counted across all its folders \(to keep some in each folder, use Clean Up… on each folder instead\)/);
    await vscode.commands.executeCommand('devserverStaging.cleanUp', await nodeOf('eve'));
    assert.match(prompts[1], /^Keep how many of the most recently used builds in eve\?/);
  });

  it('Add Static Directory opens its dialog beside the static directories, never in the selected build', async () => {
    await ext.view.reveal(await nodeOf('eve/R9-1.0.0'), { select: true, focus: false });
    const original = vscode.window.showOpenDialog;
    let opened: vscode.OpenDialogOptions | undefined;
    vscode.window.showOpenDialog = async (options) => {
      opened = options;
      return undefined;
    };
    try {
      await vscode.commands.executeCommand('devserverStaging.chooseStaticDir');
    } finally {
      vscode.window.showOpenDialog = original;
    }
    assert.equal(opened?.defaultUri?.fsPath, path.dirname(staticDir));
  });

  it('remembers which folders are expanded, for the next window', async () => {
    const eve = await nodeOf('eve');
    await ext.view.reveal(eve, { expand: true, select: false, focus: false });
    await ext.view.reveal(await nodeOf('eve/R9-1.0.0'), { select: false, focus: false });
    // As the next window's tree asks for the row: expanded.
    await waitFor(() => (itemOf(eve).collapsibleState === vscode.TreeItemCollapsibleState.Expanded ? true : undefined), 5_000, 'eve remembered as expanded');
    assert.equal(itemOf(await nodeOf('lab')).collapsibleState, vscode.TreeItemCollapsibleState.Collapsed);
  });
});
