import * as vscode from 'vscode';
import { detailsUri } from '../details/buildDetails';
import type { Node } from '../tree/provider';
import { registerCommand, type Uses } from './command';
import { targets } from './targets';

/** Opens a build's details (manifest, holder, stagings) as a Markdown preview. */
export function showBuildDetailsCommand(ctx: Uses<'states'>): vscode.Disposable {
  return registerCommand('devserverStaging.showBuildDetails', ctx, async (node?: Node) => {
    const [e] = await targets(ctx, { node, title: vscode.l10n.t('Show the details of which build?'), single: true });
    if (e === undefined) return undefined;
    const uri = detailsUri(e.staticDir, e.tag);
    await vscode.commands.executeCommand('markdown.showPreview', uri);
    return uri;
  });
}
