/**
 * Finding and understanding builds in the real VS Code: folders and builds, the filter, Go to
 * Build, this window's own locks, the order setting and Show Build Details, checked through the
 * extension's API and against the disk.
 */
import { strict as assert } from 'assert';
import { createHash } from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import { tagProblem } from '../../src/extension/commands/stageBuild';
import { queueOf, stage } from '../../src/core';
import type { DevserverStagingApi } from '../../src/extension/extension';
import type { Node, RowNode } from '../../src/extension/tree/provider';
import { cleanup, cli, killAll, tempDir, waitFor } from '../helpers';
import { api } from './activate.test';
import { holdWithCli, makeBuild } from './fixture';
import { labelOf, nodeOf as walk, pageText } from './walk';

let ext: DevserverStagingApi;
let staticDir: string;
let source: string;

const config = (): vscode.WorkspaceConfiguration => vscode.workspace.getConfiguration('devserverStaging');
const itemOf = (n: Node): vscode.TreeItem => ext.tree.getTreeItem(n);
const labels = async (n: Node | undefined): Promise<string[]> => (await ext.tree.getChildren(n)).map((c) => labelOf(itemOf(c)));
const nodeOf = (tag: string): Promise<RowNode> => walk(ext, staticDir, tag);

describe('the view of builds', function () {
  before(async () => {
    ext = await api();
    staticDir = tempDir('dss-view-');
    source = tempDir('dss-view-src-');
    fs.writeFileSync(path.join(source, 'image.bin'), Buffer.alloc(2048, 3));
    fs.writeFileSync(path.join(source, 'notes.txt'), 'staged for the view test\n');
    for (const v of ['R9-1.0.0', 'R10-1.0.0', 'R120-1.0.0', 'R120-2.0.0']) makeBuild(staticDir, `eve/${v}`);
    makeBuild(staticDir, 'kevin/R100-1.0.0');
    await stage(staticDir, 'lab/octopus/R1-0.0.1', [source], { clientId: 'view-test' });
    // A folder inside a build is an artifact folder, not a build.
    fs.mkdirSync(path.join(staticDir, 'eve/R120-2.0.0/sub'));
    fs.writeFileSync(path.join(staticDir, 'eve/R120-2.0.0/sub/staged.timestamp'), '');
    await config().update('staticDirs', [staticDir], vscode.ConfigurationTarget.Global);
    await waitFor(() => nodeOf('lab/octopus/R1-0.0.1').catch(() => undefined), 5_000, 'the fixture in the tree');
  });

  after(async () => {
    await vscode.commands.executeCommand('devserverStaging.clearFilter');
    for (const l of ext.windowLocks.all) await ext.windowLocks.release(l.staticDir, l.tag);
    await config().update('staticDirs', undefined, vscode.ConfigurationTarget.Global);
    await config().update('sortBuilds', undefined, vscode.ConfigurationTarget.Global);
    await killAll();
    cleanup(staticDir);
    cleanup(source);
  });

  it('shows folders as folders and what is inside a build as artifacts', async () => {
    const lab = await nodeOf('lab');
    assert.equal(itemOf(lab).contextValue, 'folder');
    assert.equal(itemOf(await nodeOf('lab/octopus')).description, '1 build');
    const inside = await ext.tree.getChildren(await nodeOf('eve/R120-2.0.0'));
    const sub = inside.find((n) => labelOf(itemOf(n)) === 'sub');
    assert.equal(sub !== undefined ? itemOf(sub).contextValue : undefined, 'artifactFolder');
    assert.deepEqual(await labels(sub), ['staged.timestamp'], 'inside an artifact folder every file is an artifact');
  });

  it('filters by words of the tag and by state, says so, and clears', async () => {
    const holder = await holdWithCli(staticDir, 'eve/R10-1.0.0');
    await waitFor(() => (ext.states.entry(staticDir, 'eve/R10-1.0.0')?.state === 'held' ? true : undefined), 5_000, 'R10 held');
    await vscode.commands.executeCommand('devserverStaging.filter', { text: 'R1', states: ['held'] });
    const [root] = await ext.tree.getChildren();
    assert.deepEqual(await labels(root), ['eve']);
    const eve = await nodeOf('eve');
    assert.equal(itemOf(eve).description, '1 of 4 builds · 1 held');
    assert.deepEqual(await labels(eve), ['R10-1.0.0']);
    assert.match(ext.view.message ?? '', /Filtered: tag contains “R1”, held by others — 1 build shown/);
    await vscode.commands.executeCommand('devserverStaging.filter', { text: 'r120 EVE' });
    assert.deepEqual(await labels(await nodeOf('eve')), ['R120-2.0.0', 'R120-1.0.0']);
    await vscode.commands.executeCommand('devserverStaging.clearFilter');
    assert.equal(ext.view.message, undefined);
    assert.deepEqual(await labels(root), ['eve', 'kevin', 'lab']);
    holder.kill('SIGTERM');
  });

  it('goes to any build from one quick pick, clearing a filter that hides it', async () => {
    await vscode.commands.executeCommand('devserverStaging.filter', { text: 'kevin' });
    const node = await vscode.commands.executeCommand<RowNode | undefined>('devserverStaging.goToBuild', { staticDir, tag: 'lab/octopus/R1-0.0.1' });
    assert.equal(node?.tag, 'lab/octopus/R1-0.0.1');
    assert.equal(ext.view.message, undefined, 'the filter that hid it is gone');
    await waitFor(() => (ext.view.selection[0]?.kind === 'build' && ext.view.selection[0].tag === 'lab/octopus/R1-0.0.1' ? true : undefined), 5_000, 'the build selected in the view');
  });

  it('shows this window\'s lock as mine, in words, and counts it apart', async () => {
    await vscode.commands.executeCommand('devserverStaging.lockForWindow', await nodeOf('kevin/R100-1.0.0'));
    // Mine at once (the window knows its own lock); the lock on disk is judged when its event comes.
    await waitFor(async () => (itemOf(await nodeOf('kevin/R100-1.0.0')).contextValue === 'build.held.mine' ? true : undefined), 2_000, 'the row as mine');
    const row = itemOf(await nodeOf('kevin/R100-1.0.0'));
    assert.equal(row.description, 'held by you');
    assert.equal((row.iconPath as vscode.ThemeIcon).id, 'account');
    assert.equal(row.contextValue, 'build.held.mine');
    await waitFor(() => (itemOf(ext.tree.find(staticDir, 'kevin') as Node).description === '1 build · 1 yours' ? true : undefined), 2_000, 'the folder to count it as yours');
    assert.match(ext.statusBar.text ?? '', /1 yours/);
    await vscode.commands.executeCommand('devserverStaging.filter', { states: ['mine'] });
    assert.deepEqual(await labels((await ext.tree.getChildren())[0]), ['kevin']);
    await vscode.commands.executeCommand('devserverStaging.clearFilter');
    await vscode.commands.executeCommand('devserverStaging.releaseWindowLock', await nodeOf('kevin/R100-1.0.0'));
  });

  it('orders builds by size when asked, measuring them', async () => {
    fs.writeFileSync(path.join(staticDir, 'eve/R9-1.0.0/big.bin'), Buffer.alloc(64 * 1024));
    await config().update('sortBuilds', 'size', vscode.ConfigurationTarget.Global);
    const eve = await waitFor(() => nodeOf('eve').catch(() => undefined), 5_000, 'eve again');
    await waitFor(async () => ((await labels(eve))[0] === 'R9-1.0.0' ? true : undefined), 5_000, 'the largest build first');
    await config().update('sortBuilds', undefined, vscode.ConfigurationTarget.Global);
  });

  it('shows a build\'s details: artifacts with size, sha256 and source, and its stagings', async () => {
    const uri = await vscode.commands.executeCommand<vscode.Uri>('devserverStaging.showBuildDetails', await nodeOf('lab/octopus/R1-0.0.1'));
    const text = await pageText(uri);
    const sha = createHash('sha256').update('staged for the view test\n').digest('hex');
    // (The page escapes Markdown: a dot comes as "\\.", which linkify cannot read as part of a host name.)
    assert.match(text, /^# lab\/octopus\/R1-0\\\.0\\\.1/);
    assert.ok(text.includes(sha), 'the sha256 of notes.txt');
    assert.match(text, /\| notes\\\.txt \| 25 B \|/);
    assert.match(text, /## Stagings/);
    assert.match(text, /\| Artifacts \| 2 \(/);
  });

  it('shows a big folder a page at a time, newest first, and Go to Build reaches past the page', async () => {
    for (let i = 0; i < 1_005; i++) makeBuild(staticDir, `big/R${1000 + i}-1.0.0`);
    await waitFor(() => (ext.states.buildsUnder(staticDir, 'big').length === 1_005 ? true : undefined), 10_000, 'the big folder scanned');
    const big = await nodeOf('big');
    assert.equal(itemOf(big).description, '1,005 builds');
    const rows = await ext.tree.getChildren(big);
    assert.equal(rows.length, 1_001);
    assert.equal(labelOf(itemOf(rows[0])), 'R2004-1.0.0');
    const more = rows[1_000];
    assert.equal(more.kind, 'more');
    assert.equal(labelOf(itemOf(more)), 'Show 5 more…');
    const node = await vscode.commands.executeCommand<RowNode | undefined>('devserverStaging.goToBuild', { staticDir, tag: 'big/R1000-1.0.0' });
    assert.equal(node?.tag, 'big/R1000-1.0.0');
    const after = await ext.tree.getChildren(big);
    assert.equal(after.length, 1_005, 'the page grew to hold it, and no "more" row is left');
  });

  it('draws a folder\'s row again when its listing lands: counting until then, never a count of none', async () => {
    const other = tempDir('dss-view-wide-');
    const events: Node[] = [];
    const sub = ext.tree.onDidChangeTreeData((e) => events.push(...(e === undefined ? [] : Array.isArray(e) ? e : [e])));
    try {
      for (let i = 0; i < 3_000; i++) makeBuild(other, `wide/R${i}-1.0.0`);
      await config().update('staticDirs', [staticDir, other], vscode.ConfigurationTarget.Global);
      const roots = await ext.tree.getChildren();
      const root = roots.find((r) => r.kind === 'staticDir' && r.dir === other)!;
      const wide = (await ext.tree.getChildren(root)).find((n) => n.kind === 'folder' && n.tag === 'wide')!;
      const first = String(itemOf(wide).description);
      if (first !== '3,000 builds') {
        // Drawn while its 3,000 builds were being listed: it says so, and is drawn again.
        assert.equal(first, 'counting builds…');
        await waitFor(() => (events.some((n) => n.kind === 'folder' && n.tag === 'wide' && n.staticDir === other) ? true : undefined), 20_000, 'the row of wide drawn again');
      }
      assert.equal(itemOf(wide).description, '3,000 builds');
    } finally {
      sub.dispose();
      await config().update('staticDirs', [staticDir], vscode.ConfigurationTarget.Global);
      cleanup(other);
    }
  });

  it('Verify Build marks a damaged build in the tree until a verification finds it whole', async () => {
    const tag = 'lab/octopus/R1-0.0.1';
    const file = path.join(staticDir, tag, 'notes.txt');
    const good = fs.readFileSync(file);
    fs.writeFileSync(file, 'staged for the view tesT\n');
    const [bad] = await vscode.commands.executeCommand<{ ok: boolean; problems: { path: string; kind: string }[] }[]>('devserverStaging.verifyBuild', await nodeOf(tag));
    assert.deepEqual(bad?.problems.map((p) => `${p.path} ${p.kind}`), ['notes.txt changed']);
    const row = itemOf(await nodeOf(tag));
    assert.equal(row.contextValue, 'build.free.damaged');
    assert.match(String(row.description), /^damaged/);
    assert.equal((row.iconPath as vscode.ThemeIcon).id, 'error');
    // Counted in the status bar too, until it is found whole.
    assert.match(ext.statusBar.text ?? '', /, 1 damaged$/);
    assert.match(ext.statusBar.label ?? '', /; 1 damaged/);
    await vscode.commands.executeCommand('devserverStaging.filter', { states: ['damaged'] });
    assert.deepEqual(await labels((await ext.tree.getChildren())[0]), ['lab']);
    await vscode.commands.executeCommand('devserverStaging.clearFilter');
    fs.writeFileSync(file, good);
    const [whole] = await vscode.commands.executeCommand<{ ok: boolean }[]>('devserverStaging.verifyBuild', await nodeOf(tag));
    assert.equal(whole?.ok, true);
    assert.equal(itemOf(await nodeOf(tag)).contextValue, 'build.free');
    assert.doesNotMatch(ext.statusBar.text ?? '', /damaged/);
  });

  it('Stage Build refuses a tag inside an existing build, as the core does', async () => {
    assert.match((await tagProblem(staticDir, 'eve/R120-1.0.0/extra')) ?? '', /inside the build eve\/R120-1\.0\.0/);
    assert.equal(await tagProblem(staticDir, 'eve/R121-1.0.0'), undefined);
  });

  it('shows who held a build last in its tooltip, and its history on its page', async () => {
    const tag = 'kevin/R100-1.0.0';
    assert.equal((await cli(staticDir, ['lock', '--purpose', 'history test', tag, '--', process.execPath, '-e', 'setTimeout(() => {}, 300)'])).code, 0);
    await waitFor(() => (ext.states.entry(staticDir, tag)?.state === 'free' ? true : undefined), 5_000, `${tag} free again`);
    const node = await nodeOf(tag);
    const tip = ((await ext.tree.resolveTreeItem(itemOf(node), node)).tooltip as vscode.MarkdownString).value;
    assert.match(tip, /Last held: by \S+@\S+ for \d+ (ms|s) \(released, /);
    const uri = await vscode.commands.executeCommand<vscode.Uri>('devserverStaging.showBuildDetails', node);
    const text = await pageText(uri);
    assert.match(text, /## History/);
    assert.match(text, /\| released \| \S+@\S+, pid \d+ \| held [^|]*; history test \|/);
    assert.match(text, /\| acquired \|/);
  });

  it('Lock When Free queues this window, shows its place, and holds the lock as yours once it is released', async () => {
    const tag = 'kevin/R100-1.0.0';
    const holder = await holdWithCli(staticDir, tag);
    await waitFor(() => (ext.states.entry(staticDir, tag)?.state === 'held' ? true : undefined), 5_000, `${tag} held`);
    const waiting = vscode.commands.executeCommand('devserverStaging.lockWhenFree', await nodeOf(tag));
    await waitFor(async () => ((await queueOf(staticDir, tag)).length === 1 ? true : undefined), 5_000, 'this window in the queue');
    // The row says that this window waits, and where in line.
    await waitFor(async () => (/^you are next in line · \S+@\S+$/.test(String(itemOf(await nodeOf(tag)).description)) ? true : undefined), 5_000, 'the row saying this window waits');
    holder.kill('SIGTERM');
    const lease = await waiting;
    assert.ok(lease !== undefined, 'the lock came');
    assert.ok(ext.windowLocks.has(staticDir, tag));
    await waitFor(async () => (itemOf(await nodeOf(tag)).contextValue === 'build.held.mine' ? true : undefined), 5_000, 'shown as yours');
    assert.deepEqual(await queueOf(staticDir, tag), [], 'its ticket gone');
    await vscode.commands.executeCommand('devserverStaging.releaseWindowLock', await nodeOf(tag));
  });

  it('Lock When Free named by an error’s button (static directory and tag, no row) waits for that build', async () => {
    const tag = 'kevin/R100-1.0.0';
    const holder = await holdWithCli(staticDir, tag);
    await waitFor(() => (ext.states.entry(staticDir, tag)?.state === 'held' ? true : undefined), 5_000, `${tag} held`);
    const waiting = vscode.commands.executeCommand('devserverStaging.lockWhenFree', undefined, undefined, { staticDir, tag });
    await waitFor(async () => ((await queueOf(staticDir, tag)).length === 1 ? true : undefined), 5_000, 'this window in the queue');
    holder.kill('SIGTERM');
    assert.ok((await waiting) !== undefined, 'the lock came');
    assert.ok(ext.windowLocks.has(staticDir, tag));
    await vscode.commands.executeCommand('devserverStaging.releaseWindowLock', await nodeOf(tag));
  });

  it('Lock When Free cancelled gives its place in the queue up', async () => {
    const tag = 'kevin/R100-1.0.0';
    const holder = await holdWithCli(staticDir, tag);
    await waitFor(() => (ext.states.entry(staticDir, tag)?.state === 'held' ? true : undefined), 5_000, `${tag} held`);
    const abort = new AbortController();
    const waiting = vscode.commands.executeCommand('devserverStaging.lockWhenFree', await nodeOf(tag), undefined, { signal: abort.signal });
    await waitFor(async () => ((await queueOf(staticDir, tag)).length === 1 ? true : undefined), 5_000, 'this window in the queue');
    abort.abort();
    assert.equal(await waiting, undefined, 'cancelled quietly');
    assert.deepEqual(await queueOf(staticDir, tag), [], 'its ticket gone');
    assert.ok(!ext.windowLocks.has(staticDir, tag));
    holder.kill('SIGTERM');
  });
});
