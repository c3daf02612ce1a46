import * as vscode from 'vscode';
import type { Log } from '../log';
import type { LockStates } from '../state';
import type { Node } from '../tree/provider';
import type { WindowLocks } from '../windowLocks';
import { registerCommand } from './command';

/** Lets go of locks this window holds. */
export function releaseWindowLockCommand(states: LockStates, windowLocks: WindowLocks, log: Log): vscode.Disposable {
  return registerCommand('devserverStaging.releaseWindowLock', log, async (node?: Node, nodes?: Node[]) => {
    let chosen = (nodes ?? (node !== undefined ? [node] : [])).filter((n) => n.kind === 'area').map((n) => n.entry);
    if (chosen.length === 0) {
      const mine = windowLocks.all;
      if (mine.length === 0) {
        void vscode.window.showInformationMessage(vscode.l10n.t('This window holds no locks.'));
        return;
      }
      const picked = await vscode.window.showQuickPick(
        mine.map((l) => ({ label: l.tag, detail: l.staticDir, lease: l })),
        { title: vscode.l10n.t('Release which locks?'), canPickMany: true },
      );
      chosen = (picked ?? []).map((p) => states.entry(p.lease.staticDir, p.lease.tag) ?? { ...p.lease, name: p.lease.tag, exists: true, state: 'held', lockPath: p.lease.lockPath });
    }
    for (const e of chosen) await windowLocks.release(e.staticDir, e.tag);
  });
}
