import type * as vscode from 'vscode';
import type { Log } from '../log';
import type { LockStates } from '../core';
import type { StagingTreeProvider } from '../tree/provider';
import { registerCommand } from './command';

/** Lists every static directory again from disk: after a change the watcher cannot see (NFS). */
export function refreshCommand(tree: StagingTreeProvider, states: LockStates, log: Log): vscode.Disposable {
  return registerCommand('devserverStaging.refresh', log, () => {
    states.reset();
    tree.refresh();
    log.info('Refreshed every static directory.');
  });
}
