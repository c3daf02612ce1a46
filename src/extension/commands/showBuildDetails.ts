import * as vscode from 'vscode';
import { openDetails } from '../details/buildDetails';
import type { Node } from '../tree/provider';
import { registerCommand, type Uses } from './command';
import { targets } from './targets';

/** Opens a build's details (manifest, holder, stagings) as a Markdown preview. */
export function showBuildDetailsCommand(ctx: Uses<'states'>): vscode.Disposable {
  return registerCommand('devserverStaging.showBuildDetails', ctx, async (node?: Node) => {
    const [e] = await targets(ctx, { node, title: vscode.l10n.t('Show the details of which build?'), single: true });
    if (e === undefined) return undefined;
    return openDetails(e.staticDir, e.tag);
  });
}
