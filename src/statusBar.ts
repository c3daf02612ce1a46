/**
 * One status-bar item: the locks this window holds, and the builds held or stale in the
 * directories shown. Hidden while no static directory is configured.
 */
import * as vscode from 'vscode';
import type { LockStates } from './state';
import type { WindowLocks } from './windowLocks';

export class StatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem('devserverStaging.status', vscode.StatusBarAlignment.Left, 50);
  private readonly subscriptions: vscode.Disposable[];
  private configured: boolean;
  private staging = 0;

  constructor(
    private readonly states: LockStates,
    private readonly windowLocks: WindowLocks,
    staticDirs: readonly string[],
  ) {
    this.item.name = vscode.l10n.t('Devserver Staging');
    this.item.command = 'devserverStaging.areas.focus';
    this.configured = staticDirs.length > 0;
    this.subscriptions = [states.onDidChange(() => this.update()), windowLocks.onDidChange(() => this.update()), states.onDidList(() => this.update())];
    states.scan(staticDirs);
    this.update();
  }

  /** Shows a spinner while `work` (a staging) runs. */
  async busy<T>(work: Promise<T>): Promise<T> {
    this.staging++;
    this.update();
    try {
      return await work;
    } finally {
      this.staging--;
      this.update();
    }
  }

  /** What the item shows, and whether it is shown. */
  get text(): string | undefined {
    return this.configured ? this.item.text : undefined;
  }

  setStaticDirs(dirs: readonly string[]): void {
    this.configured = dirs.length > 0;
    this.states.scan(dirs);
    this.update();
  }

  update(): void {
    if (!this.configured) {
      this.item.hide();
      return;
    }
    const mine = this.windowLocks.all;
    const others = this.states.locked().filter((e) => (e.state === 'held' || e.state === 'stale') && !this.windowLocks.has(e.staticDir, e.tag));
    const stale = others.filter((e) => e.state === 'stale').length;
    const spinner = this.staging > 0 ? '$(sync~spin) ' : '';
    this.item.text = `${spinner}$(lock) ${mine.length} · ${others.length}${stale > 0 ? ` $(warning) ${stale}` : ''}`;
    const md = new vscode.MarkdownString(undefined, true);
    md.appendMarkdown(`**${vscode.l10n.t('Devserver Staging')}**\n\n`);
    if (this.staging > 0) md.appendMarkdown(`$(sync~spin) ${vscode.l10n.t('Staging: {0}', this.staging)}  \n`);
    md.appendMarkdown(`${vscode.l10n.t('Held by this window: {0}', mine.length)}  \n`);
    for (const l of mine) md.appendMarkdown(`$(lock) ${l.tag}  \n`);
    md.appendMarkdown(`${vscode.l10n.t('Held or stale elsewhere: {0}', others.length)}  \n`);
    for (const e of others.slice(0, 20)) {
      const who = e.holder !== undefined ? `${e.holder.user}@${e.holder.hostname}` : '';
      md.appendMarkdown(`$(${e.state === 'stale' ? 'warning' : 'lock'}) ${e.tag} ${who}  \n`);
    }
    if (others.length > 20) md.appendMarkdown(vscode.l10n.t('… and {0} more', others.length - 20));
    this.item.tooltip = md;
    this.item.show();
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
    this.item.dispose();
  }
}
