import * as fs from 'fs';
import * as vscode from 'vscode';
import type { Log } from '../log';
import type { LockStates } from '../model/lockStates';
import type { StagingTreeProvider, Node } from '../tree/provider';
import { registerCommand } from './command';

/** Creates a configured static directory that does not exist yet. */
export function createStaticDirCommand(tree: StagingTreeProvider, states: LockStates, log: Log): vscode.Disposable {
  return registerCommand('devserverStaging.createStaticDir', log, async (node?: Node) => {
    if (node?.kind !== 'staticDir') return;
    await fs.promises.mkdir(node.dir, { recursive: true });
    log.info(`Created static directory ${node.dir}`);
    states.reset();
    tree.refresh();
  });
}
