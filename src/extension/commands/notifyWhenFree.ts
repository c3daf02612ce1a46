import * as vscode from 'vscode';
import type { Node } from '../tree/provider';
import { registerCommand, type Uses } from './command';
import type { BuildArgs } from './forceRelease';
import { targets } from './targets';

/**
 * Notify When Free: asks to be told once when a held build is free, without taking its lock or a
 * place in its line; asked again for the same build, it takes the wish back. The wish lasts as
 * long as the window.
 */
export function notifyWhenFreeCommand(ctx: Uses<'states' | 'notices'>): vscode.Disposable {
  const { notices, prompts, states } = ctx;
  return registerCommand('devserverStaging.notifyWhenFree', ctx, async (node?: Node, _nodes?: Node[], args?: BuildArgs) => {
    const named = args !== undefined ? states.entry(args.staticDir, args.tag) : undefined;
    const [e] = named !== undefined ? [named] : await targets(ctx, { node, title: vscode.l10n.t('Be told when which build is free?'), only: ['held', 'stale', 'legacy'], single: true });
    if (e === undefined || e.kind !== 'build') return;
    if (notices.unwish(e)) {
      void prompts.notify('info', vscode.l10n.t('You will not be told when {0} is free.', e.tag));
      return;
    }
    if (e.state === 'free') {
      void prompts.notify('info', vscode.l10n.t('{0} is free now.', e.tag));
      return;
    }
    notices.wish(e);
    void prompts.notify('info', vscode.l10n.t('You will be told once when {0} is free (while this window is open). Run Notify When Free on it again to stop.', e.tag));
  });
}
