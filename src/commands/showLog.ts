import * as vscode from 'vscode';
import type { Log } from '../log';
import { registerCommand } from './command';

/** Shows the output channel that records what each action did. */
export function showLogCommand(log: Log): vscode.Disposable {
  return registerCommand('devserverStaging.showLog', log, () => log.show(true));
}
