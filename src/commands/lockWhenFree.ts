import * as vscode from 'vscode';
import type { Node } from '../tree/provider';
import { registerCommand, type Uses } from './command';
import { targets } from './targets';

/**
 * Lock When Free: queues this window for a held build, with a notification that shows its place
 * in line and cancels. When the lock comes, it is this window's (shown as yours) and the user is
 * told; cancelling, or closing the window, gives the place up.
 */
export function lockWhenFreeCommand(ctx: Uses<'states' | 'windowLocks'>): vscode.Disposable {
  const { log, prompts, windowLocks } = ctx;
  return registerCommand('devserverStaging.lockWhenFree', ctx, async (node?: Node, _nodes?: Node[], args?: { signal?: AbortSignal }) => {
    const [e] = await targets(ctx, { node, title: vscode.l10n.t('Lock which build when it is free?'), only: ['held', 'stale', 'legacy'], single: true });
    if (e === undefined || e.kind !== 'build') return undefined;
    const started = Date.now();
    const lease = await prompts.progress(
      { title: vscode.l10n.t('Waiting for {0}', e.tag), cancellable: true },
      (report, token) => {
        const abort = new AbortController();
        token.onCancellationRequested(() => abort.abort());
        args?.signal?.addEventListener('abort', () => abort.abort(), { once: true });
        report({ message: vscode.l10n.t('joining the queue…') });
        return windowLocks.lock(e.staticDir, e.tag, {
          signal: abort.signal,
          onQueue: (position, waiting) =>
            report({ message: position <= 1 ? vscode.l10n.t('next in line ({0} waiting)', waiting) : vscode.l10n.t('{0} of {1} in line', position, waiting) }),
        });
      },
    );
    const secs = Math.round((Date.now() - started) / 1000);
    log.info(`Locked ${e.tag} in ${e.staticDir} for this window after waiting ${secs} s in its queue.`);
    void prompts.notify('info', vscode.l10n.t('{0} is yours now: its lock was free after {1} s, and this window holds it.', e.tag, secs));
    return lease;
  });
}
