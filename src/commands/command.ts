/**
 * The one wrapper every command is registered through: errors become a message that says what
 * to do, with "Show Log"; cancellations stay quiet; the log records what ran and how it ended.
 */
import * as vscode from 'vscode';
import { isStagingError } from '../core';
import { errorMessage } from '../errors';
import type { Log } from '../log';

export function registerCommand<A extends unknown[]>(id: string, log: Log, handler: (...args: A) => unknown): vscode.Disposable {
  return vscode.commands.registerCommand(id, async (...args: A) => {
    try {
      return await handler(...args);
    } catch (err) {
      if (err instanceof vscode.CancellationError || (isStagingError(err) && err.code === 'ECANCELED')) {
        log.info(`${id}: cancelled`);
        return undefined;
      }
      const message = errorMessage(err);
      log.error(`${id}: ${message}`);
      const showLog = vscode.l10n.t('Show Log');
      void vscode.window.showErrorMessage(message, showLog).then((choice) => {
        if (choice === showLog) log.show(true);
      });
      return undefined;
    }
  });
}
