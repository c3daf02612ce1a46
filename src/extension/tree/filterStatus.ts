/**
 * Keeps the view honest about its filter: a message at the top saying what is shown, the view's
 * description, and the context key that shows "Clear Filter" in the title bar.
 */
import * as vscode from 'vscode';
import { formatCount } from '../../core';
import { isActive, type BuildFilter } from '../model/view';
import type { StagingTreeProvider } from './provider';

export const FILTERED_CONTEXT = 'devserverStaging.filtered';

export class FilterStatus implements vscode.Disposable {
  private readonly subscription: vscode.Disposable;

  constructor(
    private readonly view: vscode.TreeView<unknown>,
    private readonly tree: StagingTreeProvider,
  ) {
    this.subscription = tree.onDidChangeFilter((f) => this.show(f));
    this.show(tree.currentFilter);
  }

  private show(f: BuildFilter): void {
    const active = isActive(f);
    void vscode.commands.executeCommand('setContext', FILTERED_CONTEXT, active);
    if (!active) {
      this.view.message = undefined;
      this.view.description = undefined;
      return;
    }
    const parts: string[] = [];
    if (f.text.trim() !== '') parts.push(vscode.l10n.t('tag contains “{0}”', f.text.trim()));
    if (f.states.length > 0) parts.push(f.states.map(stateWord).join(vscode.l10n.t(' or ')));
    const what = parts.join(', ');
    const shown = this.tree.matchingAll().length;
    this.view.message =
      shown === 1
        ? vscode.l10n.t('Filtered: {0} — 1 build shown. Change or clear the filter from the title bar.', what)
        : vscode.l10n.t('Filtered: {0} — {1} builds shown. Change or clear the filter from the title bar.', what, formatCount(shown));
    this.view.description = vscode.l10n.t('filtered: {0}', what);
  }

  dispose(): void {
    this.subscription.dispose();
  }
}

export function stateWord(s: BuildFilter['states'][number]): string {
  switch (s) {
    case 'held':
      return vscode.l10n.t('held by others');
    case 'stale':
      return vscode.l10n.t('stale');
    case 'legacy':
      return vscode.l10n.t('legacy lock');
    case 'mine':
      return vscode.l10n.t('yours');
    case 'free':
      return vscode.l10n.t('free');
    case 'damaged':
      return vscode.l10n.t('damaged');
  }
}
