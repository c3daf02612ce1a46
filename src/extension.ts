import * as vscode from 'vscode';

/** Composition root. The tree view, commands and watcher arrive with the extension proper. */
export function activate(context: vscode.ExtensionContext): void {
  const log = vscode.window.createOutputChannel('Devserver Staging', { log: true });
  context.subscriptions.push(log);
  log.info('Devserver Staging activated');
}

export function deactivate(): void {
  // Nothing to clean up: every disposable is in context.subscriptions.
}
