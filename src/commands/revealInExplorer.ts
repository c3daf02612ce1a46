import * as vscode from 'vscode';
import type { Log } from '../log';
import type { LockStates } from '../core';
import { type Node } from '../tree/provider';
import { registerCommand } from './command';
import { oneDir } from './targets';

/** Shows the build in the operating system's file manager. */
export function revealInExplorerCommand(states: LockStates, log: Log): vscode.Disposable {
  return registerCommand('devserverStaging.revealInExplorer', log, async (node?: Node) => {
    const dir = await oneDir(states, node, vscode.l10n.t('Reveal which build?'));
    if (dir !== undefined) await vscode.commands.executeCommand('revealFileInOS', vscode.Uri.file(dir));
  });
}
