/** A file or folder inside a build: browsable, never a build of its own. */
import * as vscode from 'vscode';
import { formatBytes, type Artifact } from '../../core';
import { rowText } from '../shown';
import type { BuildNode } from './buildNode';

export class ArtifactNode {
  readonly kind = 'artifact';

  constructor(
    readonly parent: BuildNode | ArtifactNode,
    /** The build it is in. */
    readonly build: BuildNode,
    readonly artifact: Artifact,
  ) {}

  get id(): string {
    return `${this.build.id}\0${this.artifact.rel}`;
  }

  get dir(): string {
    return this.artifact.path;
  }

  toTreeItem(): vscode.TreeItem {
    const a = this.artifact;
    const uri = vscode.Uri.file(a.path);
    const item = new vscode.TreeItem(uri, a.directory ? vscode.TreeItemCollapsibleState.Collapsed : vscode.TreeItemCollapsibleState.None);
    item.id = this.id;
    item.label = rowText(a.name);
    item.tooltip = rowText(a.path);
    if (a.directory) {
      // A codicon: the default file icon theme draws no folders.
      item.iconPath = new vscode.ThemeIcon('folder');
      item.contextValue = 'artifactFolder';
    } else {
      item.description = formatBytes(a.size);
      item.iconPath = vscode.ThemeIcon.File;
      item.contextValue = 'artifact';
      // Opening decides between a text preview and the other ways of looking at a binary.
      item.command = { command: 'devserverStaging.openArtifact', title: vscode.l10n.t('Open'), arguments: [this] };
    }
    return item;
  }
}
