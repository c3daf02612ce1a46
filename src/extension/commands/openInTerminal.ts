import * as vscode from 'vscode';
import { type Node } from '../tree/provider';
import { rowText } from '../shown';
import { registerCommand, type Uses } from './command';
import { oneDir } from './targets';

/** Opens an integrated terminal whose working directory is the build. */
export function openInTerminalCommand(ctx: Uses<'states'>): vscode.Disposable {
  return registerCommand('devserverStaging.openInTerminal', ctx, async (node?: Node) => {
    const dir = await oneDir(ctx, node, vscode.l10n.t('Open a terminal in which build?'));
    if (dir !== undefined) vscode.window.createTerminal({ cwd: dir, name: rowText(dir.split('/').slice(-2).join('/')) }).show();
  });
}
