/** A configured static directory: a root of the tree. */
import * as os from 'os';
import * as vscode from 'vscode';
import { rowText } from '../shown';

export class StaticDirNode {
  readonly kind = 'staticDir';
  readonly parent = undefined;
  /** Set when the directory cannot be listed: what is wrong with it. */
  problem: string | undefined;

  constructor(readonly dir: string) {}

  get staticDir(): string {
    return this.dir;
  }

  get id(): string {
    return `${this.dir}\0`;
  }

  toTreeItem(): vscode.TreeItem {
    const home = os.homedir();
    const label = this.dir === home || this.dir.startsWith(`${home}/`) ? `~${this.dir.slice(home.length)}` : this.dir;
    const item = new vscode.TreeItem(label, this.problem === undefined ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.None);
    item.id = this.id;
    item.resourceUri = vscode.Uri.file(this.dir);
    if (this.problem !== undefined) {
      item.iconPath = new vscode.ThemeIcon('warning', new vscode.ThemeColor('problemsWarningIcon.foreground'));
      item.description = rowText(this.problem);
      item.tooltip = vscode.l10n.t('{0}: {1}. Create it, or choose another static directory in the settings.', rowText(this.dir), rowText(this.problem));
      item.contextValue = 'staticDir.problem';
    } else {
      item.iconPath = new vscode.ThemeIcon('root-folder');
      item.tooltip = vscode.l10n.t('Static directory {0}', this.dir);
      item.contextValue = 'staticDir';
    }
    return item;
  }
}
