/**
 * A hostile co-user against a colleague's VS Code: holder records and names written to act in the
 * editor (links to `command:` URIs, icons, newlines, escape and bidi characters), read through
 * every surface the extension has, as VS Code is given them (`prompts.editor`), and read the way
 * this very VS Code reads them: its own notification parser, taken from the running workbench, and
 * its own Markdown engine. And what a dialog names is what the command acts on; "yours" is only
 * what this window's leases hold; a build of thousands of files is shown a page at a time.
 */
import { strict as assert } from 'assert';
import type { ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import { readPrintable } from '../../src/core';
import type { DevserverStagingApi } from '../../src/extension/extension';
import { createLog } from '../../src/extension/log';
import type { EditorUi } from '../../src/extension/prompts';
import type { Node } from '../../src/extension/tree/provider';
import { cleanup, killAll, readToken, report, tempDir, waitFor } from '../helpers';
import { linksIn, notificationParser, workbenchOf, type LinkedNode } from '../vscodeText';
import { api } from './activate.test';
import { holdWithCli, makeBuild } from './fixture';
import { labelOf, nodeOf as walk, pageText } from './walk';

const COMMAND = 'command:workbench.action.terminal.sendSequence?%5B%7B%22text%22%3A%22id%5Cn%22%7D%5D';
/** Holder fields as a co-user writes them: a link among the buttons, a forged line, reordered text, escapes, icons. */
const USER = `[Show Log](${COMMAND})`;
const HOST = 'vm\nFORGED: eve/R9 — free\u202e\u2066';
const PURPOSE = `$(zap) [Run](${COMMAND}) \u001b[2J`;
const ARTIFACTS = [`[Open](${COMMAND})`, 'a\nFORGED.bin', 'www.attacker.com', 'alice@attacker.com', '$(zap) icon'];
const RAW = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/u;

let ext: DevserverStagingApi;
let staticDir: string;
let parse: (message: string) => LinkedNode[];

/** What VS Code was given, surface by surface. */
interface Shown {
  surface: 'notification' | 'modal' | 'pick' | 'progress' | 'input';
  text: string;
  detail?: string;
}
let shown: Shown[] = [];
let editorSaved: EditorUi;
/** How a modal is answered: the button, or nothing (cancel). */
let answer: (message: string, detail: string, button: string) => Promise<string | undefined> = async () => undefined;

/** A lock of "another host" with hostile fields, fresh (held) or an hour old (stale), made as `makeStaleLock` makes one. */
function hostileLock(tag: string, fresh: boolean, clientId = 'elsewhere:1'): string {
  const lock = path.join(staticDir, tag, 'devserver.lock');
  fs.mkdirSync(lock);
  const at = new Date(Date.now() - (fresh ? 0 : 3600_000));
  const owner = { pid: 41812, hostname: HOST, user: USER, clientId, purpose: PURPOSE, acquiredAt: at.toISOString(), token: `hostile${tag.replace(/\W/g, '')}`, staleMs: 10_000, refreshMs: 2_500 };
  fs.writeFileSync(path.join(lock, 'owner.json'), JSON.stringify(owner));
  fs.utimesSync(lock, at, at);
  return lock;
}

/** Its heartbeat, as its holder would refresh it. */
const beat = (tag: string): void => fs.utimesSync(path.join(staticDir, tag, 'devserver.lock'), new Date(), new Date());

const nodeOf = (tag: string): Promise<Node> => walk(ext, staticDir, tag);

async function artifactNode(tag: string, name: string): Promise<Node> {
  const node = (await ext.tree.getChildren(await nodeOf(tag))).find((c) => c.kind === 'artifact' && c.artifact.name === name);
  assert.ok(node, `${name} in ${tag}`);
  return node;
}

const render = async (text: string): Promise<string> => String(await vscode.commands.executeCommand('markdown.api.render', text));

function assertInert(s: Shown): void {
  const where = `${s.surface}: ${JSON.stringify(s.text)}${s.detail !== undefined ? ` / ${JSON.stringify(s.detail)}` : ''}`;
  if (s.surface === 'notification' || s.surface === 'progress') {
    assert.deepEqual(linksIn(parse(s.text)), [], where);
    assert.ok(!/[\r\n]/.test(s.text), where);
  }
  for (const t of [s.text, s.detail ?? '']) {
    assert.ok(!RAW.test(t.replace(/\n/g, '')), where);
    // Lines are the dialog's own: none forged by a co-user's newline.
    assert.ok(!t.split('\n').some((line) => line.startsWith('FORGED')), where);
  }
  if (s.surface === 'pick' || s.surface === 'input') assert.ok(!/(^|[^\\])\$\(zap\)/.test(s.text), where);
}

describe('what co-users write, through the editor', function () {
  this.timeout(120_000);

  before(async () => {
    ext = await api();
    // The parser of the workbench this very test runs in.
    const workbench = workbenchOf(vscode.env.appRoot);
    assert.ok(fs.existsSync(workbench), workbench);
    parse = notificationParser(workbench);
    staticDir = tempDir('dss-editor-attack-');
    for (const t of ['eve/R1', 'eve/R2', 'eve/R3', `eve/[Run](${COMMAND})`]) makeBuild(staticDir, t);
    for (const name of ARTIFACTS) fs.writeFileSync(path.join(staticDir, 'eve/R2', name), Buffer.from([0, 1, 2]));
    hostileLock('eve/R1', true);
    hostileLock('eve/R3', false);
    await vscode.workspace.getConfiguration('devserverStaging').update('staticDirs', [staticDir], vscode.ConfigurationTarget.Global);
    await waitFor(() => (ext.states.entry(staticDir, 'eve/R3')?.state === 'stale' ? true : undefined), 10_000, 'the fixture in the model');
    editorSaved = { ...ext.prompts.editor };
    Object.assign(ext.prompts.editor, {
      // The question before a destructive action (a quick pick with Cancel first).
      confirm: async (question, detail, button) => {
        shown.push({ surface: 'modal', text: question, detail });
        return (await answer(question, detail, button)) === button;
      },
      message: async (_severity, message, options, ...items) => {
        shown.push(options.modal === true ? { surface: 'modal', text: message, detail: options.detail ?? '' } : { surface: 'notification', text: message });
        return options.modal === true ? answer(message, options.detail ?? '', items[0]) : undefined;
      },
      quickPick: async (items) => {
        for (const i of items) for (const t of [i.label, i.description, i.detail]) if (t !== undefined) shown.push({ surface: 'pick', text: t });
        return undefined;
      },
      inputBox: async (options) => {
        for (const t of [options.title, options.prompt]) if (t !== undefined) shown.push({ surface: 'input', text: t });
        return undefined;
      },
      withProgress: (options, task) => {
        shown.push({ surface: 'progress', text: options.title ?? '' });
        const token = new vscode.CancellationTokenSource().token;
        return task({ report: (step) => void (step.message !== undefined && shown.push({ surface: 'progress', text: step.message })) }, token);
      },
    } satisfies Partial<EditorUi>);
  });

  beforeEach(() => {
    shown = [];
    answer = async () => undefined;
  });

  after(async () => {
    Object.assign(ext.prompts.editor, editorSaved);
    for (const l of ext.windowLocks.all) await ext.windowLocks.release(l.staticDir, l.tag);
    await vscode.workspace.getConfiguration('devserverStaging').update('staticDirs', undefined, vscode.ConfigurationTarget.Global);
    await killAll();
    cleanup(staticDir);
  });

  it('notifications, progress, dialogs, quick picks and input boxes: no link (by this VS Code\'s own reading), icon or forged line', async () => {
    // The attack is real: these fields make links where VS Code reads them raw.
    assert.ok(linksIn(parse(`held by ${USER}@${HOST}`)).some((l) => l.href.startsWith('command:')));
    beat('eve/R1');
    await vscode.commands.executeCommand('devserverStaging.lockForWindow', await nodeOf('eve/R1'));
    beat('eve/R1');
    await vscode.commands.executeCommand('devserverStaging.forceRelease', await nodeOf('eve/R1'));
    beat('eve/R1');
    await vscode.commands.executeCommand('devserverStaging.destroy', await nodeOf('eve/R1'));
    await vscode.commands.executeCommand('devserverStaging.forceReleaseAllStale');
    await vscode.commands.executeCommand('devserverStaging.goToBuild');
    await vscode.commands.executeCommand('devserverStaging.cleanUp', undefined, undefined, { path: staticDir, keep: 0 });
    await vscode.commands.executeCommand('devserverStaging.openArtifact', await artifactNode('eve/R2', ARTIFACTS[0]));
    fs.rmSync(path.join(staticDir, 'eve/R2', ARTIFACTS[0]));
    fs.writeFileSync(path.join(staticDir, 'eve/R2', '.devserver-staging.manifest.json'), manifestOf(['[Open](' + COMMAND + ')']));
    await vscode.commands.executeCommand('devserverStaging.verifyBuild', await nodeOf('eve/R2'));
    fs.writeFileSync(path.join(staticDir, 'eve/R2', ARTIFACTS[0]), Buffer.from([0, 1, 2]));
    fs.rmSync(path.join(staticDir, 'eve/R2', '.devserver-staging.manifest.json'));
    // Error messages are shown once the command is over.
    await waitFor(() => (shown.some((s) => s.surface === 'notification' && /is held by/.test(s.text)) ? true : undefined), 5_000, 'the ELOCKED message');
    for (const s of shown) assertInert(s);
    // Each surface was reached with the hostile words in it.
    const words = (surface: Shown['surface']): string => shown.filter((s) => s.surface === surface).map((s) => `${s.text}\n${s.detail ?? ''}`).join('\n');
    assert.match(words('notification'), /\[Show Log\] \(command:/, 'the ELOCKED message names the holder');
    assert.match(words('notification'), /\[Open\] \(command:/, 'the binary artifact and the damaged build are named');
    assert.match(words('modal'), /\[Show Log\] \(command:.*@vm\\nFORGED/, 'the dialogs name the holder, on one line');
    assert.match(words('pick'), /\\\$\(zap\)|@vm\\nFORGED/, 'the pickers name the holder');
    assert.match(words('progress'), /Verifying|Looking at/);
    report(`${shown.length} texts given to VS Code, ${shown.filter((s) => s.surface === 'modal').length} of them dialogs`);
  });

  it('tree rows, tooltips, the status bar and the details page: text only', async () => {
    beat('eve/R1');
    const held = ext.tree.getTreeItem(await nodeOf('eve/R1'));
    assert.ok(!RAW.test(`${labelOf(held)}${String(held.description)}`), String(held.description));
    // (The artifact the first test removed and put back is listed again once its events settle.)
    const build = await nodeOf('eve/R2');
    const rows = await waitFor(async () => {
      const r = await ext.tree.getChildren(build);
      return r.length === ARTIFACTS.length + 1 ? r : undefined;
    }, 5_000, 'every artifact listed');
    const labels = rows.map((r) => ext.tree.getTreeItem(r)).map((i) => `${labelOf(i)} ${typeof i.tooltip === 'string' ? i.tooltip : ''}`);
    for (const l of labels) assert.ok(!RAW.test(l), JSON.stringify(l));
    assert.ok(labels.some((l) => l.startsWith('a\\nFORGED.bin')), labels.join(' | '));
    const node = await nodeOf('eve/R1');
    const item = await ext.tree.resolveTreeItem(ext.tree.getTreeItem(node), node);
    const statusBar = (ext.statusBar as unknown as { item: vscode.StatusBarItem }).item;
    // (A manifest names no artifact with a newline: the staging refuses such a name.)
    fs.writeFileSync(path.join(staticDir, 'eve/R2', '.devserver-staging.manifest.json'), manifestOf(ARTIFACTS.filter((a) => !a.includes('\n'))));
    const uri = await vscode.commands.executeCommand<vscode.Uri>('devserverStaging.showBuildDetails', await nodeOf('eve/R2'));
    // The page shows at once, saying it is being read, and fills in: judged once it is whole.
    const page = await pageText(uri);
    for (const md of [(item.tooltip as vscode.MarkdownString).value, (statusBar.tooltip as vscode.MarkdownString).value, page]) {
      const html = await render(md);
      assert.ok(!/href=|<img|<script/.test(html), html);
    }
    // The attack is real: the details page names the artifacts a raw renderer would link.
    assert.match(await render('www.attacker.com alice@attacker.com'), /href=/);
    assert.match(page, /www\\\.attacker\\\.com/);
  });

  it('the log gets one line per message, and the clipboard a path that reads back whole', async () => {
    const lines: string[] = [];
    const channel = { info: (m: string) => lines.push(m), warn: (m: string) => lines.push(m), error: (m: string) => lines.push(m), trace: () => undefined, debug: () => undefined, show: () => undefined, dispose: () => undefined };
    const log = createLog(channel as unknown as vscode.LogOutputChannel);
    log.info(`Force-released eve/R1, held by ${USER}@${HOST}.`);
    log.warn(`Did not open ${ARTIFACTS[1]}`);
    assert.equal(lines.length, 2);
    for (const l of lines) assert.ok(!RAW.test(l), JSON.stringify(l));
    const node = await artifactNode('eve/R2', ARTIFACTS[1]);
    await vscode.commands.executeCommand('devserverStaging.copyPath', node);
    const copied = await vscode.env.clipboard.readText();
    assert.ok(!/[\r\n]/.test(copied), JSON.stringify(copied));
    assert.equal(readPrintable(copied), path.join(staticDir, 'eve/R2', ARTIFACTS[1]));
  });

  it('"yours" only from this window\'s leases: a co-user\'s lock naming this window\'s client id is someone else\'s', async () => {
    const lock = hostileLock('eve/R2', true, ext.windowLocks.clientId);
    try {
      await waitFor(() => (ext.states.entry(staticDir, 'eve/R2')?.state === 'held' ? true : undefined), 10_000, 'the spoofed lock seen');
      beat('eve/R2');
      assert.equal(ext.states.entry(staticDir, 'eve/R2')?.holder?.clientId, ext.windowLocks.clientId, 'the record names this window');
      const item = ext.tree.getTreeItem(await nodeOf('eve/R2'));
      // (Damaged since the first test's verification found a missing artifact.)
      assert.match(item.contextValue ?? '', /^build\.held(\.damaged)?$/);
      assert.doesNotMatch(String(item.description), /held by you/);
      assert.equal(ext.mine.has(ext.states.record(staticDir, 'eve/R2')!), false);
      assert.doesNotMatch(ext.statusBar.text ?? '', /yours/);
    } finally {
      fs.rmSync(lock, { recursive: true, force: true });
    }
  });

  /** Answers the first dialog yes, once Bob has taken `tag`'s lock over while it was open; declines any after it. */
  function bobTakesOverWhileAsked(tag: string): { asked: string[]; bob: () => ChildProcess | undefined } {
    let bob: ChildProcess | undefined;
    const asked: string[] = [];
    answer = async (message, detail, button) => {
      asked.push(`${message}\n${detail}`);
      if (asked.length > 1) return undefined;
      bob = await holdWithCli(staticDir, tag);
      return button;
    };
    return { asked, bob: () => bob };
  }

  it('Force Release breaks only the lock its dialog named: Bob, who took Alice\'s stale lock over meanwhile, is asked about afresh', async () => {
    const tag = 'eve/R3';
    const { asked, bob } = bobTakesOverWhileAsked(tag);
    await vscode.commands.executeCommand('devserverStaging.forceRelease', await nodeOf(tag));
    assert.ok(bob() !== undefined && bob()!.exitCode === null);
    const token = readToken(path.join(staticDir, tag, 'devserver.lock'));
    assert.ok(token !== undefined && !token.startsWith('hostile'), 'Bob holds the lock');
    assert.equal(asked.length, 2, asked.join('\n---\n'));
    assert.match(asked[0], /\[Show Log\]/, 'the first dialog named Alice');
    assert.match(asked[1], /changed/);
    assert.doesNotMatch(asked[1], /\[Show Log\]/, 'the second names the lock there now');
    assert.equal(readToken(path.join(staticDir, tag, 'devserver.lock')), token, 'Bob\'s lock is in place');
    bob()!.kill();
    await waitFor(() => (fs.existsSync(path.join(staticDir, tag, 'devserver.lock')) ? undefined : true), 10_000, 'Bob gone');
  });

  it('Destroy destroys only with the lock its dialog named: a build Bob locked meanwhile stays, and is asked about afresh', async () => {
    const tag = 'eve/R3';
    hostileLock(tag, false);
    await waitFor(() => (ext.states.entry(staticDir, tag)?.state === 'stale' ? true : undefined), 10_000, 'Alice\'s stale lock seen');
    const { asked, bob } = bobTakesOverWhileAsked(tag);
    await vscode.commands.executeCommand('devserverStaging.destroy', await nodeOf(tag));
    assert.equal(asked.length, 2, asked.join('\n---\n'));
    assert.match(asked[1], /changed/);
    assert.ok(fs.existsSync(path.join(staticDir, tag, 'autotest.tar')), 'the build is there');
    assert.ok(bob() !== undefined && bob()!.exitCode === null, 'Bob still holds it');
    bob()!.kill();
  });

  it('a build of thousands of files is shown a page at a time, as a folder\'s builds are', async () => {
    const tag = 'big/R1';
    const dir = makeBuild(staticDir, tag);
    fs.mkdirSync(path.join(dir, 'sub'));
    for (let i = 0; i < 2_500; i++) fs.writeFileSync(path.join(dir, `f${i}.bin`), '');
    for (let i = 0; i < 1_200; i++) fs.writeFileSync(path.join(dir, 'sub', `g${i}.bin`), '');
    const build = await waitFor(() => nodeOf(tag).catch(() => undefined), 10_000, 'the big build');
    let rows = await ext.tree.getChildren(build);
    assert.equal(rows.length, 1_001);
    const more = rows.at(-1)!;
    assert.equal(more.kind, 'more');
    await vscode.commands.executeCommand('devserverStaging.showMore', more);
    rows = await ext.tree.getChildren(build);
    assert.equal(rows.length, 2_001);
    await vscode.commands.executeCommand('devserverStaging.showMore', rows.at(-1));
    rows = await ext.tree.getChildren(build);
    // Every file once, the folder first, no "more" row left.
    assert.equal(rows.length, 2_502);
    assert.ok(rows.every((r) => r.kind === 'artifact'));
    const sub = rows.find((r) => r.kind === 'artifact' && r.artifact.name === 'sub')!;
    const inside = await ext.tree.getChildren(sub);
    assert.equal(inside.length, 1_001);
    assert.equal(inside.at(-1)?.kind, 'more');
  });
});

/** A manifest that records one artifact per name (sizes and hashes of nothing that is there). */
function manifestOf(names: readonly string[]): string {
  const artifacts: Record<string, unknown> = {};
  for (const name of names) artifacts[name] = { name, type: 'file', size: 3, sha256: '0'.repeat(64), source: '/src', stagedAt: new Date().toISOString() };
  return JSON.stringify({ version: 1, artifacts });
}
