/**
 * One status-bar item: builds this window holds or stages, and builds held, stale or legacy
 * elsewhere, in words. Hidden while no static directory is configured.
 */
import * as vscode from 'vscode';
import type { Configuration } from './config';
import { literal } from './markdown';
import { formatCount, type AreaRecord, type Counts, type LockStates } from '../core';
import type { Losses } from './model/losses';
import type { Mine } from './model/mine';

/** What the item counts: the builds by lock state, those found damaged, and locks this window lost and was not yet told of. */
export interface StatusCounts extends Counts {
  damaged: number;
  lost: number;
}

export class StatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem('devserverStaging.status', vscode.StatusBarAlignment.Left, 50);
  private readonly subscriptions: vscode.Disposable[];

  constructor(
    private readonly states: LockStates,
    private readonly mine: Mine,
    private readonly config: Pick<Configuration, 'current' | 'onDidChange'>,
    private readonly losses: Pick<Losses, 'all' | 'onDidChange'>,
  ) {
    this.item.name = vscode.l10n.t('Devserver Staging');
    this.item.command = 'devserverStaging.areas.focus';
    this.subscriptions = [
      states.onDidChange(() => this.update()),
      mine.onDidChange(() => this.update()),
      states.onDidList(() => this.update()),
      config.onDidChange(() => this.update()),
      losses.onDidChange(() => this.update()),
    ];
    this.update();
  }

  /** Shown only while a static directory is configured. */
  private get configured(): boolean {
    return this.config.current.staticDirs.length > 0;
  }

  /** What the item shows, and whether it is shown. */
  get text(): string | undefined {
    return this.configured ? this.item.text : undefined;
  }

  /** What a screen reader says of it. */
  get label(): string | undefined {
    return this.configured ? this.item.accessibilityInformation?.label : undefined;
  }

  /** The counts in words: "2 yours, 5 held, 1 stale, 1 damaged"; states nobody is in are left out. */
  static words(c: StatusCounts): string {
    const parts: string[] = [];
    if (c.lost > 0) parts.push(vscode.l10n.t('{0} lost', formatCount(c.lost)));
    if (c.mine > 0) parts.push(vscode.l10n.t('{0} yours', formatCount(c.mine)));
    if (c.held > 0) parts.push(vscode.l10n.t('{0} held', formatCount(c.held)));
    if (c.stale > 0) parts.push(vscode.l10n.t('{0} stale', formatCount(c.stale)));
    if (c.legacy > 0) parts.push(vscode.l10n.t('{0} legacy', formatCount(c.legacy)));
    const locks = parts.length > 0 ? parts.join(', ') : vscode.l10n.t('no locks');
    return c.damaged > 0 ? `${locks}, ${vscode.l10n.t('{0} damaged', formatCount(c.damaged))}` : locks;
  }

  update(): void {
    if (!this.configured) {
      this.item.hide();
      return;
    }
    const isMine = (r: AreaRecord): boolean => this.mine.has(r);
    // What the model keeps locked, and what this window knows it holds or stages: never a pass
    // over every build, of which there may be 100,000.
    const own = this.mine.refs();
    const damaged = this.states.damagedBuilds();
    const lost = this.losses.all;
    const c: StatusCounts = { ...this.states.totals(this.mine), damaged: damaged.length, lost: lost.length };
    const staging = this.mine.stagingCount;
    const icon = staging > 0 ? '$(sync~spin)' : c.lost > 0 ? '$(error)' : c.mine > 0 ? '$(account)' : c.held + c.stale + c.legacy > 0 ? '$(lock)' : '$(unlock)';
    const words = StatusBar.words(c);
    this.item.text = `${icon} ${staging > 0 ? `${vscode.l10n.t('staging {0}', formatCount(staging))} · ` : ''}${words}`;
    const summary = vscode.l10n.t(
      'Devserver Staging: {0} builds; {1} held by you, {2} held by others, {3} stale, {4} legacy locks{5}',
      formatCount(c.builds),
      formatCount(c.mine),
      formatCount(c.held),
      formatCount(c.stale),
      formatCount(c.legacy),
      (c.damaged > 0 ? vscode.l10n.t('; {0} damaged', formatCount(c.damaged)) : '') +
        (c.lost > 0 ? vscode.l10n.t('; {0} lost by this window', formatCount(c.lost)) : '') +
        (staging > 0 ? vscode.l10n.t('; staging {0}', formatCount(staging)) : ''),
    );
    this.item.accessibilityInformation = { label: summary };
    const md = new vscode.MarkdownString(undefined, true);
    md.appendMarkdown(`**${vscode.l10n.t('Devserver Staging')}**\n\n`);
    for (const l of lost) md.appendMarkdown(`$(error) ${literal(vscode.l10n.t('Lost: {0}', l.tag))}  \n`);
    if (staging > 0) md.appendMarkdown(`$(sync~spin) ${vscode.l10n.t('Staging in this window: {0}', formatCount(staging))}  \n`);
    const candidates = new Set(this.states.lockedBuilds());
    for (const ref of own) {
      const r = this.states.record(ref.staticDir, ref.tag);
      if (r?.kind === 'build') candidates.add(r);
    }
    const locked = [...candidates].filter((r) => isMine(r) || (r.lock !== undefined && r.lock.state !== 'free')).sort((a, b) => a.tag.localeCompare(b.tag));
    const mine = locked.filter(isMine);
    const others = locked.filter((r) => !isMine(r));
    md.appendMarkdown(`$(account) ${vscode.l10n.t('Held by you: {0}', formatCount(mine.length))}  \n`);
    for (const r of mine.slice(0, 10)) md.appendMarkdown(`&nbsp;&nbsp;${literal(r.tag)}  \n`);
    md.appendMarkdown(`$(lock) ${vscode.l10n.t('Held by others: {0}', formatCount(c.held))} · $(warning) ${vscode.l10n.t('stale: {0}', formatCount(c.stale))} · ${vscode.l10n.t('legacy: {0}', formatCount(c.legacy))}  \n`);
    for (const r of others.slice(0, 20)) {
      const h = r.lock?.holder;
      const who = h !== undefined ? `${h.user}@${h.hostname}` : r.lock?.legacy !== undefined ? r.lock.legacy.hostname : '';
      // Tags and holders are co-users' words: shown, never read as Markdown.
      md.appendMarkdown(`&nbsp;&nbsp;$(${r.lock?.state === 'stale' ? 'warning' : 'lock'}) ${literal(r.tag)} ${literal(who)} (${r.lock?.state ?? ''})  \n`);
    }
    if (others.length > 20) md.appendMarkdown(vscode.l10n.t('… and {0} more', formatCount(others.length - 20)));
    if (damaged.length > 0) {
      md.appendMarkdown(`\n\n$(error) ${vscode.l10n.t('Damaged: {0}', formatCount(damaged.length))}  \n`);
      for (const r of damaged.slice(0, 10)) md.appendMarkdown(`&nbsp;&nbsp;${literal(r.tag)}  \n`);
    }
    md.appendMarkdown(`\n\n${vscode.l10n.t('{0} builds in all. Click to show the view.', formatCount(c.builds))}`);
    this.item.tooltip = md;
    this.item.show();
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
    this.item.dispose();
  }
}
