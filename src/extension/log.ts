/** The log output channel: what each action did, and anything that went wrong quietly. */
import * as vscode from 'vscode';
import { logText } from './shown';

export interface Log {
  trace(message: string): void;
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
  show(preserveFocus?: boolean): void;
}

/**
 * The "Devserver Staging" channel. Every line goes through `logText`: messages name builds and
 * holders, and a co-user's newline in one must not forge a line of the log.
 */
export function createLog(channel: vscode.LogOutputChannel = vscode.window.createOutputChannel('Devserver Staging', { log: true })): Log & vscode.Disposable {
  return {
    trace: (message) => channel.trace(logText(message)),
    debug: (message) => channel.debug(logText(message)),
    info: (message) => channel.info(logText(message)),
    warn: (message) => channel.warn(logText(message)),
    error: (message) => channel.error(logText(message)),
    show: (preserveFocus) => channel.show(preserveFocus),
    dispose: () => channel.dispose(),
  };
}
