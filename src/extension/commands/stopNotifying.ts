import * as vscode from 'vscode';
import type { Node } from '../tree/provider';
import { registerCommand, type Uses } from './command';
import { entryOfNode } from './targets';

/** Stop Notifying: takes back the wish to be told when a build is free (the row's, else picked). */
export function stopNotifyingCommand(ctx: Uses<'notices'>): vscode.Disposable {
  const { notices, prompts } = ctx;
  return registerCommand('devserverStaging.stopNotifying', ctx, async (node?: Node) => {
    const row = entryOfNode(node);
    const wishes = notices.wishes();
    const picked = row !== undefined ? [row] : wishes.length <= 1 ? wishes : await prompts.pickMany(wishes.map((w) => ({ label: w.tag, description: w.staticDir, wish: w })), { title: vscode.l10n.t('Stop being told when which builds are free?') }).then((items) => items?.map((i) => i.wish) ?? []);
    for (const w of picked) if (notices.unwish(w)) void prompts.notify('info', vscode.l10n.t('You will not be told when {0} is free.', w.tag));
  });
}
