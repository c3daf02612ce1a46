/**
 * What a user meets in the dialogs, read as the user reads them (through the Prompts the
 * commands ask with) and checked on disk: destroy, clean up, force release of stale locks,
 * static directories in the settings, opening artifacts, copying tags, and errors with buttons.
 */
import { strict as assert } from 'assert';
import { spawnSync, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import type { DevserverStagingApi } from '../../src/extension/extension';
import { progressMessage } from '../../src/extension/commands/staging';
import type { Prompts, Severity } from '../../src/extension/prompts';
import type { RowNode as AreaNode } from '../../src/extension/tree/provider';
import type { Node } from '../../src/extension/tree/provider';
import { CLI_HINT, cleanup, exitOf, killAll, tempDir, waitFor } from '../helpers';
import { api } from './activate.test';
import { holdWithCli, makeBuild, makeStaleLock } from './fixture';
import { nodeOf as walk } from './walk';

/** What an input box's validation says, as text. */
const messageOf = (v: string | vscode.InputBoxValidationMessage | null | undefined): string => (typeof v === 'string' ? v : (v?.message ?? ''));

let ext: DevserverStagingApi;
let staticDir: string;
let original: Prompts;

/** Every question asked, as the user saw it. */
interface Asked {
  message: string;
  detail: string;
  button: string;
  skippable: boolean;
}
let asked: Asked[] = [];
/** Answers to the modal questions, in order: a boolean, or a function run while the question is open. */
let answers: (boolean | (() => Promise<boolean>))[] = [];
/** Every notification, as shown. */
let told: { severity: Severity; message: string; actions: string[] }[] = [];
/** Which button to press on a notification (none: it is left alone). */
let press: (message: string, actions: string[]) => string | undefined = () => undefined;
let inputs: vscode.InputBoxOptions[] = [];
let inputAnswers: (string | undefined)[] = [];
let picks: { items: readonly vscode.QuickPickItem[]; options: vscode.QuickPickOptions }[] = [];

/** The row of `tag`, once the view has seen it (a directory made just now takes the watcher a moment). */
function nodeOf(tag: string): Promise<AreaNode> {
  let last = '';
  return waitFor(
    () =>
      walk(ext, staticDir, tag).catch((e: unknown) => {
        last = String(e);
        return undefined;
      }),
    5_000,
    `${tag} in the view`,
  ).catch((e: unknown) => {
    throw new Error(`${String(e)}: ${last}`);
  });
}

async function childrenOf(tag: string): Promise<Node[]> {
  return ext.tree.getChildren(await nodeOf(tag));
}

async function stateOf(tag: string): Promise<string | undefined> {
  const n = await nodeOf(tag).catch(() => undefined);
  return n === undefined ? undefined : (ext.tree.getTreeItem(n)).contextValue;
}

async function shownAs(tag: string, contextValue: string): Promise<void> {
  await waitFor(async () => ((await stateOf(tag)) === contextValue ? true : undefined), 5_000, `${tag} shown as ${contextValue} (it is ${await stateOf(tag)})`);
}

const exists = (tag: string): boolean => fs.existsSync(path.join(staticDir, tag));
const locked = (tag: string): boolean => fs.existsSync(path.join(staticDir, tag, 'devserver.lock'));
const settings = (): vscode.WorkspaceConfiguration => vscode.workspace.getConfiguration('devserverStaging');

/** A build whose last use was `daysAgo` days ago, with one artifact of `bytes`. */
function oldBuild(tag: string, daysAgo: number, bytes = 1024 * 1024): void {
  const dir = path.join(staticDir, tag);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'image.bin'), Buffer.alloc(bytes, 1));
  const stamp = path.join(dir, 'staged.timestamp');
  fs.writeFileSync(stamp, '');
  const t = new Date(Date.now() - daysAgo * 86_400_000);
  fs.utimesSync(stamp, t, t);
}

describe('dialogs', function () {
  before(async () => {
    ext = await api();
    staticDir = tempDir('dss-dlg-');
    makeBuild(staticDir, 'eve/R1');
    await settings().update('staticDirs', [staticDir], vscode.ConfigurationTarget.Global);
    await waitFor(() => nodeOf('eve/R1').catch(() => undefined), 5_000, 'the fixture in the tree');
    original = { ...ext.prompts };
    ext.prompts.confirm = async (message, detail, button, skippable = true) => {
      asked.push({ message, detail, button, skippable });
      const a = answers.shift() ?? false;
      return typeof a === 'function' ? a() : a;
    };
    ext.prompts.notify = async (severity, message, ...actions) => {
      told.push({ severity, message, actions });
      return press(message, actions);
    };
    ext.prompts.input = async (options) => {
      inputs.push(options);
      const answer = inputAnswers.shift();
      if (answer !== undefined) assert.equal(await options.validateInput?.(answer), undefined, `the answer ${answer} is accepted`);
      return answer;
    };
    ext.prompts.pickMany = async (items, options) => {
      picks.push({ items, options });
      return items.filter((i) => i.picked === true);
    };
  });

  beforeEach(() => {
    asked = [];
    answers = [];
    told = [];
    press = () => undefined;
    inputs = [];
    inputAnswers = [];
    picks = [];
  });

  afterEach(() => {
    for (const t of told) assert.doesNotMatch(t.message, CLI_HINT, `a command-line hint shown: ${t.message}`);
    for (const a of asked) assert.doesNotMatch(`${a.message}\n${a.detail}\n${a.button}`, CLI_HINT, `a command-line hint asked: ${a.message}`);
  });

  after(async () => {
    Object.assign(ext.prompts, original);
    for (const l of ext.windowLocks.all) await ext.windowLocks.release(l.staticDir, l.tag);
    await settings().update('staticDirs', undefined, vscode.ConfigurationTarget.Global);
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    await killAll();
    cleanup(staticDir);
  });

  it('Destroy names each build’s lock and the count first, breaks only the lock it named, and asks nothing after', async () => {
    for (const v of ['R1', 'R2', 'R3', 'R4']) makeBuild(staticDir, `grp/${v}`);
    makeStaleLock(staticDir, 'grp/R3');
    const holder = await holdWithCli(staticDir, 'grp/R2');
    await nodeOf('grp/R4');
    await vscode.commands.executeCommand('devserverStaging.lockForWindow', await nodeOf('grp/R4'));
    await shownAs('grp/R2', 'build.held');
    await shownAs('grp/R4', 'build.held.mine');
    const nodes = await Promise.all(['R1', 'R2', 'R3', 'R4'].map((v) => nodeOf(`grp/${v}`)));

    await settings().update('confirmDestructiveActions', false, vscode.ConfigurationTarget.Global);
    try {
      answers = [false];
      await vscode.commands.executeCommand('devserverStaging.destroy', nodes[0], nodes);
    } finally {
      await settings().update('confirmDestructiveActions', undefined, vscode.ConfigurationTarget.Global);
    }
    assert.equal(asked.length, 1);
    const [q] = asked;
    assert.match(q.message, /^Destroy 4 builds\? 1 is held by \S+@\S+, 1 is stale, 1 is held by this window\.$/);
    assert.equal(q.button, 'Destroy 4, Breaking 1 Lock');
    assert.equal(q.skippable, false, 'asked even with confirmations off: a lock someone else holds breaks');
    const lines = q.detail.split('\n');
    assert.ok(lines.includes('grp/R1 — free'), q.detail);
    assert.ok(lines.some((l) => new RegExp(`^grp/R2 — held by \\S+@\\S+ \\(pid ${holder.pid}\\) since .+ \\(\\d+ s ago\\)$`).test(l)), q.detail);
    assert.ok(lines.includes('grp/R3 — stale: last held by chrome-bot@buildbot-7 (pid 41812), last heartbeat 60 min ago'), q.detail);
    assert.ok(lines.includes('grp/R4 — held by this window'), q.detail);
    assert.match(q.detail, /Destroying breaks 1 lock/);
    assert.ok(['R1', 'R2', 'R3', 'R4'].every((v) => exists(`grp/${v}`)), 'No changes nothing');

    answers = [true];
    await vscode.commands.executeCommand('devserverStaging.destroy', nodes[0], nodes);
    assert.equal(asked.length, 2, 'one question, no second surprise');
    assert.deepEqual(['R1', 'R2', 'R3', 'R4'].filter((v) => exists(`grp/${v}`)), []);
    assert.deepEqual(told, [{ severity: 'info', message: 'Destroyed 4 builds.', actions: [] }], 'said once all went');
    assert.equal(ext.windowLocks.has(staticDir, 'grp/R4'), false, 'this window let go of its lock');
    assert.notEqual((await exitOf(holder)).code, 0, 'the holder learnt that its lock was broken');
    const audit = fs.readFileSync(path.join(staticDir, '.devserver-staging', 'audit.log'), 'utf8');
    for (const v of ['R1', 'R2', 'R3', 'R4']) assert.match(audit, new RegExp(`"action":"destroy","tag":"grp/${v}"`));
  });

  it('Destroy refuses a build that someone locked while the question was open, asks about it afresh, and says so', async () => {
    makeBuild(staticDir, 'late/R1');
    makeBuild(staticDir, 'late/R2');
    const nodes = [await nodeOf('late/R1'), await nodeOf('late/R2')];
    let holder: ChildProcess | undefined;
    answers = [
      async () => {
        holder = await holdWithCli(staticDir, 'late/R2');
        return true;
      },
    ];
    await vscode.commands.executeCommand('devserverStaging.destroy', nodes[0], nodes);
    assert.equal(asked.length, 2);
    assert.equal(asked[0].button, 'Destroy 2 Builds');
    // Asked afresh, naming the lock there now, even with confirmations off; declined.
    assert.match(asked[1].message, new RegExp(`^Its lock changed while you were asked\\. Destroy late/R2\\? It is held by \\S+@\\S+ \\(pid ${holder!.pid}\\)\\.$`));
    assert.equal(asked[1].button, 'Destroy, Breaking the Lock');
    assert.equal(asked[1].skippable, false);
    assert.equal(exists('late/R1'), false);
    assert.ok(exists('late/R2') && locked('late/R2'), 'the build locked meanwhile is left alone');
    assert.equal(told.length, 1);
    assert.match(told[0].message, new RegExp(`^Destroyed 1 of 2 builds\\. Not destroyed: late/R2 \\(it was locked after you were asked: held by \\S+@\\S+ \\(pid ${holder!.pid}\\)`));
    holder!.kill('SIGTERM');
    await exitOf(holder!);
  });

  it('Destroy Builds… on a folder gives the count of builds below and lists the locked ones; the folder stays', async () => {
    for (const v of ['R1', 'R2', 'R3']) makeBuild(staticDir, `board/${v}`);
    makeBuild(staticDir, 'board/sub/R4');
    makeStaleLock(staticDir, 'board/R3');
    const holder = await holdWithCli(staticDir, 'board/R2');
    await nodeOf('board/sub/R4');
    await shownAs('board/R2', 'build.held');
    const board = await nodeOf('board');
    answers = [false];
    await vscode.commands.executeCommand('devserverStaging.destroyFolderBuilds', board);
    assert.equal(asked.length, 1);
    assert.match(asked[0].message, /^Destroy the 4 builds in board\? 1 is held by \S+@\S+, 1 is stale\.$/);
    assert.equal(asked[0].button, 'Destroy 4 Builds, Breaking 1 Lock');
    assert.match(asked[0].detail, new RegExp(`board/R2 — held by \\S+@\\S+ \\(pid ${holder.pid}\\)`));
    assert.match(asked[0].detail, /board\/R3 — stale: last held by chrome-bot@buildbot-7/);
    assert.match(asked[0].detail, /board\/sub\/R4 — free/);
    assert.match(asked[0].detail, /The folder .*board itself stays\./);
    assert.ok(exists('board/R1') && exists('board/sub/R4'));

    answers = [true];
    await vscode.commands.executeCommand('devserverStaging.destroyFolderBuilds', board);
    assert.deepEqual(['board/R1', 'board/R2', 'board/R3', 'board/sub/R4'].filter(exists), []);
    assert.ok(exists('board') && exists('board/sub'), 'the folders stay');
    await exitOf(holder);
  });

  it('Destroy… on a folder row (the Delete key) turns into Destroy Builds…, always asked', async () => {
    makeBuild(staticDir, 'keyed/R1');
    const folder = await nodeOf('keyed');
    await nodeOf('keyed/R1');
    await ext.view.reveal(folder, { select: true, focus: true });
    await waitFor(() => (ext.view.selection.includes(folder) ? true : undefined), 2_000, 'the folder selected');
    answers = [false];
    await vscode.commands.executeCommand('devserverStaging.destroy', { selection: true });
    await waitFor(() => (asked.length > 0 ? true : undefined), 2_000, 'the question');
    assert.match(asked[0].message, /^Destroy the 1 build in keyed\?$/);
    assert.equal(asked[0].skippable, false, 'the Delete key acts on the selection: always asked');
    assert.ok(exists('keyed/R1'));
  });

  it('Clean Up asks what to keep, shows what goes with sizes and why, and what stays because locked; then removes just that', async () => {
    oldBuild('old/R1', 40);
    oldBuild('old/R2', 35);
    oldBuild('old/R3', 31);
    oldBuild('old/R4', 1);
    makeStaleLock(staticDir, 'old/R3');
    const holder = await holdWithCli(staticDir, 'old/R2');
    const folder = await nodeOf('old');

    inputAnswers = ['', '30d'];
    answers = [false];
    await vscode.commands.executeCommand('devserverStaging.cleanUp', folder);
    assert.equal(inputs.length, 2);
    assert.equal(await inputs[0].validateInput?.('ten'), 'A whole number of builds, such as 10, or nothing.');
    assert.match(messageOf(await inputs[1].validateInput?.('30')), /An age with its unit, such as 30d/);
    assert.match(messageOf(await inputs[1].validateInput?.('')), /Give an age/, 'neither limit: nothing would be chosen');
    assert.equal(asked.length, 1);
    const [q] = asked;
    assert.equal(q.message, 'Remove 1 build from old and free 1.0 MiB?');
    assert.equal(q.button, 'Remove 1 Build');
    assert.equal(q.skippable, false);
    const lines = q.detail.split('\n');
    assert.ok(lines.includes('old/R1 — 1.0 MiB — last used 40 d ago'), q.detail);
    assert.ok(lines.includes('Kept, because they are locked:'), q.detail);
    assert.ok(lines.some((l) => new RegExp(`^old/R2 — held by \\S+@\\S+ \\(pid ${holder.pid}\\)$`).test(l)), q.detail);
    assert.ok(lines.includes('old/R3 — its lock is stale (last held by chrome-bot@buildbot-7 (pid 41812)): kept in case its holder comes back'), q.detail);
    assert.ok(!q.detail.includes('old/R4'), 'a recent build is not mentioned');
    assert.ok(exists('old/R1'), 'nothing removed when the preview is declined');

    inputAnswers = ['2', ''];
    answers = [true];
    await vscode.commands.executeCommand('devserverStaging.cleanUp', folder);
    // Keep 2 of 4: R1 and R2 are beyond; R2 is held.
    assert.equal(asked[1].message, 'Remove 1 build from old and free 1.0 MiB?');
    assert.match(asked[1].detail, /old\/R1 — 1\.0 MiB — not among the 2 most recently used/);
    assert.deepEqual(['R1', 'R2', 'R3', 'R4'].filter((v) => exists(`old/${v}`)), ['R2', 'R3', 'R4']);
    assert.ok(locked('old/R2'), 'the held build is untouched');
    assert.equal(told.length, 1);
    assert.equal(told[0].severity, 'info');
    assert.match(told[0].message, new RegExp(`^Removed 1 build from old \\(1\\.0 MiB\\)\\. Kept, because locked: old/R2 \\(held by \\S+@\\S+ \\(pid ${holder.pid}\\)\\)\\.$`));
    holder.kill('SIGTERM');
    await exitOf(holder);
  });

  it('Clean Up shows the new choice instead of removing a build that was not in the preview', async () => {
    oldBuild('moving/R1', 40);
    oldBuild('moving/R2', 20);
    const folder = await nodeOf('moving');
    answers = [
      async () => {
        // While the question is open, R2 ages past the limit.
        const t = new Date(Date.now() - 45 * 86_400_000);
        fs.utimesSync(path.join(staticDir, 'moving/R2/staged.timestamp'), t, t);
        return true;
      },
      false,
    ];
    await vscode.commands.executeCommand('devserverStaging.cleanUp', folder, undefined, { olderThanMs: 30 * 86_400_000 });
    assert.equal(asked.length, 2);
    assert.equal(asked[0].message, 'Remove 1 build from moving and free 1.0 MiB?');
    assert.equal(asked[1].message, 'The builds to remove changed while you were asked. Remove 2 builds from moving and free 2.0 MiB?');
    assert.ok(exists('moving/R1') && exists('moving/R2'), 'nothing removed on the second No');
  });

  it('Force Release All Stale… offers the stale builds, all ticked, and releases just those', async () => {
    for (const v of ['R1', 'R2', 'R3', 'R4']) makeBuild(staticDir, `st/${v}`);
    makeStaleLock(staticDir, 'st/R1');
    makeStaleLock(staticDir, 'st/R2');
    const holder = await holdWithCli(staticDir, 'st/R3');
    await nodeOf('st/R4');
    await shownAs('st/R3', 'build.held');
    await shownAs('st/R2', 'build.stale');
    answers = [true];
    await vscode.commands.executeCommand('devserverStaging.forceReleaseAllStale', await nodeOf('st'));
    assert.equal(picks.length, 1);
    assert.deepEqual(picks[0].items.map((i) => [i.label, i.description, i.picked]), [
      ['st/R1', 'stale · chrome-bot@buildbot-7', true],
      ['st/R2', 'stale · chrome-bot@buildbot-7', true],
    ]);
    assert.match(picks[0].items[0].detail ?? '', /last heartbeat 60 min ago · on another machine/);
    assert.equal(asked.length, 1);
    assert.equal(asked[0].message, 'Force-release 2 stale locks?');
    assert.equal(asked[0].button, 'Force Release 2');
    assert.deepEqual([locked('st/R1'), locked('st/R2'), locked('st/R3')], [false, false, true]);
    assert.deepEqual(told.map((t) => t.message), ['Force-released 2 stale locks.']);
    const audit = fs.readFileSync(path.join(staticDir, '.devserver-staging', 'audit.log'), 'utf8');
    assert.match(audit, /"action":"force-release","tag":"st\/R1"/);
    holder.kill('SIGTERM');
    await exitOf(holder);
  });

  it('Add Static Directory writes where the list in force lives (the workspace), and Remove takes it out there', async () => {
    const a = tempDir('dss-dlg-a-');
    const b = tempDir('dss-dlg-b-');
    try {
      await settings().update('staticDirs', [a], vscode.ConfigurationTarget.Workspace);
      await vscode.commands.executeCommand('devserverStaging.chooseStaticDir', undefined, undefined, { dir: b });
      let info = settings().inspect<string[]>('staticDirs')!;
      assert.deepEqual(info.workspaceValue, [a, b], 'added to the workspace settings, which are in force');
      assert.deepEqual(info.globalValue, [staticDir], 'the user settings untouched');
      await waitFor(async () => ((await ext.tree.getChildren()).some((r) => r.kind === 'staticDir' && r.dir === b) ? true : undefined), 5_000, 'the new root in the view');

      await vscode.commands.executeCommand('devserverStaging.removeStaticDir', undefined, undefined, { dir: a });
      info = settings().inspect<string[]>('staticDirs')!;
      assert.deepEqual(info.workspaceValue, [b]);
      assert.ok(fs.existsSync(a), 'nothing on disk removed');
      assert.deepEqual(told, [{ severity: 'info', message: `${a} is no longer shown in the view. Nothing on disk was changed.`, actions: [] }]);

      // The user settings' list is not in force here: removing from it would change nothing.
      await vscode.commands.executeCommand('devserverStaging.removeStaticDir', undefined, undefined, { dir: staticDir });
      assert.equal(told.length, 2);
      assert.match(told[1].message, /does not come from the workspace settings/);
      assert.deepEqual(settings().inspect<string[]>('staticDirs')!.globalValue, [staticDir]);
    } finally {
      await settings().update('staticDirs', undefined, vscode.ConfigurationTarget.Workspace);
      cleanup(a);
      cleanup(b);
    }
    await waitFor(() => nodeOf('eve/R1').catch(() => undefined), 5_000, 'the fixture back in the view');
  });

  it('opens a text artifact in a read-only preview editor; a binary one, a FIFO or a link out never as text', async () => {
    const outside = tempDir('dss-dlg-out-');
    const dir = makeBuild(staticDir, 'art/R1');
    fs.writeFileSync(path.join(dir, 'notes.txt'), 'release notes\n');
    fs.writeFileSync(path.join(dir, 'image.bin'), Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 0, 0, 1]));
    fs.writeFileSync(path.join(outside, 'secret.txt'), 'secret');
    fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(dir, 'escape.txt'));
    const fifo = spawnSync('mkfifo', [path.join(dir, 'pipe')]).status === 0;
    const byName = async (name: string): Promise<Node> =>
      waitFor(async () => (await childrenOf('art/R1')).find((n) => n.kind === 'artifact' && n.artifact.name === name), 5_000, `${name} in the view`);
    const tabs = (): string[] => vscode.window.tabGroups.all.flatMap((g) => g.tabs).map((t) => (t.input instanceof vscode.TabInputText ? t.input.uri.fsPath : ''));
    try {
      const notes = await byName('notes.txt');
      assert.equal((ext.tree.getTreeItem(notes)).command?.command, 'devserverStaging.openArtifact');
      await vscode.commands.executeCommand('devserverStaging.openArtifact', notes);
      const tab = await waitFor(() => vscode.window.tabGroups.all.flatMap((g) => g.tabs).find((t) => t.input instanceof vscode.TabInputText && t.input.uri.fsPath === path.join(dir, 'notes.txt')), 5_000, 'the text in an editor');
      assert.equal(tab.isPreview, true, 'a preview editor');
      // Read-only: neither an edit, nor a save, nor a write reaches the build (with auto save on).
      const uri = (tab.input as vscode.TabInputText).uri;
      assert.equal(uri.scheme, 'devserver-staging-artifact');
      await vscode.workspace.getConfiguration('files').update('autoSave', 'afterDelay', vscode.ConfigurationTarget.Global);
      try {
        const doc = await vscode.workspace.openTextDocument(uri);
        assert.equal(doc.getText(), 'release notes\n');
        // A keystroke in the focused editor, as a user types.
        await vscode.window.showTextDocument(doc, { preview: true, preserveFocus: false });
        await vscode.commands.executeCommand('type', { text: 'typed ' });
        assert.equal(doc.getText(), 'release notes\n', 'the keystroke refused');
        assert.equal(doc.isDirty, false);
        await assert.rejects(Promise.resolve(vscode.workspace.fs.writeFile(uri, Buffer.from('overwritten'))), 'a write refused');
        await new Promise((r) => setTimeout(r, 1_500));
        assert.equal(fs.readFileSync(path.join(dir, 'notes.txt'), 'utf8'), 'release notes\n', 'the build as staged');
      } finally {
        await vscode.workspace.getConfiguration('files').update('autoSave', undefined, vscode.ConfigurationTarget.Global);
      }

      press = (_m, actions) => (actions.includes('Copy Path') ? 'Copy Path' : undefined);
      await vscode.commands.executeCommand('devserverStaging.openArtifact', await byName('image.bin'));
      assert.equal(told.length, 1);
      assert.equal(told[0].message, 'image.bin is a binary file (8 B); it is not opened as text.');
      assert.ok(told[0].actions.includes('Copy Path'));
      assert.equal(told[0].actions.includes('Open with Hex Editor'), vscode.extensions.getExtension('ms-vscode.hexeditor') !== undefined);
      await waitFor(async () => ((await vscode.env.clipboard.readText()) === path.join(dir, 'image.bin') ? true : undefined), 2_000, 'the path on the clipboard');
      assert.ok(!tabs().includes(path.join(dir, 'image.bin')), 'never opened as text');

      await vscode.commands.executeCommand('devserverStaging.openArtifact', await byName('escape.txt'));
      assert.equal(told[1].message, 'escape.txt is not opened: it is a link that leads outside the static directory.');
      assert.ok(!tabs().includes(path.join(outside, 'secret.txt')));

      if (fifo) {
        const started = Date.now();
        await vscode.commands.executeCommand('devserverStaging.openArtifact', await byName('pipe'));
        assert.ok(Date.now() - started < 2_000, 'no wait for a writer');
        assert.equal(told[2].message, 'pipe is not opened: it is not a regular file (a FIFO, socket or device).');
      }
    } finally {
      await vscode.commands.executeCommand('workbench.action.closeAllEditors');
      cleanup(outside);
    }
  });

  it('Copy Tag puts the tags of the chosen builds and folders on the clipboard', async () => {
    await vscode.commands.executeCommand('devserverStaging.copyTag', await nodeOf('eve/R1'));
    assert.equal(await vscode.env.clipboard.readText(), 'eve/R1');
    const nodes = [await nodeOf('eve'), await nodeOf('eve/R1')];
    await vscode.commands.executeCommand('devserverStaging.copyTag', nodes[0], nodes);
    assert.equal(await vscode.env.clipboard.readText(), 'eve\neve/R1');
  });

  it('an error says who holds the build, since when and what for, offers Lock When Free, and its Force Release… button does it', async () => {
    makeBuild(staticDir, 'err/R1');
    const holder = await holdWithCli(staticDir, 'err/R1');
    const source = path.join(tempDir('dss-dlg-src-'), 'extra.bin');
    fs.writeFileSync(source, 'extra');
    press = (_m, actions) => (actions.includes('Force Release…') ? 'Force Release…' : undefined);
    answers = [true];
    await vscode.commands.executeCommand('devserverStaging.addArtifacts', undefined, undefined, { staticDir, tag: 'err/R1', sources: [source] });
    await waitFor(() => (told.length > 0 ? true : undefined), 5_000, 'the error');
    assert.equal(told[0].severity, 'error');
    assert.match(told[0].message, new RegExp(`^err/R1 is held by \\S+@\\S+ \\(pid ${holder.pid}\\) since .+ \\(\\d+ s ago\\)\\. Its purpose: “integration test”\\.$`));
    assert.deepEqual(told[0].actions, ['Lock When Free', 'Force Release…', 'Show Log']);
    await waitFor(() => (locked('err/R1') ? undefined : true), 5_000, 'the button to force-release the lock');
    assert.match(asked[0].message, /^Force-release the lock on err\/R1\?$/, 'after its own question naming the holder');
    await exitOf(holder);
    cleanup(path.dirname(source));
  });

  it('a damaged manifest is named with what is wrong and how to repair it in the editor', async () => {
    const dir = makeBuild(staticDir, 'err/R2');
    fs.writeFileSync(path.join(dir, '.devserver-staging.manifest.json'), '{"version": 1, "artifacts": {');
    const source = path.join(tempDir('dss-dlg-src-'), 'extra.bin');
    fs.writeFileSync(source, 'extra');
    await vscode.commands.executeCommand('devserverStaging.addArtifacts', undefined, undefined, { staticDir, tag: 'err/R2', sources: [source] });
    await waitFor(() => (told.length > 0 ? true : undefined), 5_000, 'the error');
    assert.match(told[0].message, /^The manifest of err\/R2 is damaged: it is not JSON .*\. Nothing was changed\. To repair it, move the manifest aside and stage the build’s sources again with Add Artifacts…, or destroy the build and stage it anew\.$/);
    assert.deepEqual(told[0].actions, ['Open Manifest', 'Destroy…', 'Show Log']);
    // Its Destroy… button asks about that build, and destroys it.
    press = (_m, actions) => (actions.includes('Destroy…') ? 'Destroy…' : undefined);
    told = [];
    answers = [true];
    await vscode.commands.executeCommand('devserverStaging.addArtifacts', undefined, undefined, { staticDir, tag: 'err/R2', sources: [source] });
    await waitFor(() => (exists('err/R2') ? undefined : true), 5_000, 'the button to destroy the build');
    assert.deepEqual(asked.map((a) => a.message), ['Destroy err/R2?']);
    await waitFor(() => (told.some((t) => t.message === 'Destroyed err/R2.') ? true : undefined), 5_000, 'the word that it was destroyed');
    cleanup(path.dirname(source));
  });

  it('Stage Build… from a build’s row suggests a tag in its folder; a staged build is revealed, and the time excludes a question', async () => {
    inputAnswers = [undefined];
    await vscode.commands.executeCommand('devserverStaging.stageBuild', await nodeOf('eve/R1'));
    assert.equal(inputs[0].value, 'eve/', 'the build’s folder, not a tag inside the build');
    await vscode.commands.executeCommand('devserverStaging.stageBuild', await nodeOf('eve'));
    assert.equal(inputs[1].value, 'eve/');
    // Nothing selected, the cursor after the folder: typing the version keeps the folder.
    assert.deepEqual(inputs[1].valueSelection, [4, 4]);

    await vscode.commands.executeCommand('devserverStaging.areas.focus');
    const source = tempDir('dss-dlg-src-');
    fs.writeFileSync(path.join(source, 'notes.txt'), 'different');
    await vscode.commands.executeCommand('devserverStaging.stageBuild', undefined, undefined, { staticDir, tag: 'eve/R9', sources: [source] });
    assert.match(told[0].message, /^eve\/R9: 1 added, 0 unchanged, 0 replaced \(9 B\) in \d+\.\d s\.$/);
    assert.deepEqual(told[0].actions, ['Reveal']);
    await waitFor(() => (ext.view.selection.some((n) => n.kind === 'build' && n.tag === 'eve/R9') ? true : undefined), 5_000, 'the new build revealed and selected').catch((e: unknown) => {
      throw new Error(`${String(e)}; the view is ${ext.view.visible ? 'visible' : 'hidden'}, its selection: ${ext.view.selection.map((n) => (n.kind === 'build' ? n.tag : n.kind)).join(', ')}`);
    });

    // A conflict asks; the 1.5 s the question is open are not counted.
    answers = [() => new Promise((resolve) => setTimeout(() => resolve(true), 1_500))];
    fs.writeFileSync(path.join(source, 'notes.txt'), 'other content');
    await vscode.commands.executeCommand('devserverStaging.addArtifacts', undefined, undefined, { staticDir, tag: 'eve/R9', sources: [path.join(source, 'notes.txt')] });
    assert.equal(asked[0]?.button, 'Overwrite', JSON.stringify(told));
    assert.equal(fs.readFileSync(path.join(staticDir, 'eve/R9/notes.txt'), 'utf8'), 'other content');
    const secs = Number(/ in (\d+\.\d) s\.$/.exec(told[1].message)?.[1]);
    assert.ok(secs < 1.5, `took ${secs} s by the message, the question's time left out`);
    cleanup(source);
  });

  it('shows a download’s total and percentage where the server sent its size', () => {
    const p = { artifact: 'image.tar.xz', artifactBytes: 0, bytes: 0, artifacts: 0, downloadBytes: 3 << 20, downloadTotal: 8 << 20 };
    assert.equal(progressMessage(p, p.downloadTotal, p.downloadBytes), 'image.tar.xz (3.0 MiB / 8.0 MiB, 37%)');
    assert.equal(progressMessage({ ...p, artifact: '' }, undefined, 5 << 20), '… (5.0 MiB)');
  });
});
