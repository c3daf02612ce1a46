import * as fs from 'fs';
import * as vscode from 'vscode';
import type { Log } from '../log';
import type { LockStates } from '../core';
import type { StagingTreeProvider, Node } from '../tree/provider';
import type { StaticDirArgs } from './chooseStaticDir';
import { registerCommand } from './command';

/** Creates a configured static directory that does not exist yet. */
export function createStaticDirCommand(tree: StagingTreeProvider, states: LockStates, staticDirs: () => readonly string[], log: Log): vscode.Disposable {
  return registerCommand('devserverStaging.createStaticDir', log, async (node?: Node, _nodes?: Node[], args?: StaticDirArgs) => {
    const dir = args?.dir ?? (node?.kind === 'staticDir' ? node.dir : undefined);
    // Only one the settings name: an error's button must not make directories elsewhere.
    if (dir === undefined || !staticDirs().includes(dir)) return;
    await fs.promises.mkdir(dir, { recursive: true });
    log.info(`Created static directory ${dir}`);
    states.reset();
    tree.refresh();
  });
}
