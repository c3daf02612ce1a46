/**
 * The last row of a folder with more builds than a page: "Show 1,000 more". Thousands of rows in
 * one folder cannot be read, only searched (Filter…, Go to Build…), and each costs the workbench
 * time; the newest come first, so the first page is the one people want.
 */
import * as vscode from 'vscode';
import { formatCount } from '../core';
import type { FolderNode } from './folderNode';
import type { StaticDirNode } from './staticDirNode';

export class MoreNode {
  readonly kind = 'more';

  constructor(
    readonly parent: StaticDirNode | FolderNode,
    /** Builds not shown yet. */
    readonly hidden: number,
    readonly page: number,
  ) {}

  get id(): string {
    return `${this.parent.id}\0more`;
  }

  get staticDir(): string {
    return this.parent.staticDir;
  }

  toTreeItem(): vscode.TreeItem {
    const next = Math.min(this.page, this.hidden);
    const item = new vscode.TreeItem(vscode.l10n.t('Show {0} more…', formatCount(next)), vscode.TreeItemCollapsibleState.None);
    item.id = this.id;
    item.description = vscode.l10n.t('{0} not shown; Filter… or Go to Build… finds any', formatCount(this.hidden));
    item.iconPath = new vscode.ThemeIcon('ellipsis');
    item.contextValue = 'more';
    item.command = { command: 'devserverStaging.showMore', title: vscode.l10n.t('Show More'), arguments: [this] };
    return item;
  }
}
