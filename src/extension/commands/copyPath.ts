import * as vscode from 'vscode';
import { dirOf, type Node } from '../tree/provider';
import { clipboardText } from '../shown';
import { registerCommand, type Uses } from './command';
import { oneDir } from './targets';

/** Copies the paths of the chosen builds to the clipboard, one per line (a path holding a newline quoted, its newline escaped). */
export function copyPathCommand(ctx: Uses<'states'>): vscode.Disposable {
  return registerCommand('devserverStaging.copyPath', ctx, async (node?: Node, nodes?: Node[]) => {
    const dirs = nodes !== undefined && nodes.length > 1 ? nodes.map(dirOf) : [await oneDir(ctx, node, vscode.l10n.t('Copy the path of which build?'))];
    const text = dirs.filter((d): d is string => d !== undefined).map(clipboardText).join('\n');
    if (text !== '') await vscode.env.clipboard.writeText(text);
  });
}
