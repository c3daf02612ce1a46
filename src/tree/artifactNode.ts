/** A file in a build: shown with its size; opening it opens the file. */
import * as vscode from 'vscode';
import { formatBytes } from '../core';
import type { Artifact } from '../state';
import type { AreaNode } from './areaNode';

export class ArtifactNode {
  readonly kind = 'artifact';

  constructor(
    readonly parent: AreaNode,
    readonly artifact: Artifact,
  ) {}

  get id(): string {
    return `${this.parent.id}\0${this.artifact.name}`;
  }

  toTreeItem(): vscode.TreeItem {
    const uri = vscode.Uri.file(this.artifact.path);
    const item = new vscode.TreeItem(uri, vscode.TreeItemCollapsibleState.None);
    item.id = this.id;
    item.label = this.artifact.name;
    item.description = formatBytes(this.artifact.size);
    item.iconPath = vscode.ThemeIcon.File;
    item.contextValue = 'artifact';
    item.tooltip = this.artifact.path;
    item.command = { command: 'devserverStaging.openArtifact', title: vscode.l10n.t('Open'), arguments: [this] };
    return item;
  }
}
