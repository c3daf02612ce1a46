/**
 * The one wrapper every command is registered through: errors become a message that says what
 * to do, with "Show Log"; cancellations stay quiet; the log records what ran and how it ended.
 */
import * as vscode from 'vscode';
import { isStagingError } from '../core';
import { errorMessage } from '../errors';
import type { Log } from '../log';

/**
 * Commands that change what is on disk. Their menu items are disabled in an untrusted workspace
 * (`enablement` in package.json); the handler refuses too, for callers that bypass menus.
 */
export const NEEDS_TRUST = new Set([
  'devserverStaging.stageBuild',
  'devserverStaging.addArtifacts',
  'devserverStaging.lockForWindow',
  'devserverStaging.forceRelease',
  'devserverStaging.destroy',
]);

export function registerCommand<A extends unknown[]>(id: string, log: Log, handler: (...args: A) => unknown): vscode.Disposable {
  return vscode.commands.registerCommand(id, async (...args: A) => {
    try {
      if (NEEDS_TRUST.has(id) && !vscode.workspace.isTrusted) {
        throw new Error(vscode.l10n.t('This workspace is not trusted, so Devserver Staging only shows lock states here. Trust the workspace to stage, lock, force-release or destroy.'));
      }
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
