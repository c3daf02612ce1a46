import * as vscode from 'vscode';
import type { Log } from '../log';
import type { LockStates } from '../core';
import type { Node } from '../tree/provider';
import type { WindowLocks } from '../windowLocks';
import { registerCommand } from './command';
import { targets } from './targets';

/** Holds a build's lock for as long as this window is open, or until released. */
export function lockForWindowCommand(states: LockStates, windowLocks: WindowLocks, log: Log): vscode.Disposable {
  return registerCommand('devserverStaging.lockForWindow', log, async (node?: Node, nodes?: Node[]) => {
    const chosen = await targets(states, { node, nodes, title: vscode.l10n.t('Lock which builds for this window?'), only: ['free', 'stale'] });
    for (const e of chosen) if (!windowLocks.has(e.staticDir, e.tag)) await windowLocks.lock(e.staticDir, e.tag);
  });
}
