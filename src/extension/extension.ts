import * as vscode from 'vscode';
import { ArtifactFiles, ARTIFACT_SCHEME } from './artifactFiles';
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
import { notifyWhenFreeCommand } from './commands/notifyWhenFree';
import { stopNotifyingCommand } from './commands/stopNotifying';
import { openArtifactCommand } from './commands/openArtifact';
import { openInTerminalCommand } from './commands/openInTerminal';
import { refreshCommand } from './commands/refresh';
import { releaseWindowLockCommand } from './commands/releaseWindowLock';
import { reserveCommand } from './commands/reserve';
import { extendReservationCommand } from './commands/extendReservation';
import { releaseReservationCommand } from './commands/releaseReservation';
import { removeStaticDirCommand } from './commands/removeStaticDir';
import { revealInExplorerCommand } from './commands/revealInExplorer';
import { showLogCommand } from './commands/showLog';
import { filterCommand, clearFilterCommand } from './commands/filter';
import { goToBuildCommand } from './commands/goToBuild';
import { showMoreCommand } from './commands/showMore';
import { verifyBuildCommand } from './commands/verifyBuild';
import { showBuildDetailsCommand } from './commands/showBuildDetails';
import { showUsageCommand } from './commands/showUsage';
import { BuildDetails, DETAILS_SCHEME } from './details/buildDetails';
import { FilterStatus } from './tree/filterStatus';
import { stageBuildCommand } from './commands/stageBuild';
import { type CommandContext } from './commands/command';
import { Configuration } from './config';
import { createLog } from './log';
import { logCoreWarnings } from './coreWarnings';
import { createPrompts, type Prompts } from './prompts';
import { LockStates, allowProbes, threadWatcher } from '../core';
import { Losses } from './model/losses';
import { Mine } from './model/mine';
import { Notices } from './model/notices';
import { Notifications } from './notifications';
import { LostLocks } from './lostLocks';
import { revealer } from './reveal';
import { StatusBar } from './statusBar';
import { Expansion } from './tree/expansion';
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
  losses: Losses;
  notices: Notices;
  prompts: Prompts;
}

/** Composition root: builds the parts, connects them, and hands every disposable to VS Code. */
export function activate(context: vscode.ExtensionContext): DevserverStagingApi {
  const log = createLog();
  // What the core reports without failing (history it could not write or read) goes to the log.
  const coreWarnings = logCoreWarnings(log);
  // The one source of settings: every part is given it, and reads it when it acts.
  const config = new Configuration();
  const { timing, pollMs, staticDirs } = config.current;
  // Restricted Mode writes nothing, not even the probes that only help judge a lock (core/probes.ts).
  allowProbes(vscode.workspace.isTrusted);
  const trustGranted = vscode.workspace.onDidGrantWorkspaceTrust(() => allowProbes(true));
  // The watches (one per build) live in a thread of their own, out of the host's heap.
  const states = new LockStates(timing, log, { watcher: threadWatcher });
  states.setPolling(pollMs);
  states.scan(staticDirs);
  // The core knows nothing of VS Code's settings: it is told of a change, before anything redraws.
  const statesFollowConfig = config.onDidChange((s) => {
    states.reset(s.timing, s.staticDirs);
    states.setPolling(s.pollMs);
  });
  const prompts = createPrompts(config);
  const losses = new Losses();
  const windowLocks = new WindowLocks(config, log, losses);
  const mine = new Mine(
    (d, t) => windowLocks.leaseOf(d, t),
    () => windowLocks.all,
    (d, t) => windowLocks.placeOf(d, t),
  );
  const expansion = new Expansion(context.workspaceState);
  const tree = new StagingTreeProvider(config, states, mine, expansion);
  const view = vscode.window.createTreeView(VIEW_ID, { treeDataProvider: tree, showCollapseAll: true, canSelectMany: true });
  // Polling (network filesystems) only while someone looks.
  states.setVisible(view.visible);
  const statusBar = new StatusBar(states, mine, config, losses);
  const details = new BuildDetails(states, mine);
  const artifactFiles = new ArtifactFiles(() => config.current.staticDirs);
  const reveal = revealer(tree, view, states, (tag) => log.info(`Cleared the filter to show ${tag}.`));
  const buildsUnder = (staticDir: string, tag: string) => states.buildsUnder(staticDir, tag).flatMap((r) => (r.lock !== undefined ? [r.lock] : []));
  const notices = new Notices();
  const commands: CommandContext = { config, log, prompts, states, windowLocks, mine, notices, tree, reveal, buildsUnder, selection: () => view.selection };
  context.subscriptions.push(
    log,
    coreWarnings,
    config,
    statesFollowConfig,
    trustGranted,
    states,
    tree,
    view,
    statusBar,
    view.onDidChangeVisibility((e) => states.setVisible(e.visible)),
    // Which folders are expanded, for the next time the window opens.
    view.onDidExpandElement(({ element: e }) => {
      if (e.kind === 'folder') expansion.set(e.staticDir, e.tag, true);
    }),
    view.onDidCollapseElement(({ element: e }) => {
      if (e.kind === 'folder') expansion.set(e.staticDir, e.tag, false);
    }),
    new FilterStatus(view, tree),
    details,
    vscode.workspace.registerTextDocumentContentProvider(DETAILS_SCHEME, details),
    artifactFiles,
    vscode.workspace.registerFileSystemProvider(ARTIFACT_SCHEME, artifactFiles, { isReadonly: true, isCaseSensitive: true }),
    // Disposed when the window closes: releases the locks it holds.
    windowLocks,
    losses,
    new LostLocks(losses, prompts, log),
    new Notifications(states, notices, config, prompts, log),
    notices,
    mine,
    windowLocks.onDidChange((ref) => mine.locksChanged(ref)),
    refreshCommand(commands),
    chooseStaticDirCommand(commands),
    removeStaticDirCommand(commands),
    createStaticDirCommand(commands),
    lockForWindowCommand(commands),
    lockWhenFreeCommand(commands),
    notifyWhenFreeCommand(commands),
    stopNotifyingCommand(commands),
    releaseWindowLockCommand(commands),
    reserveCommand(commands),
    extendReservationCommand(commands),
    releaseReservationCommand(commands),
    forceReleaseCommand(commands),
    forceReleaseAllStaleCommand(commands),
    destroyCommand(commands),
    destroyFolderBuildsCommand(commands),
    cleanUpCommand(commands),
    copyPathCommand(commands),
    copyTagCommand(commands),
    openArtifactCommand(commands),
    revealInExplorerCommand(commands),
    openInTerminalCommand(commands),
    showLogCommand(commands),
    filterCommand(commands),
    clearFilterCommand(commands),
    goToBuildCommand(commands),
    showMoreCommand(commands),
    verifyBuildCommand(commands),
    showBuildDetailsCommand(commands),
    showUsageCommand(commands),
    stageBuildCommand(commands),
    addArtifactsCommand(commands),
  );
  log.info(`Activated with ${staticDirs.length} static director${staticDirs.length === 1 ? 'y' : 'ies'}.`);
  return { tree, states, view, windowLocks, statusBar, mine, losses, notices, prompts };
}

export function deactivate(): void {
  // Nothing to do: every disposable is in context.subscriptions.
}
