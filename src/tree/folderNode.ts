/** A folder: a directory that groups builds (a board). It has no lock of its own. */
import * as vscode from 'vscode';
import { AreaRow } from './areaRow';
import type { StaticDirNode } from './staticDirNode';
import { formatCount, type Counts } from '../core';
import { rowText } from '../shown';

export class FolderNode extends AreaRow<StaticDirNode | FolderNode> {
  readonly kind = 'folder';

  /** "3,000 builds · 47 held · 100 stale"; with a filter, how many of them it lets through. */
  static description(c: Counts, matching?: number): string {
    const parts = [matching !== undefined ? vscode.l10n.t('{0} of {1} builds', formatCount(matching), formatCount(c.builds)) : c.builds === 1 ? vscode.l10n.t('1 build') : vscode.l10n.t('{0} builds', formatCount(c.builds))];
    if (c.mine > 0) parts.push(vscode.l10n.t('{0} yours', formatCount(c.mine)));
    if (c.held > 0) parts.push(vscode.l10n.t('{0} held', formatCount(c.held)));
    if (c.stale > 0) parts.push(vscode.l10n.t('{0} stale', formatCount(c.stale)));
    if (c.legacy > 0) parts.push(vscode.l10n.t('{0} legacy', formatCount(c.legacy)));
    return parts.join(' · ');
  }

  /**
   * `counting`: the folder is being listed for the first time, so its counts are not known yet.
   * `sameAs`: it is a directory listed already as that folder (a link to it), listed when expanded.
   */
  toTreeItem(c: Counts, matching?: number, counting = false, sameAs?: string): vscode.TreeItem {
    const name = rowText(this.name);
    const item = new vscode.TreeItem(name, vscode.TreeItemCollapsibleState.Collapsed);
    item.id = this.id;
    item.description =
      counting && sameAs !== undefined
        ? vscode.l10n.t('the same directory as {0}', sameAs === '' ? vscode.l10n.t('the static directory') : rowText(sameAs))
        : counting
          ? vscode.l10n.t('counting builds…')
          : FolderNode.description(c, matching);
    item.iconPath = vscode.ThemeIcon.Folder;
    item.resourceUri = vscode.Uri.file(this.dir);
    item.contextValue = 'folder';
    item.tooltip = vscode.l10n.t('Folder {0}: {1}', rowText(this.tag), item.description);
    // Read as it is shown, not as the tooltip (which VS Code would read otherwise).
    item.accessibilityInformation = { label: `${name} ${item.description}` };
    return item;
  }
}
