/**
 * Tells the user what the model of notices (model/notices.ts) says, in words: their reservation
 * ending soon or ended (with Extend…), force-released, taken over or destroyed and by whom, a
 * build they asked about free (with Lock). It feeds the model what the view's model of the disk
 * sees, and asks the history how a reservation went. Co-users' strings are shown as text only
 * (`Prompts.notify`).
 */
import * as vscode from 'vscode';
import { describeActor, explainLoss, isAtOrBelow, keyOf, type AreaRef, type LockStates, type StateChange } from '../core';
import type { Configuration } from './config';
import type { Log } from './log';
import { endOf } from './model/reservation';
import type { Notice, Notices } from './model/notices';
import type { Prompts } from './prompts';

/** Set while the window has builds it asked to hear about: Stop Notifying shows in the palette. */
export const WISHES_CONTEXT = 'devserverStaging.notifyingWhenFree';

/** The notice as the user reads it. */
export function noticeMessage(n: Notice): string {
  switch (n.kind) {
    case 'ending':
      return vscode.l10n.t('Your reservation of {0} ends at {1}, in less than 10 minutes.', n.tag, endOf(n.until));
    case 'ended':
      return vscode.l10n.t('Your reservation of {0} ended at {1}: anyone may take the build now.', n.tag, endOf(n.until));
    case 'free':
      return vscode.l10n.t('{0} is free now.', n.tag);
    case 'lost': {
      const who = n.loss.by !== undefined ? describeActor(n.loss.by) : vscode.l10n.t('another process');
      const when = new Date(n.loss.at).toLocaleString();
      if (n.loss.kind === 'taken-over') return vscode.l10n.t('Your reservation of {0} was taken over by {1} at {2}.', n.tag, who, when);
      if (n.loss.kind === 'destroyed') return vscode.l10n.t('Your reservation of {0} was force-released by {1} at {2}, who destroyed the build.', n.tag, who, when);
      return vscode.l10n.t('Your reservation of {0} was force-released by {1} at {2}.', n.tag, who, when);
    }
  }
}

export class Notifications implements vscode.Disposable {
  private readonly subscriptions: vscode.Disposable[] = [];
  private disposed = false;

  constructor(
    private readonly states: LockStates,
    private readonly notices: Notices,
    config: Configuration,
    private readonly prompts: Prompts,
    private readonly log: Log,
  ) {
    this.subscriptions.push(
      states.onDidChange((changes) => this.changed(changes)),
      notices.onNotice((n) => void this.tell(n)),
      notices.onGone((lease) => void explainLoss(lease, config.current.timing).then((loss) => !this.disposed && notices.lost(loss))),
      notices.onDidChangeWishes(() => void vscode.commands.executeCommand('setContext', WISHES_CONTEXT, notices.wishes().length > 0)),
    );
    // The reservations there already.
    for (const dir of config.current.staticDirs) for (const r of states.buildsUnder(dir, '')) this.update(r);
  }

  private update(ref: AreaRef): void {
    const r = this.states.record(ref.staticDir, ref.tag);
    this.notices.update(ref, r?.kind === 'build' ? r.lock : undefined, r?.judgedAt ?? Date.now());
  }

  private changed(changes: readonly StateChange[]): void {
    for (const c of changes) {
      if (c.what === 'usage') continue;
      if (c.what === 'state') {
        this.update(c);
        continue;
      }
      // Builds came or went below c.tag: those followed that are gone, and any new ones.
      const now = new Set(this.states.buildsUnder(c.staticDir, c.tag).map((r) => keyOf(r.staticDir, r.tag)));
      for (const ref of this.notices.refs()) if (ref.staticDir === c.staticDir && isAtOrBelow(ref.tag, c.tag) && !now.has(keyOf(ref.staticDir, ref.tag))) this.update(ref);
      for (const r of this.states.buildsUnder(c.staticDir, c.tag)) this.update(r);
    }
  }

  private async tell(n: Notice): Promise<void> {
    const extend = vscode.l10n.t('Extend…');
    const lock = vscode.l10n.t('Lock');
    const args = { staticDir: n.staticDir, tag: n.tag };
    try {
      if (n.kind === 'free') {
        if ((await this.prompts.notify('info', noticeMessage(n), lock)) === lock) await vscode.commands.executeCommand('devserverStaging.lockForWindow', undefined, undefined, args);
      } else if (n.kind === 'lost') {
        await this.prompts.notify('warning', noticeMessage(n));
      } else if ((await this.prompts.notify(n.kind === 'ending' ? 'warning' : 'info', noticeMessage(n), extend)) === extend) {
        await vscode.commands.executeCommand('devserverStaging.extendReservation', undefined, undefined, args);
      }
    } catch (err) {
      this.log.warn(`Could not tell of ${n.kind} for ${n.tag}: ${String(err)}`);
    }
  }

  dispose(): void {
    this.disposed = true;
    for (const s of this.subscriptions) s.dispose();
  }
}
