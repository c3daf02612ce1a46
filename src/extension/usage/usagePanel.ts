/**
 * The Show Usage webview: one panel per build or folder, reused when it is asked again (and then
 * drawn anew). It only shows the page `usagePage` makes: no script runs in it, it loads nothing,
 * and it has no command links.
 */
import * as crypto from 'crypto';
import * as vscode from 'vscode';
import { DAY_MS, WEEK_MS, historyStats } from '../../core';
import { rowText } from '../shown';
import { usagePage } from './usagePage';
import { usageWords } from './words';

export const USAGE_VIEW_TYPE = 'devserverStaging.usage';

/** What a page shows: a build (`exact`) or every build below a folder ('' for the whole static directory). */
export interface UsageTarget {
  staticDir: string;
  scope: string;
  exact: boolean;
}

const panels = new Map<string, vscode.WebviewPanel>();

const keyOf = (t: UsageTarget): string => `${t.staticDir}\0${t.scope}\0${t.exact ? 'build' : 'folder'}`;

/** The open usage panels, by what they show: for the integration tests. */
export function openUsagePanels(): ReadonlyMap<string, vscode.WebviewPanel> {
  return panels;
}

/** The page of `target`, computed now from the history on disk. */
export async function renderUsage(target: UsageTarget, warn: (w: Error) => void): Promise<string> {
  const [day, week] = await historyStats(target.staticDir, { ...(target.scope !== '' ? { scope: target.scope } : {}), exact: target.exact, windowsMs: [DAY_MS, WEEK_MS], warn });
  return usagePage({ staticDir: target.staticDir, scope: target.scope, day, week, nonce: crypto.randomBytes(18).toString('base64url').replace(/[^A-Za-z0-9]/g, 'x'), words: usageWords() });
}

/** Shows `target`'s usage in its panel, made or brought forward. */
export async function showUsage(target: UsageTarget, warn: (w: Error) => void): Promise<vscode.WebviewPanel> {
  const html = await renderUsage(target, warn);
  const key = keyOf(target);
  let panel = panels.get(key);
  if (panel === undefined) {
    const name = target.scope === '' ? vscode.l10n.t('every build') : (target.scope.split('/').at(-1) ?? target.scope);
    panel = vscode.window.createWebviewPanel(USAGE_VIEW_TYPE, vscode.l10n.t('Usage: {0}', rowText(name)), vscode.ViewColumn.Active, {
      enableScripts: false,
      enableForms: false,
      enableCommandUris: false,
      localResourceRoots: [],
    });
    panels.set(key, panel);
    const made = panel;
    made.onDidDispose(() => {
      if (panels.get(key) === made) panels.delete(key);
    });
  } else {
    panel.reveal();
  }
  panel.webview.html = html;
  return panel;
}
