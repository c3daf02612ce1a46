/**
 * Show Usage: who held and waited for a build, or the builds of a folder, over the last day and
 * week, drawn from the history in a webview. Reading only, so allowed in Restricted Mode.
 */
import * as vscode from 'vscode';
import type { Node } from '../tree/provider';
import { type UsageTarget, showUsage } from '../usage/usagePanel';
import { registerCommand, type Uses } from './command';
import { staticDirOfNode } from './targets';

interface Choice extends vscode.QuickPickItem {
  target: UsageTarget;
}

/** From the palette: every static directory, each folder of builds and each build the view knows. */
function choices(ctx: Uses<'states'>): Choice[] {
  const items: Choice[] = [];
  const folders = new Set<string>();
  for (const staticDir of ctx.config.current.staticDirs) items.push({ label: vscode.l10n.t('Every build'), description: staticDir, target: { staticDir, scope: '', exact: false } });
  for (const r of ctx.states.sortedBuilds()) {
    const e = r.lock;
    if (e === undefined) continue;
    const parts = e.tag.split('/');
    for (let i = 1; i < parts.length; i++) {
      const folder = parts.slice(0, i).join('/');
      const key = `${e.staticDir}\0${folder}`;
      if (folders.has(key)) continue;
      folders.add(key);
      items.push({ label: `${folder}/`, description: e.staticDir, target: { staticDir: e.staticDir, scope: folder, exact: false } });
    }
    items.push({ label: e.tag, description: e.staticDir, target: { staticDir: e.staticDir, scope: e.tag, exact: true } });
  }
  return items;
}

export function showUsageCommand(ctx: Uses<'states'>): vscode.Disposable {
  return registerCommand('devserverStaging.showUsage', ctx, async (node?: Node) => {
    let target: UsageTarget | undefined;
    if (node?.kind === 'build' || node?.kind === 'folder') target = { staticDir: node.entry.staticDir, scope: node.entry.tag, exact: node.kind === 'build' };
    else if (node?.kind === 'staticDir') target = { staticDir: staticDirOfNode(node), scope: '', exact: false };
    else {
      const picked = await ctx.prompts.pickOne(choices(ctx), { title: vscode.l10n.t('Show the usage of which build or folder?'), matchOnDescription: true });
      target = picked?.target;
    }
    if (target === undefined) return undefined;
    ctx.log.info(`Show Usage: ${target.scope === '' ? '(every build)' : target.scope} in ${target.staticDir}`);
    return showUsage(target, (w) => ctx.log.warn(w.message));
  });
}
