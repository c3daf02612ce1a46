/**
 * Tells the user of each lock this window lost (the model's `Losses`): who broke it and when, in
 * words, in an error notification, which VS Code keeps on screen until it is dismissed (a warning
 * would slip into the notification centre after a few seconds). Closing it, or choosing a button,
 * dismisses the loss.
 */
import * as vscode from 'vscode';
import { describeActor, type LockLoss } from '../core';
import { openDetails } from './details/buildDetails';
import type { Log } from './log';
import type { Losses } from './model/losses';
import type { Prompts } from './prompts';

/** The loss as the user reads it: what happened to which build, by whom, when. */
export function lossMessage(l: LockLoss): string {
  const who = l.by !== undefined ? describeActor(l.by) : '';
  const when = new Date(l.at).toLocaleString();
  switch (l.kind) {
    case 'force-released':
      return vscode.l10n.t('This window lost its lock on {0}: {1} force-released it at {2}. Work done under it may be incomplete.', l.tag, who, when);
    case 'taken-over':
      return vscode.l10n.t('This window lost its lock on {0}: {1} found it stale and took it over at {2} (this window had not refreshed it in time). Work done under it may be incomplete.', l.tag, who, when);
    case 'destroyed':
      return vscode.l10n.t('This window lost its lock on {0}: {1} force-released it at {2} and destroyed the build.', l.tag, who, when);
    case 'replaced':
      return vscode.l10n.t('This window lost its lock on {0}: another process removed it without recording who, and {1} holds it now (found at {2}). Work done under it may be incomplete.', l.tag, l.now?.holder !== undefined ? `${l.now.holder.user}@${l.now.holder.hostname}` : vscode.l10n.t('another process'), when);
    case 'removed':
      return vscode.l10n.t('This window lost its lock on {0}: another process removed it without recording who (found at {1}). Work done under it may be incomplete.', l.tag, when);
    case 'unreachable':
      return vscode.l10n.t('This window lost its lock on {0}: it could not be refreshed, because {1} could not be reached (found at {2}). Work done under it may be incomplete.', l.tag, l.staticDir, when);
  }
}

export class LostLocks implements vscode.Disposable {
  private readonly subscription: vscode.Disposable;

  constructor(
    private readonly losses: Losses,
    private readonly prompts: Prompts,
    private readonly log: Log,
  ) {
    this.subscription = losses.onDidAdd((loss) => void this.tell(loss));
  }

  private async tell(loss: LockLoss): Promise<void> {
    const details = vscode.l10n.t('Show Build Details');
    try {
      const choice = await this.prompts.notify('error', lossMessage(loss), details);
      if (choice === details) await openDetails(loss.staticDir, loss.tag);
    } catch (err) {
      this.log.warn(`Could not show that the lock on ${loss.tag} was lost: ${String(err)}`);
    } finally {
      this.losses.dismiss(loss);
    }
  }

  dispose(): void {
    this.subscription.dispose();
  }
}
