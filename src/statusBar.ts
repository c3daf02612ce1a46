/**
 * One status-bar item: builds this window holds or stages, and builds held, stale or legacy
 * elsewhere, in words. Hidden while no static directory is configured.
 */
import * as vscode from 'vscode';
import type { Configuration } from './config';
import { literal } from './markdown';
import type { AreaRecord, Counts, LockStates } from './core';
import type { Mine } from './model/mine';

export class StatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem('devserverStaging.status', vscode.StatusBarAlignment.Left, 50);
  private readonly subscriptions: vscode.Disposable[];

  constructor(
    private readonly states: LockStates,
    private readonly mine: Mine,
    private readonly config: Pick<Configuration, 'current' | 'onDidChange'>,
  ) {
    this.item.name = vscode.l10n.t('Devserver Staging');
    this.item.command = 'devserverStaging.areas.focus';
    this.subscriptions = [
      states.onDidChange(() => this.update()),
      mine.onDidChange(() => this.update()),
      states.onDidList(() => this.update()),
      config.onDidChange(() => this.update()),
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

  /** The counts in words: "2 yours, 5 held, 1 stale"; states nobody is in are left out. */
  static words(c: Counts): string {
    const parts: string[] = [];
    if (c.mine > 0) parts.push(vscode.l10n.t('{0} yours', c.mine));
    if (c.held > 0) parts.push(vscode.l10n.t('{0} held', c.held));
    if (c.stale > 0) parts.push(vscode.l10n.t('{0} stale', c.stale));
    if (c.legacy > 0) parts.push(vscode.l10n.t('{0} legacy', c.legacy));
    return parts.length > 0 ? parts.join(', ') : vscode.l10n.t('no locks');
  }

  update(): void {
    if (!this.configured) {
      this.item.hide();
      return;
    }
    const isMine = (r: AreaRecord): boolean => this.mine.has(r, r.lock);
    // What the model keeps locked, and what this window knows it holds or stages: never a pass
    // over every build, of which there may be 100,000.
    const own = this.mine.refs();
    const c = this.states.totals(isMine, own);
    const staging = this.mine.stagingCount;
    const icon = staging > 0 ? '$(sync~spin)' : c.mine > 0 ? '$(account)' : c.held + c.stale + c.legacy > 0 ? '$(lock)' : '$(unlock)';
    const words = StatusBar.words(c);
    this.item.text = `${icon} ${staging > 0 ? `${vscode.l10n.t('staging {0}', staging)} · ` : ''}${words}`;
    const summary = vscode.l10n.t(
      'Devserver Staging: {0} builds; {1} held by you, {2} held by others, {3} stale, {4} legacy locks{5}',
      c.builds,
      c.mine,
      c.held,
      c.stale,
      c.legacy,
      staging > 0 ? vscode.l10n.t('; staging {0}', staging) : '',
    );
    this.item.accessibilityInformation = { label: summary };
    const md = new vscode.MarkdownString(undefined, true);
    md.appendMarkdown(`**${vscode.l10n.t('Devserver Staging')}**\n\n`);
    if (staging > 0) md.appendMarkdown(`$(sync~spin) ${vscode.l10n.t('Staging in this window: {0}', staging)}  \n`);
    const candidates = new Set(this.states.lockedBuilds());
    for (const ref of own) {
      const r = this.states.record(ref.staticDir, ref.tag);
      if (r?.kind === 'build') candidates.add(r);
    }
    const locked = [...candidates].filter((r) => isMine(r) || (r.lock !== undefined && r.lock.state !== 'free')).sort((a, b) => a.tag.localeCompare(b.tag));
    const mine = locked.filter(isMine);
    const others = locked.filter((r) => !isMine(r));
    md.appendMarkdown(`$(account) ${vscode.l10n.t('Held by you: {0}', mine.length)}  \n`);
    for (const r of mine.slice(0, 10)) md.appendMarkdown(`&nbsp;&nbsp;${literal(r.tag)}  \n`);
    md.appendMarkdown(`$(lock) ${vscode.l10n.t('Held by others: {0}', c.held)} · $(warning) ${vscode.l10n.t('stale: {0}', c.stale)} · ${vscode.l10n.t('legacy: {0}', c.legacy)}  \n`);
    for (const r of others.slice(0, 20)) {
      const h = r.lock?.holder;
      const who = h !== undefined ? `${h.user}@${h.hostname}` : r.lock?.legacy !== undefined ? r.lock.legacy.hostname : '';
      // Tags and holders are co-users' words: shown, never read as Markdown.
      md.appendMarkdown(`&nbsp;&nbsp;$(${r.lock?.state === 'stale' ? 'warning' : 'lock'}) ${literal(r.tag)} ${literal(who)} (${r.lock?.state ?? ''})  \n`);
    }
    if (others.length > 20) md.appendMarkdown(vscode.l10n.t('… and {0} more', others.length - 20));
    md.appendMarkdown(`\n\n${vscode.l10n.t('{0} builds in all. Click to show the view.', c.builds)}`);
    this.item.tooltip = md;
    this.item.show();
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
    this.item.dispose();
  }
}
