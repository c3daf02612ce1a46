import * as vscode from 'vscode';
import { type Node } from '../tree/provider';
import { registerCommand, type Uses } from './command';
import { oneDir } from './targets';

/** Shows the build in the operating system's file manager. */
export function revealInExplorerCommand(ctx: Uses<'states'>): vscode.Disposable {
  return registerCommand('devserverStaging.revealInExplorer', ctx, async (node?: Node) => {
    const dir = await oneDir(ctx, node, vscode.l10n.t('Reveal which build?'));
    if (dir !== undefined) await vscode.commands.executeCommand('revealFileInOS', vscode.Uri.file(dir));
  });
}
