/** The log output channel: what each action did, and anything that went wrong quietly. */
import * as vscode from 'vscode';

export type Log = Pick<vscode.LogOutputChannel, 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'show'>;

export function createLog(): vscode.LogOutputChannel {
  return vscode.window.createOutputChannel('Devserver Staging', { log: true });
}
