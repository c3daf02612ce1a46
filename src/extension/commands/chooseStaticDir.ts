import * as os from 'os';
import * as path from 'path';
import * as vscode from 'vscode';
import { registerCommand, type Uses } from './command';

/** A directory given by a script or test instead of the folder dialog. */
export interface StaticDirArgs {
  dir: string;
}

/**
 * Adds a static directory, picked in a folder dialog, to the settings where the list in force
 * lives (the workspace's if it sets one, else the user's), and checks that it took effect.
 */
export function chooseStaticDirCommand(ctx: Uses): vscode.Disposable {
  const { config, log, prompts } = ctx;
  return registerCommand('devserverStaging.chooseStaticDir', ctx, async (_node?: unknown, _nodes?: unknown, args?: StaticDirArgs) => {
    let dir = args?.dir;
    if (dir === undefined) {
      const picked = await vscode.window.showOpenDialog({
        // Never where the view's selection is (a build): beside the static directories there are.
        defaultUri: vscode.Uri.file(startingPlace(config.current.staticDirs)),
        canSelectFolders: true,
        canSelectFiles: false,
        canSelectMany: false,
        openLabel: vscode.l10n.t('Use as Static Directory'),
        title: vscode.l10n.t('Choose the devserver static directory'),
      });
      dir = picked?.[0]?.fsPath;
    }
    if (dir === undefined) return;
    const wanted = config.expand(dir) ?? dir;
    if (config.current.staticDirs.includes(wanted)) {
      void prompts.notify('info', vscode.l10n.t('{0} is already shown in the Staging Areas view.', wanted));
      return;
    }
    const layer = config.staticDirsLayer();
    await config.writeStaticDirs(layer, [...layer.entries, dir]);
    if (!config.reread().staticDirs.includes(wanted)) {
      throw new Error(vscode.l10n.t('{0} was added to {1}, but the view does not show it: another setting overrides that list. Open the settings to see where devserverStaging.staticDirs is set.', wanted, layer.name));
    }
    log.info(`Added static directory ${wanted} to ${layer.name}.`);
  });
}

/** Where the folder dialog starts: beside the first static directory, else in the workspace, else home. */
function startingPlace(staticDirs: readonly string[]): string {
  if (staticDirs.length > 0) return path.dirname(staticDirs[0]);
  return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? os.homedir();
}
