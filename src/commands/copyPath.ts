import * as vscode from 'vscode';
import { dirOf, type Node } from '../tree/provider';
import { registerCommand, type Uses } from './command';
import { oneDir } from './targets';

/** Copies the paths of the chosen builds to the clipboard, one per line. */
export function copyPathCommand(ctx: Uses<'states'>): vscode.Disposable {
  const { states } = ctx;
  return registerCommand('devserverStaging.copyPath', ctx, async (node?: Node, nodes?: Node[]) => {
    const dirs = nodes !== undefined && nodes.length > 1 ? nodes.map(dirOf) : [await oneDir(states, node, vscode.l10n.t('Copy the path of which build?'))];
    const text = dirs.filter((d): d is string => d !== undefined).join('\n');
    if (text !== '') await vscode.env.clipboard.writeText(text);
  });
}
