import * as vscode from 'vscode';
import type { Node } from '../tree/provider';
import { registerCommand, type Uses } from './command';
import { targets } from './targets';

/** How long the status bar says that the lock is this window's now. */
const SAID_MS = 15_000;

/**
 * Lock When Free: queues this window for a held build, with a notification that shows its place
 * in line and cancels. When the lock comes, it is this window's (shown as yours) and the status bar
 * says so until it is released; cancelling, or closing the window, gives the place up.
 */
export function lockWhenFreeCommand(ctx: Uses<'states' | 'windowLocks'>): vscode.Disposable {
  const { log, prompts, states, windowLocks } = ctx;
  return registerCommand('devserverStaging.lockWhenFree', ctx, async (node?: Node, _nodes?: Node[], args?: { signal?: AbortSignal; staticDir?: string; tag?: string }) => {
    // A build named by the caller (the button of a "held" error), else the row or a quick pick.
    const named = args?.staticDir !== undefined && args.tag !== undefined ? states.entry(args.staticDir, args.tag) : undefined;
    const [e] = named !== undefined ? [named] : await targets(ctx, { node, title: vscode.l10n.t('Lock which build when it is free?'), only: ['held', 'stale', 'legacy'], single: true });
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
    // In the status bar, for as long as it is true: gone once the lock is released or lost.
    const said = vscode.window.setStatusBarMessage(`$(account) ${vscode.l10n.t('{0} is yours now: its lock was free after {1} s, and this window holds it.', e.tag, secs)}`, SAID_MS);
    const over = (): void => {
      said.dispose();
    };
    lease.once('released', over);
    lease.once('lost', over);
    return lease;
  });
}
