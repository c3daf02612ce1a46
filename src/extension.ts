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
import { lockWhenFreeCommand } from './commands/lockWhenFree';
import { openArtifactCommand } from './commands/openArtifact';
import { openInTerminalCommand } from './commands/openInTerminal';
import { refreshCommand } from './commands/refresh';
import { releaseWindowLockCommand } from './commands/releaseWindowLock';
import { removeStaticDirCommand } from './commands/removeStaticDir';
import { revealInExplorerCommand } from './commands/revealInExplorer';
import { showLogCommand } from './commands/showLog';
import { filterCommand, clearFilterCommand } from './commands/filter';
import { goToBuildCommand } from './commands/goToBuild';
import { showMoreCommand } from './commands/showMore';
import { verifyBuildCommand } from './commands/verifyBuild';
import { showBuildDetailsCommand } from './commands/showBuildDetails';
import { BuildDetails, DETAILS_SCHEME } from './details/buildDetails';
import { FilterStatus } from './tree/filterStatus';
import { stageBuildCommand } from './commands/stageBuild';
import { Configuration } from './config';
import { createLog } from './log';
import { prompts, type Prompts } from './prompts';
import { LockStates } from './core';
import { Mine } from './model/mine';
import { revealer } from './reveal';
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
  mine: Mine;
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
  states.scan(settings.staticDirs);
  const windowLocks = new WindowLocks(settings.timing, log);
  const mine = new Mine(windowLocks.clientId, (d, t) => windowLocks.has(d, t), () => windowLocks.all);
  const tree = new StagingTreeProvider(settings, states, mine);
  const view = vscode.window.createTreeView(VIEW_ID, { treeDataProvider: tree, showCollapseAll: true, canSelectMany: true });
  // Polling (network filesystems) only while someone looks.
  states.setVisible(view.visible);
  const statusBar = new StatusBar(states, mine, settings.staticDirs);
  const details = new BuildDetails(states, mine);
  const staticDirs = () => config.current.staticDirs;
  const reveal = revealer(tree, view, states, (tag) => log.info(`Cleared the filter to show ${tag}.`));
  const buildsUnder = (staticDir: string, tag: string) => states.buildsUnder(staticDir, tag).flatMap((r) => (r.lock !== undefined ? [r.lock] : []));
  context.subscriptions.push(
    log,
    states,
    tree,
    view,
    statusBar,
    view.onDidChangeVisibility((e) => states.setVisible(e.visible)),
    new FilterStatus(view, tree),
    details,
    vscode.workspace.registerTextDocumentContentProvider(DETAILS_SCHEME, details),
    // Disposed when the window closes: releases the locks it holds.
    windowLocks,
    mine,
    windowLocks.onDidChange(() => mine.locksChanged()),
    config,
    config.onDidChange((s) => {
      states.reset(s.timing, s.staticDirs);
      states.setPolling(s.pollMs);
      windowLocks.setTiming(s.timing);
      tree.setSettings(s);
      statusBar.setStaticDirs(s.staticDirs);
    }),
    refreshCommand(tree, states, log),
    chooseStaticDirCommand(prompts, log),
    removeStaticDirCommand(prompts, log),
    createStaticDirCommand(tree, states, staticDirs, log),
    lockForWindowCommand(states, windowLocks, log),
    lockWhenFreeCommand(states, windowLocks, prompts, log),
    releaseWindowLockCommand(windowLocks, log),
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
    filterCommand(tree, log),
    clearFilterCommand(tree, log),
    goToBuildCommand(states, mine, reveal, log),
    showMoreCommand(tree, log),
    verifyBuildCommand(states, timing, log),
    showBuildDetailsCommand(states, log),
    stageBuildCommand(staticDirs, windowLocks, mine, prompts, reveal, timing, log),
    addArtifactsCommand(states, windowLocks, mine, prompts, reveal, timing, log),
  );
  log.info(`Activated with ${settings.staticDirs.length} static director${settings.staticDirs.length === 1 ? 'y' : 'ies'}.`);
  return { tree, states, view, windowLocks, statusBar, mine, prompts };
}

export function deactivate(): void {
  // Nothing to do: every disposable is in context.subscriptions.
}
