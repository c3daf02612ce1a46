import * as vscode from 'vscode';
import { registerCommand, type Uses } from './command';

/** Shows the output channel that records what each action did. */
export function showLogCommand(ctx: Uses): vscode.Disposable {
  const { log } = ctx;
  return registerCommand('devserverStaging.showLog', ctx, () => log.show(true));
}
