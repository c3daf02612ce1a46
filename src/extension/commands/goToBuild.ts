import * as vscode from 'vscode';
import { formatCount } from '../../core';
import { registerCommand, type Uses } from './command';

/** Finds a build among every build of every static directory, and shows it in the view. */
export function goToBuildCommand(ctx: Uses<'states' | 'mine' | 'reveal'>): vscode.Disposable {
  const { prompts, states, mine, reveal } = ctx;
  return registerCommand('devserverStaging.goToBuild', ctx, async (args?: unknown) => {
    // A script names the build; from the view's title bar VS Code passes the selected row, which
    // names nothing to go to: the user is asked, as from the palette.
    let target = isTarget(args) ? args : undefined;
    if (target === undefined) {
      const all = states.sortedBuilds();
      if (all.length === 0) {
        void prompts.notify('info', vscode.l10n.t('No builds are known yet: add a static directory with staged builds first.'));
        return;
      }
      const many = new Set(all.map((r) => r.staticDir)).size > 1;
      const items = all.map((r) => {
        const e = r.lock;
        const who = mine.has(r) ? vscode.l10n.t('held by you') : e?.holder !== undefined && e.state !== 'free' ? `${e.state} · ${e.holder.user}@${e.holder.hostname}` : e !== undefined && e.state !== 'free' ? e.state : '';
        return { label: r.tag, description: [who, r.damaged !== undefined ? vscode.l10n.t('damaged') : ''].filter((w) => w !== '').join(' · '), ...(many ? { detail: r.staticDir } : {}), ref: { staticDir: r.staticDir, tag: r.tag } };
      });
      const chosen = await prompts.pickOne(items, { title: vscode.l10n.t('Go to Build'), placeHolder: vscode.l10n.t('Type part of a tag ({0} builds)', formatCount(all.length)), matchOnDescription: true });
      if (chosen === undefined) return;
      target = chosen.ref;
    }
    const r = states.record(target.staticDir, target.tag);
    if (r === undefined || r.kind !== 'build') throw new Error(vscode.l10n.t('{0} is not a build the view knows in {1}.', target.tag, target.staticDir));
    const node = await reveal(r.staticDir, r.tag, { focus: true, always: true });
    if (node === undefined) throw new Error(vscode.l10n.t('{0} is not a build the view knows in {1}.', target.tag, target.staticDir));
    return node;
  });
}

/** A build named by a caller, `{ staticDir, tag }`: not a row of the view (which has a `kind`). */
function isTarget(v: unknown): v is { staticDir: string; tag: string } {
  if (typeof v !== 'object' || v === null || 'kind' in v) return false;
  const t = v as { staticDir?: unknown; tag?: unknown };
  return typeof t.staticDir === 'string' && typeof t.tag === 'string';
}
