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
import { EXTENSION_ID, commandsNeedingTrust } from './trust';

/** What the manifest says needs trust, read from the running extension's package.json on first need. */
let trustList: ReadonlySet<string> | undefined;

/**
 * Whether the command `id` needs a trusted workspace, as its `enablement` in package.json says
 * (see trust.ts). Where that manifest cannot be read, every command does.
 */
export function needsTrust(id: string): boolean {
  trustList ??= commandsNeedingTrust(vscode.extensions.getExtension(EXTENSION_ID)?.packageJSON);
  return trustList === undefined || trustList.has(id);
}

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
      if (!vscode.workspace.isTrusted && needsTrust(id)) {
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
