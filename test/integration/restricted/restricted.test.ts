/**
 * Restricted Mode, in a real VS Code whose workspace is not trusted: the repository's settings
 * (../run.mjs writes them) point the extension at `/`, the home directory, the folder above and one
 * of its own, turn confirmations off and set timings that are no number or too large. None of it
 * is used; every command that writes is refused; and nothing on disk changes, in a static directory
 * the user chose (judged, hovered, shown) or in the workspace, though probes are asked for
 * (DEVSERVER_STAGING_CLOCK_PROBE=1) where a trusted window would write them.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import { EXTENSION_ID } from '../../../src/extension/commands/trust';
import type { DevserverStagingApi } from '../../../src/extension/extension';
import type { EditorUi } from '../../../src/extension/prompts';
import { ROOT, cleanup, fingerprint, tempDir, waitFor } from '../../helpers';
import { makeBuild, makeStaleLock } from '../fixture';
import { pageText } from '../walk';

/** The extension's parts (not through ../activate.test, whose suite would run here too). */
async function api(): Promise<DevserverStagingApi> {
  const ext = vscode.extensions.getExtension<DevserverStagingApi>(EXTENSION_ID);
  assert.ok(ext, `${EXTENSION_ID} is installed`);
  return ext.activate();
}

const WORKSPACE = process.env.DEVSERVER_STAGING_IT_WORKSPACE ?? '';

interface Manifest {
  contributes: { commands: { command: string; enablement?: string }[] };
  capabilities: { untrustedWorkspaces: { restrictedConfigurations?: string[] } };
}
const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as Manifest;

/** Every file below `dir` with its bytes, and every directory: what must not change. */
const everything = (dir: string): string => `${fingerprint(dir)}\n${fs.readdirSync(dir, { recursive: true }).map(String).sort().join('\n')}`;

describe('Restricted Mode', function () {
  this.timeout(120_000);
  let ext: DevserverStagingApi;
  let canary: string;
  let initially: { canary: string; workspace: string };
  const said: string[] = [];
  let saved: EditorUi;

  before(async () => {
    ext = await api();
    canary = tempDir('dss-restricted-');
    makeBuild(canary, 'eve/R1');
    makeBuild(canary, 'eve/R2');
    makeStaleLock(canary, 'eve/R2');
    fs.mkdirSync(path.join(WORKSPACE, 'static', 'eve', 'R3'), { recursive: true });
    fs.writeFileSync(path.join(WORKSPACE, 'static', 'eve', 'R3', 'staged.timestamp'), '');
    initially = { canary: everything(canary), workspace: everything(WORKSPACE) };
    saved = { ...ext.prompts.editor };
    ext.prompts.editor.message = async (_severity, message) => (said.push(message), undefined);
  });

  after(async () => {
    Object.assign(ext.prompts.editor, saved);
    await vscode.workspace.getConfiguration('devserverStaging').update('staticDirs', undefined, vscode.ConfigurationTarget.Global);
    cleanup(canary);
  });

  it('runs in a workspace that is not trusted, whose settings name directories, no confirmations and timings', () => {
    assert.equal(vscode.workspace.isTrusted, false);
    const c = vscode.workspace.getConfiguration('devserverStaging');
    // The attack is there: the workspace's settings say so, and VS Code keeps them from the extension.
    const file = JSON.parse(fs.readFileSync(path.join(WORKSPACE, '.vscode', 'settings.json'), 'utf8')) as Record<string, unknown>;
    assert.deepEqual(file['devserverStaging.staticDirs'], ['/', '~', '..', '${workspaceFolder}/static']);
    assert.equal(file['devserverStaging.confirmDestructiveActions'], false);
    assert.equal(c.inspect('staticDirs')?.workspaceValue, undefined);
    // None of it is used.
    assert.deepEqual(c.get('staticDirs'), []);
    assert.equal(c.get('confirmDestructiveActions'), true);
    assert.equal(c.get('staleSeconds'), 10);
    for (const k of ['staticDirs', 'confirmDestructiveActions', 'staleSeconds', 'refreshSeconds', 'pollSeconds']) {
      assert.ok(manifest.capabilities.untrustedWorkspaces.restrictedConfigurations?.includes(`devserverStaging.${k}`), k);
    }
    for (const dir of ['/', path.dirname(WORKSPACE), path.join(WORKSPACE, 'static')]) assert.equal(ext.states.record(dir, ''), undefined, dir);
    assert.equal(ext.states.polling.intervalMs, 0);
  });

  it('shows a static directory of the user\'s own, refuses every command that writes, and changes nothing on disk', async () => {
    await vscode.workspace.getConfiguration('devserverStaging').update('staticDirs', [canary], vscode.ConfigurationTarget.Global);
    await waitFor(() => (ext.states.entry(canary, 'eve/R2')?.state === 'stale' ? true : undefined), 10_000, 'the stale lock shown');
    const roots = await ext.tree.getChildren();
    assert.deepEqual(roots.map((r) => (r.kind === 'staticDir' ? r.dir : r.kind)), [canary]);
    // Looked at as closely as the view does: a hover judges the lock afresh, the details page reads it all.
    const eve = (await ext.tree.getChildren(roots[0])).find((n) => n.kind === 'folder')!;
    for (const node of await ext.tree.getChildren(eve)) await ext.tree.resolveTreeItem(ext.tree.getTreeItem(node), node);
    const r2 = (await ext.tree.getChildren(eve)).find((n) => n.kind === 'build' && n.tag === 'eve/R2');
    const uri = await vscode.commands.executeCommand<vscode.Uri>('devserverStaging.showBuildDetails', r2);
    assert.match(await pageText(uri), /stale/);
    // Show Usage only reads: allowed here, and it writes nothing either.
    const usage = await vscode.commands.executeCommand<vscode.WebviewPanel | undefined>('devserverStaging.showUsage', r2);
    assert.match(usage?.webview.html ?? '', /<h1>Usage of eve\/R2<\/h1>/);
    usage?.dispose();
    await vscode.commands.executeCommand('devserverStaging.refresh');
    await waitFor(() => (ext.states.entry(canary, 'eve/R2')?.state === 'stale' ? true : undefined), 10_000, 'listed again');
    // Every command that writes, as a script or a keybinding would call it, bypassing its menus.
    const gated = manifest.contributes.commands.filter((c) => c.enablement === 'isWorkspaceTrusted').map((c) => c.command);
    for (const id of ['devserverStaging.verifyBuild', 'devserverStaging.destroy', 'devserverStaging.chooseStaticDir', 'devserverStaging.releaseWindowLock']) assert.ok(gated.includes(id), id);
    said.length = 0;
    const args = { staticDir: canary, tag: 'eve/R2', path: canary, dir: canary, keep: 0, sources: [path.join(canary, 'eve/R1')] };
    for (const id of gated) await vscode.commands.executeCommand(id, undefined, undefined, args);
    await waitFor(() => (said.length >= gated.length ? true : undefined), 10_000, 'every refusal said');
    assert.equal(said.filter((m) => /not trusted.*changes nothing on disk/.test(m)).length, gated.length, said.join('\n'));
    await ext.states.settled();
    assert.equal(everything(canary), initially.canary, 'the static directory as it was');
    assert.ok(!fs.existsSync(path.join(canary, '.devserver-staging')), 'no bookkeeping, no probe');
    assert.equal(everything(WORKSPACE), initially.workspace, 'the workspace as it was');
    assert.deepEqual(vscode.workspace.getConfiguration('devserverStaging').get('staticDirs'), [canary], 'the settings as the user left them');
  });
});
