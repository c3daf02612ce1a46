import * as vscode from 'vscode';
import type { Node } from '../tree/provider';
import { registerCommand, type Uses } from './command';

/** Lets go of locks this window holds. */
export function releaseWindowLockCommand(ctx: Uses<'windowLocks'>): vscode.Disposable {
  const { prompts, windowLocks } = ctx;
  return registerCommand('devserverStaging.releaseWindowLock', ctx, async (node?: Node, nodes?: Node[]) => {
    let chosen = (nodes ?? (node !== undefined ? [node] : [])).flatMap((n) => (n.kind === 'build' ? [{ staticDir: n.staticDir, tag: n.tag }] : []));
    if (chosen.length === 0) {
      const mine = windowLocks.all;
      if (mine.length === 0) {
        void prompts.notify('info', vscode.l10n.t('This window holds no locks.'));
        return;
      }
      const picked = await prompts.pickMany(
        mine.map((l) => ({ label: l.tag, detail: l.staticDir, lease: l })),
        { title: vscode.l10n.t('Release which locks?') },
      );
      chosen = (picked ?? []).map((p) => ({ staticDir: p.lease.staticDir, tag: p.lease.tag }));
    }
    for (const e of chosen) await windowLocks.release(e.staticDir, e.tag);
  });
}
