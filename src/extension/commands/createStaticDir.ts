import * as fs from 'fs';
import * as vscode from 'vscode';
import type { Node } from '../tree/provider';
import type { StaticDirArgs } from './chooseStaticDir';
import { registerCommand, type Uses } from './command';

/** Creates a configured static directory that does not exist yet. */
export function createStaticDirCommand(ctx: Uses<'tree' | 'states'>): vscode.Disposable {
  const { config, log, states, tree } = ctx;
  return registerCommand('devserverStaging.createStaticDir', ctx, async (node?: Node, _nodes?: Node[], args?: StaticDirArgs) => {
    const dir = args?.dir ?? (node?.kind === 'staticDir' ? node.dir : undefined);
    // Only one the settings name: an error's button must not make directories elsewhere.
    if (dir === undefined || !config.current.staticDirs.includes(dir)) return;
    await fs.promises.mkdir(dir, { recursive: true });
    log.info(`Created static directory ${dir}`);
    states.reset();
    tree.refresh();
  });
}
