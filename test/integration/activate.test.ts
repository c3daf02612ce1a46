import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import { needsTrust } from '../../src/extension/commands/command';
import { EXTENSION_ID } from '../../src/extension/commands/trust';
import type { DevserverStagingApi } from '../../src/extension/extension';
import { ROOT } from '../helpers';

export { EXTENSION_ID };

export async function api(): Promise<DevserverStagingApi> {
  const ext = vscode.extensions.getExtension<DevserverStagingApi>(EXTENSION_ID);
  assert.ok(ext, `${EXTENSION_ID} is installed`);
  return ext.activate();
}

interface Manifest {
  activationEvents: string[];
  capabilities: { untrustedWorkspaces: { supported: string | boolean } };
  contributes: {
    commands: { command: string; title: string; enablement?: string }[];
    menus: Record<string, { command?: string; submenu?: string }[]>;
    views: Record<string, { id: string }[]>;
    viewsContainers: { activitybar: { id: string; icon: string }[] };
    viewsWelcome: { view: string; contents: string }[];
    configuration: { properties: Record<string, unknown> };
  };
}

const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as Manifest;
const nls = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.nls.json'), 'utf8')) as Record<string, string>;

describe('activation and manifest', () => {
  it('activates and hands back its parts', async () => {
    const parts = await api();
    assert.ok(vscode.extensions.getExtension(EXTENSION_ID)!.isActive);
    assert.ok(parts.tree && parts.states && parts.view);
  });

  it('registers every contributed command', async () => {
    await api();
    const registered = new Set(await vscode.commands.getCommands(true));
    const missing = manifest.contributes.commands.map((c) => c.command).filter((c) => !registered.has(c));
    assert.deepEqual(missing, []);
  });

  it('names only contributed commands in menus and welcome links', () => {
    const contributed = new Set(manifest.contributes.commands.map((c) => c.command));
    for (const [menu, entries] of Object.entries(manifest.contributes.menus)) {
      for (const e of entries) if (e.command !== undefined) assert.ok(contributed.has(e.command), `${menu} names ${e.command}`);
    }
    for (const w of manifest.contributes.viewsWelcome) {
      const text = nls[w.contents.replace(/%/g, '')] ?? w.contents;
      for (const m of text.matchAll(/\(command:(devserverStaging\.[\w.]+)/g)) assert.ok(contributed.has(m[1]), `welcome links ${m[1]}`);
    }
  });

  it('contributes its views into a container of its own, with an icon that exists', () => {
    const container = manifest.contributes.viewsContainers.activitybar.find((c) => c.id === 'devserverStaging');
    assert.ok(container);
    assert.ok(fs.existsSync(path.join(ROOT, container.icon)), container.icon);
    assert.deepEqual(manifest.contributes.views['devserverStaging'].map((v) => v.id), ['devserverStaging.areas']);
  });

  it('limits an untrusted workspace to viewing: every command that changes the disk needs trust', () => {
    for (const c of manifest.contributes.commands) {
      assert.equal(c.enablement === 'isWorkspaceTrusted', needsTrust(c.command), `${c.command} enablement ${c.enablement}`);
    }
    assert.equal(manifest.capabilities.untrustedWorkspaces.supported, 'limited');
  });

  it('has a translation for every %key% in package.json', () => {
    const keys = [...JSON.stringify(manifest).matchAll(/"%([\w.]+)%"/g)].map((m) => m[1]);
    assert.ok(keys.length > 5);
    assert.deepEqual(keys.filter((k) => !(k in nls)), []);
  });

  it('declares every setting it reads, defaulting to no static directory', () => {
    const props = manifest.contributes.configuration.properties;
    for (const k of ['devserverStaging.staticDirs', 'devserverStaging.staleSeconds', 'devserverStaging.refreshSeconds', 'devserverStaging.confirmDestructiveActions', 'devserverStaging.pollSeconds']) assert.ok(k in props, k);
    assert.deepEqual(vscode.workspace.getConfiguration('devserverStaging').get('staticDirs'), []);
  });
});
