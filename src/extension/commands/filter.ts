import * as vscode from 'vscode';
import { FILTER_STATES, isActive, NO_FILTER, type BuildFilter, type FilterState } from '../model/view';
import { stateWord } from '../tree/filterStatus';
import { registerCommand, type Uses } from './command';

/**
 * Filters the builds shown: words of the tag and any of the states. One quick pick does both:
 * what is typed is the text, what is ticked the states. A script or test passes the filter.
 */
export function filterCommand(ctx: Uses<'tree'>): vscode.Disposable {
  const { log, tree } = ctx;
  return registerCommand('devserverStaging.filter', ctx, async (given?: Partial<BuildFilter>) => {
    if (given !== undefined && (typeof given.text === 'string' || Array.isArray(given.states))) {
      tree.setFilter(checked(given));
      return;
    }
    const current = tree.currentFilter;
    const pick = vscode.window.createQuickPick<{ label: string; state: FilterState }>();
    pick.title = vscode.l10n.t('Filter Builds');
    pick.placeholder = vscode.l10n.t('Type words of the tag; tick states to show only those; Enter to apply');
    pick.canSelectMany = true;
    pick.matchOnDescription = false;
    // Always shown: what is typed is the filter's text, not a search among these.
    pick.items = FILTER_STATES.map((s) => ({ label: stateWord(s), state: s, alwaysShow: true }));
    pick.selectedItems = pick.items.filter((i) => current.states.includes(i.state));
    pick.value = current.text;
    const chosen = await new Promise<BuildFilter | undefined>((resolve) => {
      pick.onDidAccept(() => {
        resolve({ text: pick.value.trim(), states: pick.selectedItems.map((i) => i.state) });
        pick.hide();
      });
      pick.onDidHide(() => resolve(undefined));
      pick.show();
    });
    pick.dispose();
    if (chosen === undefined) return;
    tree.setFilter(chosen);
    log.info(isActive(chosen) ? `Filter: "${chosen.text}" ${chosen.states.join(', ')}` : 'Filter cleared.');
  });
}

export function clearFilterCommand(ctx: Uses<'tree'>): vscode.Disposable {
  const { tree } = ctx;
  return registerCommand('devserverStaging.clearFilter', ctx, () => tree.setFilter(NO_FILTER));
}

function checked(given: Partial<BuildFilter>): BuildFilter {
  const states = (given.states ?? []).filter((s): s is FilterState => (FILTER_STATES as readonly string[]).includes(s));
  return { text: typeof given.text === 'string' ? given.text.trim() : '', states };
}
