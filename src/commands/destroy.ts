import * as vscode from 'vscode';
import { describeHolder, destroy, isStagingError, type Timing } from '../core';
import type { Log } from '../log';
import type { Prompts } from '../prompts';
import type { LockStates } from '../model/lockStates';
import type { Node } from '../tree/provider';
import type { WindowLocks } from '../windowLocks';
import { registerCommand } from './command';
import { targets } from './targets';

/**
 * Removes builds, after a modal. A build held by someone else is refused unless the user
 * confirms a second, explicit "Destroy Anyway" that names the holder.
 */
export function destroyCommand(states: LockStates, windowLocks: WindowLocks, prompts: Prompts, timing: () => Timing, log: Log): vscode.Disposable {
  return registerCommand('devserverStaging.destroy', log, async (node?: Node, nodes?: Node[]) => {
    const chosen = await targets(states, node, nodes, vscode.l10n.t('Destroy which builds?'));
    if (chosen.length === 0) return;
    const ok = await prompts.confirm(
      chosen.length === 1 ? vscode.l10n.t('Destroy {0}?', chosen[0]!.tag) : vscode.l10n.t('Destroy {0} builds?', chosen.length),
      `${chosen.map((e) => e.dir).join('\n')}\n\n${vscode.l10n.t('Everything staged there is deleted. This cannot be undone.')}`,
      vscode.l10n.t('Destroy'),
    );
    if (!ok) return;
    await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: vscode.l10n.t('Destroying'), cancellable: false }, async (progress) => {
      for (const e of chosen) {
        progress.report({ message: e.tag, increment: 100 / chosen.length });
        if (windowLocks.has(e.staticDir, e.tag)) await windowLocks.release(e.staticDir, e.tag);
        const started = Date.now();
        try {
          await destroy(e.staticDir, e.tag, { ...timing(), clientId: windowLocks.clientId });
        } catch (err) {
          if (!(isStagingError(err) && err.code === 'ELOCKED')) throw err;
          const info = states.entry(e.staticDir, e.tag) ?? e;
          const anyway = await prompts.confirm(
            vscode.l10n.t('{0} is held by someone else.', e.tag),
            vscode.l10n.t('{0} holds it (or a build below it). Destroying it breaks that lock; its holder may still be writing.', describeHolder(info)),
            vscode.l10n.t('Destroy Anyway'),
            false,
          );
          if (!anyway) continue;
          await destroy(e.staticDir, e.tag, { ...timing(), clientId: windowLocks.clientId, force: true });
        }
        log.info(`Destroyed ${e.tag} in ${e.staticDir} (${Date.now() - started} ms).`);
      }
    });
  });
}
