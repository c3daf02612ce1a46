/** A folder: a directory that groups builds (a board). It has no lock of its own. */
import * as vscode from 'vscode';
import { AreaRow } from './areaRow';
import type { StaticDirNode } from './staticDirNode';
import { formatCount, type Counts } from '../../core';
import { rowText } from '../shown';

/** A codicon, not the file icon theme's folder: the default theme (Seti) draws no folders. */
const FOLDER_ICON = new vscode.ThemeIcon('folder');

export class FolderNode extends AreaRow<StaticDirNode | FolderNode> {
  readonly kind = 'folder';

  /**
   * "3,000 builds · 47 held · 100 stale". With a filter, "12 of 3,000 builds · 2 held": the states
   * are counted among the builds that pass it, as the rows below show them.
   */
  static description(c: Counts, matching?: Counts): string {
    const shown = matching ?? c;
    const parts = [
      matching !== undefined
        ? c.builds === 1
          ? vscode.l10n.t('{0} of 1 build', formatCount(matching.builds))
          : vscode.l10n.t('{0} of {1} builds', formatCount(matching.builds), formatCount(c.builds))
        : c.builds === 1
          ? vscode.l10n.t('1 build')
          : vscode.l10n.t('{0} builds', formatCount(c.builds)),
    ];
    if (shown.mine > 0) parts.push(vscode.l10n.t('{0} yours', formatCount(shown.mine)));
    if (shown.held > 0) parts.push(vscode.l10n.t('{0} held', formatCount(shown.held)));
    if (shown.stale > 0) parts.push(vscode.l10n.t('{0} stale', formatCount(shown.stale)));
    if (shown.legacy > 0) parts.push(vscode.l10n.t('{0} legacy', formatCount(shown.legacy)));
    return parts.join(' · ');
  }

  /**
   * `counting`: the folder is being listed for the first time, so its counts are not known yet.
   * `expanded`: the user left it expanded (kept across reloads).
   * `sameAs`: it is a directory listed already as that folder (a link to it), listed when expanded.
   */
  toTreeItem(c: Counts, matching?: Counts, counting = false, expanded = false, sameAs?: string): vscode.TreeItem {
    const name = rowText(this.name);
    const item = new vscode.TreeItem(name, expanded ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.Collapsed);
    item.id = this.id;
    item.description =
      counting && sameAs !== undefined
        ? vscode.l10n.t('the same directory as {0}', sameAs === '' ? vscode.l10n.t('the static directory') : rowText(sameAs))
        : counting
          ? vscode.l10n.t('counting builds…')
          : FolderNode.description(c, matching);
    item.iconPath = FOLDER_ICON;
    item.contextValue = 'folder';
    item.tooltip = vscode.l10n.t('Folder {0}: {1}', rowText(this.tag), item.description);
    // Read as it is shown, not as the tooltip (which VS Code would read otherwise).
    item.accessibilityInformation = { label: `${name} ${item.description}` };
    return item;
  }
}
