import * as vscode from 'vscode';
import type { Log } from '../log';
import type { LockStates } from '../core';
import { type Node } from '../tree/provider';
import { registerCommand } from './command';
import { oneDir } from './targets';

/** Opens an integrated terminal whose working directory is the build. */
export function openInTerminalCommand(states: LockStates, log: Log): vscode.Disposable {
  return registerCommand('devserverStaging.openInTerminal', log, async (node?: Node) => {
    const dir = await oneDir(states, node, vscode.l10n.t('Open a terminal in which build?'));
    if (dir !== undefined) vscode.window.createTerminal({ cwd: dir, name: dir.split('/').slice(-2).join('/') }).show();
  });
}
