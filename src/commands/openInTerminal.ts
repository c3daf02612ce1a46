import * as vscode from 'vscode';
import { type Node } from '../tree/provider';
import { registerCommand, type Uses } from './command';
import { oneDir } from './targets';

/** Opens an integrated terminal whose working directory is the build. */
export function openInTerminalCommand(ctx: Uses<'states'>): vscode.Disposable {
  const { states } = ctx;
  return registerCommand('devserverStaging.openInTerminal', ctx, async (node?: Node) => {
    const dir = await oneDir(states, node, vscode.l10n.t('Open a terminal in which build?'));
    if (dir !== undefined) vscode.window.createTerminal({ cwd: dir, name: dir.split('/').slice(-2).join('/') }).show();
  });
}
