import * as vscode from 'vscode';
import { detailsUri } from '../details/buildDetails';
import type { Log } from '../log';
import type { LockStates } from '../core';
import type { Node } from '../tree/provider';
import { registerCommand } from './command';
import { targets } from './targets';

/** Opens a build's details (manifest, holder, stagings) as a Markdown preview. */
export function showBuildDetailsCommand(states: LockStates, log: Log): vscode.Disposable {
  return registerCommand('devserverStaging.showBuildDetails', log, async (node?: Node) => {
    const [e] = await targets(states, { node, title: vscode.l10n.t('Show the details of which build?'), single: true });
    if (e === undefined) return undefined;
    const uri = detailsUri(e.staticDir, e.tag);
    await vscode.commands.executeCommand('markdown.showPreview', uri);
    return uri;
  });
}
