/** The words of the Show Usage page, in the user's language. */
import * as vscode from 'vscode';
import { formatDuration } from '../../core';
import type { UsageWords } from './usagePage';

/** Short waits matter ("450 ms"); longer ones as `formatDuration` says them. */
function duration(ms: number): string {
  return ms < 1_000 ? vscode.l10n.t('{0} ms', String(Math.round(ms))) : formatDuration(ms);
}

function tick(ms: number, stepMs: number): string {
  const d = new Date(ms);
  return stepMs < 86_400_000 ? d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' }) : d.toLocaleDateString(undefined, { weekday: 'short', day: 'numeric' });
}

export function usageWords(): UsageWords {
  return {
    title: vscode.l10n.t('Usage of'),
    everything: vscode.l10n.t('every build'),
    lastDay: vscode.l10n.t('Last day'),
    lastWeek: vscode.l10n.t('Last week'),
    totals: (f) => vscode.l10n.t('{0} builds used, {1} holdings, {2} waits ({3} in all)', String(f.builds), String(f.holds), String(f.waits), duration(f.waitedMs)),
    nothing: vscode.l10n.t('No build was held or waited for in this time.'),
    ends: {
      released: vscode.l10n.t('released'),
      destroyed: vscode.l10n.t('destroyed'),
      lost: vscode.l10n.t('lost'),
      'force-released': vscode.l10n.t('force-released'),
      'taken-over': vscode.l10n.t('expired, taken over'),
      unrecorded: vscode.l10n.t('ended, not recorded'),
      open: vscode.l10n.t('still held'),
    },
    waited: vscode.l10n.t('waited'),
    legendWait: vscode.l10n.t('waiting'),
    omitted: (n) => vscode.l10n.t('{0} more not drawn', String(n)),
    tick,
    duration,
    mostContended: vscode.l10n.t('Most contended'),
    longestWaits: vscode.l10n.t('Longest waits'),
    forceReleases: vscode.l10n.t('Force-releases'),
    noneInWindow: vscode.l10n.t('None.'),
    headers: {
      build: vscode.l10n.t('Build'),
      holds: vscode.l10n.t('Holdings'),
      held: vscode.l10n.t('Held'),
      waits: vscode.l10n.t('Waits'),
      waited: vscode.l10n.t('Waited'),
      longest: vscode.l10n.t('Longest wait'),
      who: vscode.l10n.t('Who'),
      gotItAt: vscode.l10n.t('Got it at'),
      when: vscode.l10n.t('When'),
      holder: vscode.l10n.t('Holder'),
      by: vscode.l10n.t('By'),
    },
    time: (ms) => new Date(ms).toLocaleString(),
  };
}
