import * as vscode from 'vscode';
import type { Node } from '../tree/provider';
import { registerCommand, type Uses } from './command';
import type { FolderArgs } from './destroyFolderBuilds';
import { alwaysAsking, askAndDestroy, askedAgain, confirmDestroy, reportDestroyed } from './destroying';
import { entryOf, type BuildArgs } from './forceRelease';
import { buildsAmong, selectedEntries, targets } from './targets';

/** What the Delete key passes (keybindings give no row): act on the view's selection. */
export interface SelectionArgs {
  selection: true;
}

const isSelectionArgs = (a: unknown): a is SelectionArgs => typeof a === 'object' && a !== null && (a as SelectionArgs).selection === true;

/**
 * Removes builds after one modal that names each one's lock: whose, stale, legacy, this window's.
 * If any is held by someone else, the question says so, its button says how many locks break, and
 * it is asked even with confirmations off. Folders are not destroyed here (Destroy Builds… is).
 */
export function destroyCommand(ctx: Uses<'states' | 'windowLocks' | 'selection'>): vscode.Disposable {
  const { config, log, prompts, states } = ctx;
  return registerCommand('devserverStaging.destroy', ctx, async (node?: Node | SelectionArgs, nodes?: Node[], args?: BuildArgs) => {
    const fromKey = isSelectionArgs(node);
    // The Delete key acts on the selected builds and folders only, never on a question.
    const chosen = fromKey
      ? selectedEntries(states, undefined, ctx.selection())
      : args !== undefined
        ? [await entryOf(states, args, config.current.timing)]
        : await targets(ctx, { node, nodes, title: vscode.l10n.t('Destroy which builds?') });
    if (chosen.length === 0) return;
    const builds = buildsAmong(chosen);
    const folders = chosen.filter((e) => e.kind === 'folder');
    if (builds.length === 0) {
      // The Delete key on a folder: its own command, which says how many builds go.
      if (folders.length === 1) {
        const folder: FolderArgs = { staticDir: folders[0].staticDir, tag: folders[0].tag, ...(fromKey ? { alwaysAsk: true } : {}) };
        return vscode.commands.executeCommand('devserverStaging.destroyFolderBuilds', undefined, undefined, folder);
      }
      if (folders.length > 0) void prompts.notify('info', vscode.l10n.t('Folders are not destroyed with Destroy…: use Destroy Builds… on a folder to remove the builds in it.'));
      return undefined;
    }
    const more = folders.length > 0 ? [vscode.l10n.t('Not destroyed: {0} (folders; use Destroy Builds… on a folder).', folders.map((f) => f.tag).join(', '))] : [];
    const outcomes = await askAndDestroy(builds, (judged, again) => {
      const n = judged.length;
      return confirmDestroy(
        judged,
        again ? askedAgain(judged) : n === 1 ? vscode.l10n.t('Destroy {0}?', judged[0].tag) : vscode.l10n.t('Destroy {0} builds?', n),
        again ? [] : more,
        {
          plain: n === 1 ? vscode.l10n.t('Destroy') : vscode.l10n.t('Destroy {0} Builds', n),
          breaking: (locks) =>
            n === 1 ? vscode.l10n.t('Destroy, Breaking the Lock') : locks === 1 ? vscode.l10n.t('Destroy {0}, Breaking 1 Lock', n) : vscode.l10n.t('Destroy {0}, Breaking {1} Locks', n, locks),
        },
        // The Delete key acts on the selection, which need not be the row the keyboard is on, and
        // a lock nobody was shown is never broken unasked: always ask.
        fromKey || again ? alwaysAsking(prompts) : prompts,
      );
    }, ctx);
    if (outcomes !== undefined) reportDestroyed(outcomes, prompts, log);
    return undefined;
  });
}
