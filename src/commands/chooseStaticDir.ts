import * as vscode from 'vscode';
import { SECTION } from '../config';
import type { Log } from '../log';
import { registerCommand } from './command';

/** Adds a static directory, picked in a folder dialog, to the user's settings. */
export function chooseStaticDirCommand(log: Log): vscode.Disposable {
  return registerCommand('devserverStaging.chooseStaticDir', log, async () => {
    const picked = await vscode.window.showOpenDialog({
      canSelectFolders: true,
      canSelectFiles: false,
      canSelectMany: false,
      openLabel: vscode.l10n.t('Use as Static Directory'),
      title: vscode.l10n.t('Choose the devserver static directory'),
    });
    const dir = picked?.[0]?.fsPath;
    if (dir === undefined) return;
    const config = vscode.workspace.getConfiguration(SECTION);
    const current = config.get<string[]>('staticDirs', []);
    if (!current.includes(dir)) await config.update('staticDirs', [...current, dir], vscode.ConfigurationTarget.Global);
    log.info(`Added static directory ${dir}`);
  });
}
