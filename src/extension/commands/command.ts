/**
 * The one wrapper every command is registered through: errors become a message in the editor's
 * words, with buttons for the next step and "Show Log"; cancellations stay quiet; the log records
 * what ran and how it ended.
 */
import * as vscode from 'vscode';
import type { Configuration } from '../config';
import { isStagingError, type LockStates } from '../../core';
import type { Log } from '../log';
import type { Mine } from '../model/mine';
import type { Notices } from '../model/notices';
import type { Prompts } from '../prompts';
import type { Reveal } from '../reveal';
import type { Node, StagingTreeProvider } from '../tree/provider';
import type { WindowLocks } from '../windowLocks';
import { describeError } from './errorMessages';
import type { BuildsUnder } from './targets';
import { EXTENSION_ID, commandsNeedingTrust } from './trust';

/** The parts of the extension that commands use, made once in activate(). */
export interface CommandContext {
  /** The settings: read `config.current` when acting, never a copy taken earlier. */
  readonly config: Configuration;
  readonly log: Log;
  readonly prompts: Prompts;
  readonly states: LockStates;
  readonly windowLocks: WindowLocks;
  readonly mine: Mine;
  /** What the user is to be told of: their reservations' ends and losses, builds they wait to see free. */
  readonly notices: Notices;
  readonly tree: StagingTreeProvider;
  readonly reveal: Reveal;
  /** Every known build below a folder (tag '' for the whole static directory). */
  readonly buildsUnder: BuildsUnder;
  /** The rows selected in the view now. */
  selection(): readonly Node[];
}

/** What the wrapper itself needs: where errors are logged and shown, and the settings they are read against. */
export type Registrar = Pick<CommandContext, 'config' | 'log' | 'prompts'>;

/** What a command's factory takes: the parts `K` it uses, besides what registering it takes. */
export type Uses<K extends keyof CommandContext = never> = Pick<CommandContext, K | keyof Registrar>;

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
export async function showError(err: unknown, { config, log, prompts }: Registrar, what = ''): Promise<void> {
  const shown = describeError(err, config.current.staticDirs);
  const code = typeof err === 'object' && err !== null && typeof (err as { code?: unknown }).code === 'string' ? ` [${(err as { code: string }).code}]` : '';
  log.error(`${what}${what === '' ? '' : ': '}${shown.message}${code}`);
  const showLog = vscode.l10n.t('Show Log');
  const choice = await prompts.notify('error', shown.message, ...shown.actions.map((a) => a.title), showLog);
  if (choice === showLog) log.show(true);
  else await shown.actions.find((a) => a.title === choice)?.run();
}

export function registerCommand<A extends unknown[]>(id: string, ctx: Registrar, handler: (...args: A) => unknown): vscode.Disposable {
  const { log } = ctx;
  return vscode.commands.registerCommand(id, async (...args: A) => {
    try {
      if (!vscode.workspace.isTrusted && needsTrust(id)) {
        throw new Error(vscode.l10n.t('This workspace is not trusted, so Devserver Staging only shows lock states here and changes nothing on disk. Trust the workspace to stage, lock, verify, force-release or destroy, or to change the static directories.'));
      }
      return await handler(...args);
    } catch (err) {
      if (err instanceof vscode.CancellationError || (isStagingError(err) && err.code === 'ECANCELED')) {
        log.info(`${id}: cancelled`);
        return undefined;
      }
      // Not awaited: the command is over; the message stays until the user answers it.
      void showError(err, ctx, id).catch((e: unknown) => log.error(`${id}: ${String(e)}`));
      return undefined;
    }
  });
}
