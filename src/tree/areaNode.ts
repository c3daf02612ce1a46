/** A subdirectory of a static directory: a board grouping builds, or a build. */
import * as vscode from 'vscode';
import { formatBytes, formatDuration as formatAge, type ListEntry, type LockInfo, type LockState } from '../core';
import type { StaticDirNode } from './staticDirNode';

interface Look {
  icon: string;
  color?: string;
  label: string;
}

/** Icon, colour and words per lock state: the only things that vary by state. */
const LOOKS: Record<LockState, Look> = {
  free: { icon: 'unlock', label: vscode.l10n.t('free') },
  held: { icon: 'lock', color: 'charts.yellow', label: vscode.l10n.t('held') },
  stale: { icon: 'warning', color: 'problemsWarningIcon.foreground', label: vscode.l10n.t('stale') },
  legacy: { icon: 'lock', color: 'charts.purple', label: vscode.l10n.t('legacy lock') },
};

export class AreaNode {
  readonly kind = 'area';

  constructor(
    readonly parent: AreaNode | StaticDirNode,
    public entry: ListEntry,
  ) {}

  get id(): string {
    return `${this.entry.staticDir}\0${this.entry.tag}`;
  }

  /** A short word for who holds it, never anything that changes with the passing of time. */
  description(mine = false): string {
    const e = this.entry;
    if (mine && e.state === 'held') return vscode.l10n.t('held by this window');
    switch (e.state) {
      case 'free':
        return '';
      case 'held':
        return e.holder !== undefined ? `${e.holder.user}@${e.holder.hostname}` : vscode.l10n.t('held');
      case 'stale':
        return e.holder !== undefined ? vscode.l10n.t('stale · {0}@{1}', e.holder.user, e.holder.hostname) : vscode.l10n.t('stale');
      case 'legacy':
        return e.legacy !== undefined ? vscode.l10n.t('legacy lock · {0}', e.legacy.hostname) : vscode.l10n.t('legacy lock');
    }
  }

  /** `mine`: the lock is held by this window, which changes the words and the menu. */
  toTreeItem(mine = false): vscode.TreeItem {
    const e = this.entry;
    const look = LOOKS[e.state];
    const item = new vscode.TreeItem(e.name, vscode.TreeItemCollapsibleState.Collapsed);
    item.id = this.id;
    item.description = this.description(mine);
    item.iconPath = new vscode.ThemeIcon(look.icon, look.color !== undefined ? new vscode.ThemeColor(look.color) : undefined);
    item.contextValue = mine && e.state === 'held' ? 'build.held.mine' : `build.${e.state}`;
    item.resourceUri = vscode.Uri.file(e.dir);
    // The tooltip is filled in on hover (resolveTreeItem), when its ages are current.
    return item;
  }

  /** The tooltip, from `entry` (a judgement fresher than the listing's, on hover) where given. */
  tooltip(contents?: { artifacts: number; bytes: number }, entry: LockInfo = this.entry, now = Date.now()): vscode.MarkdownString {
    const e = entry;
    const md = new vscode.MarkdownString(undefined, true);
    md.appendMarkdown(`**${escape(e.tag)}** — $(${LOOKS[e.state].icon}) ${LOOKS[e.state].label}\n\n`);
    const rows: [string, string][] = [];
    const h = e.holder;
    if (h !== undefined) {
      rows.push([vscode.l10n.t('Holder'), `${h.user}@${h.hostname}, pid ${h.pid}`]);
      rows.push([vscode.l10n.t('Client'), h.clientId]);
      if (h.purpose !== undefined) rows.push([vscode.l10n.t('Purpose'), h.purpose]);
      const acquired = Date.parse(h.acquiredAt);
      if (!Number.isNaN(acquired)) rows.push([vscode.l10n.t('Acquired'), `${new Date(acquired).toLocaleString()} (${formatAge(now - acquired)})`]);
      if (h.fence !== undefined) rows.push([vscode.l10n.t('Fencing token'), String(h.fence)]);
    }
    if (e.unreadable !== undefined) rows.push([vscode.l10n.t('Holder'), e.unreadable]);
    if (e.legacy !== undefined) {
      rows.push([vscode.l10n.t('Holder'), vscode.l10n.t('Python devserver on {0}', e.legacy.hostname) + (e.legacy.pid !== undefined ? `, pid ${e.legacy.pid}` : '')]);
    }
    if (e.heartbeatAgeMs !== undefined && e.state !== 'free') rows.push([vscode.l10n.t('Heartbeat'), vscode.l10n.t('{0} ago', formatAge(e.heartbeatAgeMs))]);
    if (e.holderAlive !== undefined) rows.push([vscode.l10n.t('Process'), e.holderAlive ? vscode.l10n.t('running') : vscode.l10n.t('gone')]);
    if (e.staleReason !== undefined) rows.push([vscode.l10n.t('Why stale'), e.staleReason]);
    if (contents !== undefined) rows.push([vscode.l10n.t('Contents'), vscode.l10n.t('{0} artifacts, {1}', contents.artifacts, formatBytes(contents.bytes))]);
    for (const [k, v] of rows) md.appendMarkdown(`${escape(k)}: ${escape(v)}  \n`);
    md.appendMarkdown('\n');
    md.appendCodeblock(e.dir, 'text');
    return md;
  }
}

function escape(s: string): string {
  return s.replace(/[\\`*_{}[\]()#+!|<>-]/g, '\\$&');
}
