/**
 * The last row of a folder with more builds than a page, or of a build or artifact folder with
 * more files: "Show 1,000 more". Thousands of rows in one folder cannot be read, only searched
 * (Filter…, Go to Build…), and each costs the workbench time and memory; the newest builds come
 * first, so the first page is the one people want.
 */
import * as vscode from 'vscode';
import { formatCount } from '../../core';
import type { ArtifactNode } from './artifactNode';
import type { BuildNode } from './buildNode';
import type { FolderNode } from './folderNode';
import type { StaticDirNode } from './staticDirNode';

export class MoreNode {
  readonly kind = 'more';

  constructor(
    readonly parent: StaticDirNode | FolderNode | BuildNode | ArtifactNode,
    /** Rows not shown yet. */
    readonly hidden: number,
    readonly page: number,
  ) {}

  get id(): string {
    return `${this.parent.id}\0more`;
  }

  get staticDir(): string {
    return this.parent.kind === 'artifact' ? this.parent.build.staticDir : this.parent.staticDir;
  }

  toTreeItem(): vscode.TreeItem {
    const next = Math.min(this.page, this.hidden);
    const item = new vscode.TreeItem(vscode.l10n.t('Show {0} more…', formatCount(next)), vscode.TreeItemCollapsibleState.None);
    item.id = this.id;
    const builds = this.parent.kind === 'staticDir' || this.parent.kind === 'folder';
    item.description = builds ? vscode.l10n.t('{0} not shown; Filter… or Go to Build… finds any', formatCount(this.hidden)) : vscode.l10n.t('{0} not shown', formatCount(this.hidden));
    item.iconPath = new vscode.ThemeIcon('ellipsis');
    item.contextValue = 'more';
    item.command = { command: 'devserverStaging.showMore', title: vscode.l10n.t('Show More'), arguments: [this] };
    return item;
  }
}
