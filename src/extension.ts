import * as vscode from 'vscode';
import { addArtifactsCommand } from './commands/addArtifacts';
import { chooseStaticDirCommand } from './commands/chooseStaticDir';
import { cleanUpCommand } from './commands/cleanUp';
import { copyPathCommand } from './commands/copyPath';
import { copyTagCommand } from './commands/copyTag';
import { createStaticDirCommand } from './commands/createStaticDir';
import { destroyCommand } from './commands/destroy';
import { destroyFolderBuildsCommand } from './commands/destroyFolderBuilds';
import { forceReleaseCommand } from './commands/forceRelease';
import { forceReleaseAllStaleCommand } from './commands/forceReleaseAllStale';
import { lockForWindowCommand } from './commands/lockForWindow';
import { openArtifactCommand } from './commands/openArtifact';
import { openInTerminalCommand } from './commands/openInTerminal';
import { refreshCommand } from './commands/refresh';
import { releaseWindowLockCommand } from './commands/releaseWindowLock';
import { removeStaticDirCommand } from './commands/removeStaticDir';
import { revealInExplorerCommand } from './commands/revealInExplorer';
import { showLogCommand } from './commands/showLog';
import { stageBuildCommand } from './commands/stageBuild';
import { Configuration } from './config';
import { createLog } from './log';
import { prompts, type Prompts } from './prompts';
import { revealer } from './reveal';
import { LockStates } from './state';
import { StatusBar } from './statusBar';
import { StagingTreeProvider, type Node } from './tree/provider';
import { WindowLocks } from './windowLocks';

export const VIEW_ID = 'devserverStaging.areas';

/** What activate() hands back: the parts, for the integration tests to observe. */
export interface DevserverStagingApi {
  tree: StagingTreeProvider;
  states: LockStates;
  view: vscode.TreeView<Node>;
  windowLocks: WindowLocks;
  statusBar: StatusBar;
  prompts: Prompts;
}

/** Composition root: builds the parts, connects them, and hands every disposable to VS Code. */
export function activate(context: vscode.ExtensionContext): DevserverStagingApi {
  const log = createLog();
  const config = new Configuration();
  const settings = config.current;
  const timing = () => config.current.timing;
  const states = new LockStates(settings.timing, log);
  states.setPolling(settings.pollMs);
  const windowLocks = new WindowLocks(settings.timing, log);
  const tree = new StagingTreeProvider(settings.staticDirs, states, windowLocks);
  const view = vscode.window.createTreeView(VIEW_ID, { treeDataProvider: tree, showCollapseAll: true, canSelectMany: true });
  const statusBar = new StatusBar(states, windowLocks, settings.staticDirs);
  const staticDirs = () => config.current.staticDirs;
  const reveal = revealer(tree, view);
  // Every known build below a folder: the builds are told from folders by the commands for now.
  const buildsUnder = (staticDir: string, tag: string) => states.known().filter((e) => e.staticDir === staticDir && (tag === '' || e.tag.startsWith(`${tag}/`)));
  context.subscriptions.push(
    log,
    states,
    tree,
    view,
    statusBar,
    // Disposed when the window closes: releases the locks it holds.
    windowLocks,
    config,
    config.onDidChange((s) => {
      states.reset(s.timing);
      states.setPolling(s.pollMs);
      windowLocks.setTiming(s.timing);
      tree.setStaticDirs(s.staticDirs);
      statusBar.setStaticDirs(s.staticDirs);
    }),
    refreshCommand(tree, states, log),
    chooseStaticDirCommand(prompts, log),
    removeStaticDirCommand(prompts, log),
    createStaticDirCommand(tree, states, staticDirs, log),
    lockForWindowCommand(states, windowLocks, log),
    releaseWindowLockCommand(states, windowLocks, log),
    forceReleaseCommand(states, windowLocks, prompts, timing, log),
    forceReleaseAllStaleCommand(staticDirs, buildsUnder, windowLocks, prompts, timing, log),
    destroyCommand(states, windowLocks, prompts, timing, log, () => view.selection),
    destroyFolderBuildsCommand(buildsUnder, windowLocks, prompts, timing, log),
    cleanUpCommand(staticDirs, windowLocks, prompts, timing, log),
    copyPathCommand(states, log),
    copyTagCommand(states, log),
    openArtifactCommand(staticDirs, prompts, log),
    revealInExplorerCommand(states, log),
    openInTerminalCommand(states, log),
    showLogCommand(log),
    stageBuildCommand(staticDirs, windowLocks, statusBar, prompts, reveal, timing, log),
    addArtifactsCommand(states, windowLocks, statusBar, prompts, reveal, timing, log),
  );
  log.info(`Activated with ${settings.staticDirs.length} static director${settings.staticDirs.length === 1 ? 'y' : 'ies'}.`);
  return { tree, states, view, windowLocks, statusBar, prompts };
}

export function deactivate(): void {
  // Nothing to do: every disposable is in context.subscriptions.
}
