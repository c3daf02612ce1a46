/** A folder: a directory that groups builds (a board). It has no lock of its own. */
import * as vscode from 'vscode';
import { LOCK_NAME, type ListEntry } from '../core';
import type { AreaRecord, Counts } from '../model/records';
import type { StaticDirNode } from './staticDirNode';

const number = new Intl.NumberFormat();

export class FolderNode {
  readonly kind = 'folder';

  constructor(
    readonly parent: StaticDirNode | FolderNode,
    readonly staticDir: string,
    readonly tag: string,
    /** The model's record, which the model keeps current in place. */
    public record: AreaRecord,
  ) {}

  /** The last judgement of its lock. */
  get entry(): ListEntry {
    return this.record.lock ?? { name: this.tag.slice(this.tag.lastIndexOf('/') + 1), kind: 'folder', staticDir: this.staticDir, tag: this.tag, dir: this.dir, lockPath: `${this.dir}/${LOCK_NAME}`, exists: true, state: 'free' };
  }

  get id(): string {
    return `${this.staticDir}\0${this.tag}`;
  }

  get dir(): string {
    return `${this.staticDir}/${this.tag}`;
  }

  /** "3,000 builds · 47 held · 100 stale"; with a filter, how many of them it lets through. */
  static description(c: Counts, matching?: number): string {
    const parts = [matching !== undefined ? vscode.l10n.t('{0} of {1} builds', number.format(matching), number.format(c.builds)) : c.builds === 1 ? vscode.l10n.t('1 build') : vscode.l10n.t('{0} builds', number.format(c.builds))];
    if (c.mine > 0) parts.push(vscode.l10n.t('{0} yours', number.format(c.mine)));
    if (c.held > 0) parts.push(vscode.l10n.t('{0} held', number.format(c.held)));
    if (c.stale > 0) parts.push(vscode.l10n.t('{0} stale', number.format(c.stale)));
    if (c.legacy > 0) parts.push(vscode.l10n.t('{0} legacy', number.format(c.legacy)));
    return parts.join(' · ');
  }

  toTreeItem(c: Counts, matching?: number): vscode.TreeItem {
    const name = this.tag.slice(this.tag.lastIndexOf('/') + 1);
    const item = new vscode.TreeItem(name, vscode.TreeItemCollapsibleState.Collapsed);
    item.id = this.id;
    item.description = FolderNode.description(c, matching);
    item.iconPath = vscode.ThemeIcon.Folder;
    item.resourceUri = vscode.Uri.file(this.dir);
    item.contextValue = 'folder';
    item.tooltip = vscode.l10n.t('Folder {0}: {1}', this.tag, item.description);
    // Read as it is shown, not as the tooltip (which VS Code would read otherwise).
    item.accessibilityInformation = { label: `${name} ${item.description}` };
    return item;
  }
}
