import * as vscode from 'vscode';
import type { Node } from '../tree/provider';
import { clipboardText } from '../shown';
import { registerCommand, type Uses } from './command';
import { targets } from './targets';

/** Copies the tags of the chosen builds or folders (`board/version`) to the clipboard, one per line, as the command line takes them. */
export function copyTagCommand(ctx: Uses<'states'>): vscode.Disposable {
  return registerCommand('devserverStaging.copyTag', ctx, async (node?: Node, nodes?: Node[]) => {
    const chosen = await targets(ctx, { node, nodes, title: vscode.l10n.t('Copy the tag of which build?'), single: true });
    const text = chosen.map((e) => clipboardText(e.tag)).join('\n');
    if (text !== '') await vscode.env.clipboard.writeText(text);
  });
}
