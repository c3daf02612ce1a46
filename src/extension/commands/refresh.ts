import type * as vscode from 'vscode';
import { registerCommand, type Uses } from './command';

/** Lists every static directory again from disk: after a change the watcher cannot see (NFS). */
export function refreshCommand(ctx: Uses<'tree' | 'states'>): vscode.Disposable {
  const { log, states, tree } = ctx;
  return registerCommand('devserverStaging.refresh', ctx, () => {
    states.reset();
    tree.refresh();
    log.info('Refreshed every static directory.');
  });
}
