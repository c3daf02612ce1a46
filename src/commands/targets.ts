/**
 * What a command acts on: the clicked build and any others selected with it, or, from the
 * command palette, a quick pick of the builds the view knows.
 */
import * as vscode from 'vscode';
import type { ListEntry, LockState } from '../core';
import type { LockStates } from '../model/lockStates';
import { dirOf, type Node } from '../tree/provider';

export async function targets(states: LockStates, node: Node | undefined, nodes: readonly Node[] | undefined, title: string, only?: readonly LockState[], many = true): Promise<ListEntry[]> {
  const picked = (nodes !== undefined && nodes.length > 0 ? nodes : node !== undefined ? [node] : []).flatMap((n) => (n.kind === 'build' ? [states.entry(n.staticDir, n.tag)] : []));
  if (picked.length > 0) return picked.filter((e): e is ListEntry => e !== undefined);
  const candidates = states
    .sortedBuilds()
    .map((r) => r.lock)
    .filter((e): e is ListEntry => e !== undefined && (only === undefined || only.includes(e.state)));
  if (candidates.length === 0) {
    void vscode.window.showInformationMessage(vscode.l10n.t('No build to choose from: add a static directory with staged builds first.'));
    return [];
  }
  const items = candidates.map((e) => ({ label: e.tag, description: e.state === 'free' ? '' : `${e.state}${e.holder ? ` · ${e.holder.user}@${e.holder.hostname}` : ''}`, detail: e.staticDir, entry: e }));
  if (many) {
    const chosen = await vscode.window.showQuickPick(items, { title, canPickMany: true, matchOnDescription: true });
    return chosen?.map((c) => c.entry) ?? [];
  }
  const chosen = await vscode.window.showQuickPick(items, { title, matchOnDescription: true });
  return chosen === undefined ? [] : [chosen.entry];
}

/** One directory: the clicked item's, or one picked from the palette. */
export async function oneDir(states: LockStates, node: Node | undefined, title: string): Promise<string | undefined> {
  if (node !== undefined) return dirOf(node);
  const [e] = await targets(states, undefined, undefined, title, undefined, false);
  return e?.dir;
}
