/**
 * Which folders the user left expanded, kept in the workspace's state: VS Code does not bring
 * back the expansion of an extension's tree after a reload, so the rows say it themselves.
 */
import type * as vscode from 'vscode';
import { keyOf } from '../../core';

const KEY = 'devserverStaging.expandedFolders';
/** Remembered at most: the newest expansions win. */
const MAX = 200;

export class Expansion {
  private readonly expanded: Set<string>;

  constructor(private readonly memento: vscode.Memento) {
    const kept = memento.get<unknown>(KEY);
    this.expanded = new Set(Array.isArray(kept) ? kept.filter((k): k is string => typeof k === 'string') : []);
  }

  isExpanded(staticDir: string, tag: string): boolean {
    return this.expanded.has(keyOf(staticDir, tag));
  }

  /** The user expanded (or collapsed) a folder's row. */
  set(staticDir: string, tag: string, expanded: boolean): void {
    const key = keyOf(staticDir, tag);
    if (this.expanded.has(key) === expanded) return;
    this.expanded.delete(key);
    if (expanded) this.expanded.add(key);
    const all = [...this.expanded];
    void this.memento.update(KEY, all.slice(Math.max(0, all.length - MAX)));
  }
}
