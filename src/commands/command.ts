/**
 * The one wrapper every command is registered through: errors become a message in the editor's
 * words, with buttons for the next step and "Show Log"; cancellations stay quiet; the log records
 * what ran and how it ended.
 */
import * as vscode from 'vscode';
import { isStagingError } from '../core';
import type { Log } from '../log';
import { prompts } from '../prompts';
import { describeError } from './errorMessages';

/**
 * Commands that change what is on disk. Their menu items are disabled in an untrusted workspace
 * (`enablement` in package.json); the handler refuses too, for callers that bypass menus.
 */
export const NEEDS_TRUST = new Set([
  'devserverStaging.stageBuild',
  'devserverStaging.addArtifacts',
  'devserverStaging.lockForWindow',
  'devserverStaging.lockWhenFree',
  'devserverStaging.forceRelease',
  'devserverStaging.forceReleaseAllStale',
  'devserverStaging.destroy',
  'devserverStaging.destroyFolderBuilds',
  'devserverStaging.cleanUp',
  'devserverStaging.createStaticDir',
]);

/** Shows an error as `describeError` words it, and runs the button chosen. */
export async function showError(err: unknown, log: Log, what = ''): Promise<void> {
  const shown = describeError(err);
  const code = typeof err === 'object' && err !== null && typeof (err as { code?: unknown }).code === 'string' ? ` [${(err as { code: string }).code}]` : '';
  log.error(`${what}${what === '' ? '' : ': '}${shown.message}${code}`);
  const showLog = vscode.l10n.t('Show Log');
  const choice = await prompts.notify('error', shown.message, ...shown.actions.map((a) => a.title), showLog);
  if (choice === showLog) log.show(true);
  else await shown.actions.find((a) => a.title === choice)?.run();
}

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
      // Not awaited: the command is over; the message stays until the user answers it.
      void showError(err, log, id).catch((e: unknown) => log.error(`${id}: ${String(e)}`));
      return undefined;
    }
  });
}
