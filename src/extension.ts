import * as vscode from 'vscode';
import { chooseStaticDirCommand } from './commands/chooseStaticDir';
import { refreshCommand } from './commands/refresh';
import { onDidChangeSettings, readSettings } from './config';
import { createLog } from './log';
import { LockStates } from './state';
import { StagingTreeProvider, type Node } from './tree/provider';

export const VIEW_ID = 'devserverStaging.areas';

/** What activate() hands back: the parts, for the integration tests to observe. */
export interface DevserverStagingApi {
  tree: StagingTreeProvider;
  states: LockStates;
  view: vscode.TreeView<Node>;
}

/** Composition root: builds the parts, connects them, and hands every disposable to VS Code. */
export function activate(context: vscode.ExtensionContext): DevserverStagingApi {
  const log = createLog();
  const settings = readSettings();
  const states = new LockStates(settings.timing, log);
  const tree = new StagingTreeProvider(settings.staticDirs, states);
  const view = vscode.window.createTreeView(VIEW_ID, { treeDataProvider: tree, showCollapseAll: true, canSelectMany: true });
  context.subscriptions.push(
    log,
    states,
    tree,
    view,
    onDidChangeSettings((s) => {
      states.reset(s.timing);
      tree.setStaticDirs(s.staticDirs);
    }),
    refreshCommand(tree, states, log),
    chooseStaticDirCommand(log),
  );
  log.info(`Activated with ${settings.staticDirs.length} static director${settings.staticDirs.length === 1 ? 'y' : 'ies'}.`);
  return { tree, states, view };
}

export function deactivate(): void {
  // Nothing to do: every disposable is in context.subscriptions.
}
