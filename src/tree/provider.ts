/**
 * The "Staging Areas" view: static directories at the root, their subdirectories below with
 * their lock states. Nodes are kept by identity so that a change refreshes just its own item,
 * and `getParent` can walk up for `reveal`.
 */
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import { MANIFEST_FILE, isProtocolName, parseManifest } from '../core';
import { errorMessage } from '../errors';
import { keyOf, type LockStates, type StateChange } from '../state';
import type { WindowLocks } from '../windowLocks';
import { AreaNode } from './areaNode';
import { ArtifactNode } from './artifactNode';
import { StaticDirNode } from './staticDirNode';

export type Node = StaticDirNode | AreaNode | ArtifactNode;

export class StagingTreeProvider implements vscode.TreeDataProvider<Node>, vscode.Disposable {
  private readonly _onDidChangeTreeData = new vscode.EventEmitter<Node | Node[] | undefined>();
  readonly onDidChangeTreeData = this._onDidChangeTreeData.event;
  private readonly roots = new Map<string, StaticDirNode>();
  private readonly areas = new Map<string, AreaNode>();
  private readonly subscriptions: vscode.Disposable[];

  constructor(
    private staticDirs: readonly string[],
    private readonly states: LockStates,
    private readonly windowLocks: WindowLocks,
  ) {
    this.subscriptions = [
      states.onDidChange((changes) => this.onStatesChanged(changes)),
      // Which locks are this window's changes the menus of those items only.
      windowLocks.onDidChange(() => {
        const mine = [...this.areas.values()].filter((n) => n.entry.state === 'held');
        if (mine.length > 0) this._onDidChangeTreeData.fire(mine);
      }),
    ];
  }

  /** New settings: new roots, and everything listed again. */
  setStaticDirs(dirs: readonly string[]): void {
    this.staticDirs = dirs;
    this.refresh();
  }

  /** Lists everything again from disk. */
  refresh(): void {
    this.roots.clear();
    this.areas.clear();
    this._onDidChangeTreeData.fire(undefined);
  }

  getTreeItem(node: Node): vscode.TreeItem {
    if (node instanceof AreaNode) return node.toTreeItem(this.windowLocks.has(node.entry.staticDir, node.entry.tag));
    return node.toTreeItem();
  }

  async resolveTreeItem(item: vscode.TreeItem, node: Node): Promise<vscode.TreeItem> {
    if (node instanceof AreaNode) {
      // Judged again on hover: the listing's heartbeat age is as old as the listing.
      const [info, contents] = await Promise.all([this.states.judge(node.entry.staticDir, node.entry.tag).catch(() => undefined), contentsOf(node.entry.dir)]);
      item.tooltip = node.tooltip(contents, info ?? node.entry);
    }
    return item;
  }

  getParent(node: Node): Node | undefined {
    return node.parent;
  }

  async getChildren(node?: Node): Promise<Node[]> {
    if (node === undefined) return Promise.all(this.staticDirs.map((d) => this.rootNode(d)));
    if (node instanceof ArtifactNode) return [];
    if (node instanceof StaticDirNode && node.problem !== undefined) return [];
    const staticDir = node instanceof StaticDirNode ? node.dir : node.entry.staticDir;
    const tag = node instanceof StaticDirNode ? '' : node.entry.tag;
    let entries;
    try {
      entries = await this.states.children(staticDir, tag);
    } catch (err) {
      if (node instanceof StaticDirNode) {
        // Shown on the root item itself, never as a notification from here.
        node.problem = errorMessage(err);
        this._onDidChangeTreeData.fire(node);
      }
      return [];
    }
    const areas = entries.map((e) => {
      const key = keyOf(staticDir, e.tag);
      let child = this.areas.get(key);
      if (child === undefined) {
        child = new AreaNode(node, e);
        this.areas.set(key, child);
      } else {
        child.entry = e;
      }
      return child;
    });
    if (node instanceof StaticDirNode) return areas;
    return [...areas, ...this.states.artifacts(staticDir, tag).map((a) => new ArtifactNode(node, a))];
  }

  /** The node of an area the tree has shown, if any. */
  find(staticDir: string, tag: string): Node | undefined {
    return tag === '' ? this.roots.get(staticDir) : this.areas.get(keyOf(staticDir, tag));
  }

  private async rootNode(dir: string): Promise<StaticDirNode> {
    let node = this.roots.get(dir);
    if (node === undefined) {
      node = new StaticDirNode(dir);
      this.roots.set(dir, node);
    }
    node.problem = await fs.promises.stat(dir).then(
      (st) => (st.isDirectory() ? undefined : vscode.l10n.t('not a directory')),
      (err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? vscode.l10n.t('does not exist') : vscode.l10n.t('cannot be read ({0})', err.code ?? String(err))),
    );
    return node;
  }

  private onStatesChanged(changes: StateChange[]): void {
    const nodes: Node[] = [];
    for (const c of changes) {
      const node = this.find(c.staticDir, c.tag);
      if (node === undefined) continue;
      if (node instanceof AreaNode) {
        const fresh = this.states.entry(c.staticDir, c.tag);
        if (fresh !== undefined) node.entry = fresh;
      }
      if (c.what === 'children') this.forgetBelow(c.staticDir, c.tag);
      nodes.push(node);
    }
    if (nodes.length > 0) this._onDidChangeTreeData.fire(nodes);
  }

  /** Drops nodes of areas that no longer exist below `tag`; the rest keep their identity. */
  private forgetBelow(staticDir: string, tag: string): void {
    const prefix = keyOf(staticDir, tag === '' ? '' : `${tag}/`);
    for (const [k, n] of this.areas) {
      if (k.startsWith(prefix) && this.states.entry(staticDir, n.entry.tag) === undefined) this.areas.delete(k);
    }
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
    this._onDidChangeTreeData.dispose();
  }
}

export const dirOf = (n: Node): string => (n instanceof StaticDirNode ? n.dir : n instanceof ArtifactNode ? n.artifact.path : path.join(n.entry.staticDir, n.entry.tag));

/**
 * Size and artifact count for a tooltip: from the manifest where staging wrote one (a single
 * read), else from the files at the top of the build.
 */
async function contentsOf(dir: string): Promise<{ artifacts: number; bytes: number } | undefined> {
  try {
    // A damaged manifest (ECORRUPT) counts as none: the files at the top are counted instead.
    const file = path.join(dir, MANIFEST_FILE);
    const manifest = parseManifest(await fs.promises.readFile(file, 'utf8'), file);
    const all = Object.values(manifest.artifacts);
    return { artifacts: all.length, bytes: all.reduce((n, a) => n + a.size, 0) };
  } catch {
    const entries = await fs.promises.readdir(dir, { withFileTypes: true }).catch(() => undefined);
    if (entries === undefined) return undefined;
    const files = entries.filter((e) => e.isFile() && !isProtocolName(e.name));
    const sizes = await Promise.all(files.map((e) => fs.promises.stat(path.join(dir, e.name)).then((s) => s.size, () => 0)));
    return { artifacts: files.length, bytes: sizes.reduce((a, b) => a + b, 0) };
  }
}
