import { strict as assert } from 'assert';
import type { ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import type { LockState } from '../../src/core';
import type { DevserverStagingApi } from '../../src/extension/extension';
import type { RowNode as AreaNode } from '../../src/extension/tree/provider';
import type { Node } from '../../src/extension/tree/provider';
import { cleanup, exitOf, killAll, report, sleep, waitFor } from '../helpers';
import { api } from './activate.test';
import { labelOf, nodeOf as walk } from './walk';
import { TAGS, holdWithCli, makeBuild, makeFixture, type Fixture } from './fixture';

let ext: DevserverStagingApi;
let fx: Fixture & { holder: ChildProcess };

async function setStaticDirs(dirs: string[] | undefined): Promise<void> {
  await vscode.workspace.getConfiguration('devserverStaging').update('staticDirs', dirs, vscode.ConfigurationTarget.Global);
}

/** The node of `tag` in the fixture's tree. */
function nodeOf(tag: string): Promise<AreaNode> {
  return walk(ext, fx.staticDir, tag);
}

function itemOf(node: Node): vscode.TreeItem {
  return ext.tree.getTreeItem(node);
}

function iconOf(item: vscode.TreeItem): string {
  return (item.iconPath as vscode.ThemeIcon).id;
}

/**
 * Resolves when the tree announces a change after which `tag` shows `state`; the time is
 * counted from `since` (when the lock changed on disk).
 */
function treeShows(tag: string, state: LockState, timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const sub = ext.tree.onDidChangeTreeData(async () => {
      const node = await nodeOf(tag).catch(() => undefined);
      if (node !== undefined && node.entry.state === state && itemOf(node).contextValue === `build.${state}`) {
        sub.dispose();
        clearTimeout(timer);
        resolve(Date.now() - started);
      }
    });
    const timer = setTimeout(() => {
      sub.dispose();
      reject(new Error(`the tree did not show ${tag} as ${state} within ${timeoutMs} ms`));
    }, timeoutMs);
  });
}

/** The moment a path appears or disappears, seen by polling every 2 ms. */
async function whenExists(p: string, exists: boolean): Promise<number> {
  await waitFor(() => (fs.existsSync(p) === exists ? true : undefined), 10_000, `${p} to ${exists ? 'appear' : 'go'}`, 2);
  return Date.now();
}

describe('the Staging Areas tree', function () {
  before(async () => {
    ext = await api();
    fx = await makeFixture();
    await setStaticDirs([fx.staticDir]);
    await waitFor(async () => ((await ext.tree.getChildren()).length === 1 ? true : undefined), 5_000, 'the static directory to show');
  });

  after(async () => {
    await setStaticDirs(undefined);
    await killAll();
    cleanup(fx.staticDir);
  });

  it('counts held, stale and legacy builds in the status bar, in words, without anyone expanding a folder', async () => {
    // One held by the CLI, one stale, one legacy (where Python's lockfile is there to make it).
    const want = `$(lock) 1 held, 1 stale${fx.legacy ? ', 1 legacy' : ''}`;
    await waitFor(() => (ext.statusBar.text === want ? true : undefined), 5_000, `the status bar to say ${want} (it shows ${ext.statusBar.text})`);
    assert.equal(ext.statusBar.label, `Devserver Staging: 5 builds; 0 held by you, 1 held by others, 1 stale, ${fx.legacy ? 1 : 0} legacy locks`);
  });

  it('shows the static directory, its folders with counts, and their builds newest first', async () => {
    const [root] = await ext.tree.getChildren();
    assert.equal(itemOf(root).contextValue, 'staticDir');
    const folders = await ext.tree.getChildren(root);
    assert.deepEqual(folders.map((n) => (n as AreaNode).entry.name), ['eve-release', 'hatch-paladin', 'octopus-release']);
    const eve = itemOf(folders[0]);
    assert.equal(eve.contextValue, 'folder');
    assert.equal(iconOf(eve), 'folder');
    assert.equal(eve.description, '3 builds · 1 held');
    assert.equal(itemOf(folders[2]).description, '1 build · 1 stale');
    const builds = (await ext.tree.getChildren(folders[0])).map((n) => (n as AreaNode).entry.name);
    assert.deepEqual(builds, ['R120-15662.0.0', 'R10-12871.0.0', 'R9-12739.0.0']);
  });

  it('lists a build\'s artifacts and never its bookkeeping', async () => {
    const inside = await ext.tree.getChildren(await nodeOf(TAGS.legacy));
    assert.deepEqual(inside.map((n) => labelOf(itemOf(n))), ['autotest.tar']);
  });

  it('shows each lock state with its own icon, words and context value', async function () {
    const expect: [string, LockState, string, RegExp][] = [
      [TAGS.free, 'free', 'package', /^$/],
      [TAGS.held, 'held', 'lock', /^\S+@\S+$/],
      [TAGS.stale, 'stale', 'warning', /^stale · chrome-bot@buildbot-7$/],
    ];
    if (fx.legacy) expect.push([TAGS.legacy, 'legacy', 'lock', /^legacy lock · \S+$/]);
    for (const [tag, state, icon, description] of expect) {
      const item = itemOf(await nodeOf(tag));
      assert.equal(item.contextValue, `build.${state}`, tag);
      assert.equal(iconOf(item), icon, tag);
      assert.match(String(item.description), description, tag);
      assert.equal(item.label, path.basename(tag));
    }
    if (!fx.legacy) this.skip();
  });

  it('puts the holder and the ages in the tooltip, never in the label', async () => {
    const node = await nodeOf(TAGS.held);
    const item = await ext.tree.resolveTreeItem(itemOf(node), node);
    const tip = (item.tooltip as vscode.MarkdownString).value;
    assert.match(tip, new RegExp(`pid ${fx.holder.pid}`));
    assert.match(tip, /integration test/);
    assert.match(tip, /Heartbeat: \d+ s ago/);
    const stale = await ext.tree.resolveTreeItem(itemOf(await nodeOf(TAGS.stale)), await nodeOf(TAGS.stale));
    // As Markdown source: the hostname is escaped wherever a character of it could be markup.
    assert.match((stale.tooltip as vscode.MarkdownString).value, /buildbot\\?-7, pid 41812/);
    assert.match((stale.tooltip as vscode.MarkdownString).value, /Acquired: .*60 min/);
  });

  it('gives a legacy lock no heartbeat in its tooltip (the Python devserver has none), but when it was taken', async function () {
    if (!fx.legacy) this.skip();
    const node = await nodeOf(TAGS.legacy);
    const tip = ((await ext.tree.resolveTreeItem(itemOf(node), node)).tooltip as vscode.MarkdownString).value;
    assert.doesNotMatch(tip, /Heartbeat/);
    assert.match(tip, /Taken: \d+ (ms|s|min) ago/);
    assert.match(tip, /Python devserver on /);
  });

  it('shows a lock taken by another process within a second, and its release', async () => {
    const lock = path.join(fx.staticDir, TAGS.free2, 'devserver.lock');
    await nodeOf(TAGS.free2);
    const shown = treeShows(TAGS.free2, 'held', 10_000);
    const holder = await holdWithCli(fx.staticDir, TAGS.free2);
    const taken = await whenExists(lock, true);
    await shown;
    const heldAfter = Date.now() - taken;
    const freed = treeShows(TAGS.free2, 'free', 10_000);
    holder.kill('SIGTERM');
    const released = await whenExists(lock, false);
    await freed;
    const freeAfter = Date.now() - released;
    report(`held shown ${heldAfter} ms after the lock appeared; free shown ${freeAfter} ms after it went`);
    assert.ok(heldAfter < 1000, `held after ${heldAfter} ms`);
    assert.ok(freeAfter < 1000, `free after ${freeAfter} ms`);
    await exitOf(holder);
  });

  it('sees a build made with mkdir -p and locked at once by another process', async () => {
    await nodeOf('eve-release');
    const tag = 'eve-release/R121-15700.0.0';
    const shown = treeShows(tag, 'held', 10_000);
    makeBuild(fx.staticDir, tag);
    await holdWithCli(fx.staticDir, tag);
    const ms = await shown;
    report(`new build shown held ${ms} ms after its directory was made`);
  });

  it('does not refresh anything for heartbeats', async () => {
    const tag = 'octopus-release/R120-15662.0.0';
    makeBuild(fx.staticDir, tag);
    await waitFor(() => nodeOf(tag).catch(() => undefined), 5_000, `${tag} in the tree`);
    await holdWithCli(fx.staticDir, tag, ['--stale', '2', '--refresh', '1']);
    await waitFor(async () => ((await nodeOf(tag)).entry.state === 'held' ? true : undefined), 5_000, `${tag} held`);
    const lock = path.join(fx.staticDir, tag, 'devserver.lock');
    const before = fs.statSync(lock).mtimeMs;
    let events = 0;
    const sub = ext.tree.onDidChangeTreeData(() => events++);
    const { listings, inspections } = ext.states.work;
    await sleep(3_500);
    sub.dispose();
    assert.ok(fs.statSync(lock).mtimeMs > before, 'the holder refreshed its lock meanwhile');
    assert.equal(events, 0, 'tree change events during 3.5 s of heartbeats');
    assert.deepEqual([ext.states.work.listings, ext.states.work.inspections], [listings, inspections], 'listings and lock judgements during 3.5 s of heartbeats');
  });

  it('shows a killed holder as stale', async () => {
    const tag = 'hatch-paladin/R121-15701.0.0';
    makeBuild(fx.staticDir, tag);
    await waitFor(() => nodeOf(tag).catch(() => undefined), 5_000, `${tag} in the tree`);
    const holder = await holdWithCli(fx.staticDir, tag);
    await waitFor(async () => ((await nodeOf(tag)).entry.state === 'held' ? true : undefined), 5_000, `${tag} held`);
    const stale = treeShows(tag, 'stale', 10_000 + 1_000);
    holder.kill('SIGKILL');
    const ms = await stale;
    report(`killed holder shown stale after ${ms} ms`);
  });

  it('shows a lock of another machine stale once its heartbeat is older than the threshold, with no file event', async () => {
    const tag = 'hatch-paladin/R122-15702.0.0';
    makeBuild(fx.staticDir, tag);
    await waitFor(() => nodeOf(tag).catch(() => undefined), 5_000, `${tag} in the tree`);
    // A holder on another machine, refreshing every 1 s with a 2 s threshold, that just stopped.
    const lock = path.join(fx.staticDir, tag, 'devserver.lock');
    fs.mkdirSync(lock);
    const owner = { pid: 4242, hostname: 'buildbot-9', user: 'chrome-bot', clientId: 'buildbot-9:4242', acquiredAt: new Date().toISOString(), token: 'fixture0remote', staleMs: 2000, refreshMs: 1000 };
    fs.writeFileSync(path.join(lock, 'owner.json'), JSON.stringify(owner));
    const stopped = Date.now();
    await vscode.workspace.getConfiguration('devserverStaging').update('staleSeconds', 2, vscode.ConfigurationTarget.Global);
    try {
      await waitFor(async () => ((await nodeOf(tag)).entry.state === 'stale' ? true : undefined), 2_000 + 1_000 + 1_000, `${tag} stale`, 50);
      report(`remote holder shown stale ${Date.now() - stopped} ms after its last heartbeat (threshold 2000 ms)`);
    } finally {
      await vscode.workspace.getConfiguration('devserverStaging').update('staleSeconds', undefined, vscode.ConfigurationTarget.Global);
    }
  });
});
