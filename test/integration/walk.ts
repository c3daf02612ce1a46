/** Walking the extension's tree as VS Code does, from a static directory's root down to a tag. */
import { strict as assert } from 'assert';
import * as vscode from 'vscode';
import type { DevserverStagingApi } from '../../src/extension/extension';
import type { RowNode as AreaNode } from '../../src/extension/tree/provider';
import type { Node } from '../../src/extension/tree/provider';
import type { StaticDirNode } from '../../src/extension/tree/staticDirNode';

/** The root of `staticDir` for '', else the node of `tag`; fails when it is not in the tree. */
export async function nodeOf(ext: DevserverStagingApi, staticDir: string, tag: ''): Promise<StaticDirNode>;
export async function nodeOf(ext: DevserverStagingApi, staticDir: string, tag: string): Promise<AreaNode>;
export async function nodeOf(ext: DevserverStagingApi, staticDir: string, tag: string): Promise<Node> {
  const roots = await ext.tree.getChildren();
  let node: Node | undefined = roots.find((r) => r.kind === 'staticDir' && r.dir === staticDir);
  assert.ok(node, `a root for ${staticDir}`);
  const parts = tag === '' ? [] : tag.split('/');
  for (let i = 0; i < parts.length; i++) {
    const prefix = parts.slice(0, i + 1).join('/');
    const children: Node[] = await ext.tree.getChildren(node);
    node = children.find((c) => (c.kind === 'build' || c.kind === 'folder') && c.tag === prefix);
    assert.ok(node, `${prefix} is in the tree`);
  }
  return node;
}

/** A row's label as text, whether VS Code was given a string or a label with highlights. */
export function labelOf(item: vscode.TreeItem): string {
  return typeof item.label === 'string' ? item.label : (item.label?.label ?? '');
}

/**
 * A build's details page as the preview shows it once read whole: the page first says it is being
 * read, and changes when the manifest and history are in.
 */
export async function pageText(uri: vscode.Uri, timeoutMs = 20_000): Promise<string> {
  const doc = await vscode.workspace.openTextDocument(uri);
  const deadline = Date.now() + timeoutMs;
  while (doc.getText().includes('Reading the lock, the manifest and the history…')) {
    if (Date.now() > deadline) throw new Error(`the details page ${uri.toString()} was still being read after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return doc.getText();
}
