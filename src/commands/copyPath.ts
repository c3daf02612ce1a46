import * as vscode from 'vscode';
import type { Log } from '../log';
import type { LockStates } from '../core';
import { dirOf, type Node } from '../tree/provider';
import { registerCommand } from './command';
import { oneDir } from './targets';

/** Copies the paths of the chosen builds to the clipboard, one per line. */
export function copyPathCommand(states: LockStates, log: Log): vscode.Disposable {
  return registerCommand('devserverStaging.copyPath', log, async (node?: Node, nodes?: Node[]) => {
    const dirs = nodes !== undefined && nodes.length > 1 ? nodes.map(dirOf) : [await oneDir(states, node, vscode.l10n.t('Copy the path of which build?'))];
    const text = dirs.filter((d): d is string => d !== undefined).join('\n');
    if (text !== '') await vscode.env.clipboard.writeText(text);
  });
}
