/**
 * Show Build Details: a readable page of a build, as Markdown in VS Code's preview. What it was
 * staged from, each artifact's size and sha256, when and under which fencing token, who holds it
 * now, and whether a verification found it damaged. A virtual document: nothing is written.
 */
import * as vscode from 'vscode';
import { IN_EDITOR_MAX_PARSE, formatBytes, formatCount, formatDuration, history, isStagingError, keyOf, readBuildArtifacts, type HistoryEvent, type LockStates, type ManifestEntry } from '../../core';
import { errorMessage } from '../errors';
import type { Mine } from '../model/mine';
import { codeSpan, literal as md } from '../markdown';
import { summarize } from './summary';

export const DETAILS_SCHEME = 'devserver-staging-build';

/** More rows than this make a page nobody reads; the rest are counted. */
const MAX_ROWS = 2_000;

/**
 * The page's address. Its name is what the preview's tab shows ("Preview …"): the build's name and
 * "build details", not a file name ending in .md (the page is Markdown by its language, set on open).
 */
export function detailsUri(staticDir: string, tag: string): vscode.Uri {
  const name = tag.slice(tag.lastIndexOf('/') + 1);
  return vscode.Uri.from({ scheme: DETAILS_SCHEME, path: `/${vscode.l10n.t('{0} (build details)', name)}`, query: new URLSearchParams({ staticDir, tag }).toString() });
}

/** Opens a build's page in the Markdown preview. */
export async function openDetails(staticDir: string, tag: string): Promise<vscode.Uri> {
  const uri = detailsUri(staticDir, tag);
  const doc = await vscode.workspace.openTextDocument(uri);
  if (doc.languageId !== 'markdown') await vscode.languages.setTextDocumentLanguage(doc, 'markdown');
  await vscode.commands.executeCommand('markdown.showPreview', uri);
  return uri;
}

export class BuildDetails implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly _onDidChange = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this._onDidChange.event;
  private readonly open = new Map<string, vscode.Uri>();
  /**
   * Each open page as last rendered whole, by the build's key: given while it is rendered again
   * (a manifest of thousands and the history take seconds), so that the page never goes blank.
   * Kept here alone; a change of the build or a closed page drops it.
   */
  private readonly pages = new Map<string, { text: string; fresh: boolean }>();
  private readonly rendering = new Set<string>();
  private readonly subscriptions: vscode.Disposable[];

  constructor(
    private readonly states: LockStates,
    private readonly mine: Mine,
  ) {
    this.subscriptions = [
      // A page open while its build changes follows it.
      states.onDidChange((changes) => {
        for (const c of changes) {
          const key = keyOf(c.staticDir, c.tag);
          const uri = this.open.get(key);
          if (uri === undefined) continue;
          const page = this.pages.get(key);
          if (page !== undefined) page.fresh = false;
          this._onDidChange.fire(uri);
        }
      }),
      // A page closed for good is forgotten. (Setting its language to Markdown closes and opens it again.)
      vscode.workspace.onDidCloseTextDocument((doc) => {
        if (doc.uri.scheme !== DETAILS_SCHEME) return;
        const uri = doc.uri.toString();
        setTimeout(() => {
          if (!vscode.workspace.textDocuments.some((d) => d.uri.toString() === uri)) this.pages.delete(keyOfUri(doc.uri));
        }, 1_000);
      }),
      // A page rendered before VS Code had opened its document: its change went unheard. Told again.
      vscode.workspace.onDidOpenTextDocument((doc) => {
        if (doc.uri.scheme !== DETAILS_SCHEME) return;
        const page = this.pages.get(keyOfUri(doc.uri));
        if (page?.fresh === true && page.text !== doc.getText()) this._onDidChange.fire(doc.uri);
      }),
    ];
  }

  /**
   * The page as rendered last (or, the first time, its heading and a line saying it is being
   * read) at once; a fresh rendering is made meanwhile and the page is told to change when it is.
   */
  provideTextDocumentContent(uri: vscode.Uri): string {
    const q = new URLSearchParams(uri.query);
    const staticDir = q.get('staticDir') ?? '';
    const tag = q.get('tag') ?? '';
    const key = keyOf(staticDir, tag);
    this.open.set(key, uri);
    const page = this.pages.get(key);
    if (page?.fresh === true) return page.text;
    if (!this.rendering.has(key)) {
      this.rendering.add(key);
      void this.render(staticDir, tag)
        .catch((err: unknown) => `# ${md(tag)}\n\n> ${md(errorMessage(err))}\n`)
        .then((text) => {
          this.rendering.delete(key);
          if (!this.open.has(key)) return;
          this.pages.set(key, { text, fresh: true });
          this._onDidChange.fire(uri);
        });
    }
    return page?.text ?? [`# ${md(tag)}`, '', codeSpan(`${staticDir}/${tag}`), '', vscode.l10n.t('Reading the lock, the manifest and the history…'), ''].join('\n');
  }

  async render(staticDir: string, tag: string): Promise<string> {
    const lines: string[] = [`# ${md(tag)}`, '', codeSpan(`${staticDir}/${tag}`), ''];
    const r = this.states.record(staticDir, tag);
    const judgedAt = Date.now();
    const info = await this.states.judge(staticDir, tag).catch(() => r?.lock);
    const rows: [string, string][] = [];
    if (info !== undefined) {
      const mine = this.mine.has({ staticDir, tag, lock: info, judgedAt: info === r?.lock ? r.judgedAt : judgedAt });
      const state = mine ? vscode.l10n.t('held by you') : info.state === 'free' ? vscode.l10n.t('free') : info.state;
      rows.push([vscode.l10n.t('Lock'), state]);
      const h = info.holder;
      if (h !== undefined && info.state !== 'free') {
        rows.push([vscode.l10n.t('Holder'), `${h.user}@${h.hostname}, pid ${h.pid} (${h.clientId})`]);
        if (h.purpose !== undefined) rows.push([info.reservation !== undefined ? vscode.l10n.t('Note') : vscode.l10n.t('Purpose'), h.purpose]);
        rows.push([vscode.l10n.t('Acquired'), new Date(h.acquiredAt).toLocaleString()]);
        if (info.reservation !== undefined) {
          const until = new Date(Date.parse(info.reservation.until)).toLocaleString();
          rows.push([vscode.l10n.t('Reserved until'), info.reservation.ended ? vscode.l10n.t('{0} (ended)', until) : until]);
          rows.push([vscode.l10n.t('Reserved by'), info.reservation.mine === true ? vscode.l10n.t('you') : info.reservation.ownerUid !== undefined ? vscode.l10n.t('user id {0}', String(info.reservation.ownerUid)) : '?']);
        }
        if (h.fence !== undefined) rows.push([vscode.l10n.t('Fencing token'), String(h.fence)]);
      }
      if (info.legacy !== undefined) rows.push([vscode.l10n.t('Holder'), vscode.l10n.t('Python devserver on {0}', info.legacy.hostname)]);
      if (info.staleReason !== undefined) rows.push([vscode.l10n.t('Why stale'), info.staleReason]);
    }
    if (r?.damaged !== undefined) rows.push([vscode.l10n.t('Verification'), `⚠ ${r.damaged}`]);
    let entries: ManifestEntry[] = [];
    let problem: string | undefined;
    try {
      // From the build the core opened: a link swapped in for it, or for a folder above it, is
      // never followed out of the static directory.
      entries = await readBuildArtifacts(staticDir, tag, undefined, { maxParse: IN_EDITOR_MAX_PARSE });
    } catch (err) {
      if (!isStagingError(err, 'ENOMANIFEST')) problem = errorMessage(err);
    }
    const summary = await summarize(entries, MAX_ROWS);
    rows.push([vscode.l10n.t('Artifacts'), vscode.l10n.t('{0} ({1})', formatCount(summary.count), formatBytes(summary.bytes))]);
    lines.push(`| | |`, `|---|---|`, ...rows.map(([k, v]) => `| ${md(k)} | ${md(v)} |`), '');
    if (problem !== undefined) lines.push(`> ${md(problem)}`, '');
    for (const line of await historySection(staticDir, tag)) lines.push(line);
    if (entries.length === 0 && problem === undefined) {
      lines.push(vscode.l10n.t('No manifest: this build was not staged by Devserver Staging, so there are no recorded sizes or hashes.'), '');
      return lines.join('\n');
    }
    lines.push(`## ${vscode.l10n.t('Stagings')}`, '', `| ${vscode.l10n.t('Fencing token')} | ${vscode.l10n.t('Staged at')} | ${vscode.l10n.t('Artifacts')} | ${vscode.l10n.t('Size')} |`, '|---|---|---|---|');
    for (const s of summary.stagings) {
      lines.push(`| ${s.fence ?? '—'} | ${new Date(s.latest).toLocaleString()} | ${formatCount(s.count)} | ${formatBytes(s.bytes)} |`);
    }
    lines.push('', `## ${vscode.l10n.t('Artifacts')}`, '', `| ${vscode.l10n.t('Artifact')} | ${vscode.l10n.t('Size')} | sha256 | ${vscode.l10n.t('Source')} | ${vscode.l10n.t('Staged at')} | ${vscode.l10n.t('Token')} |`, '|---|--:|---|---|---|--:|');
    for (const e of summary.first) {
      lines.push(`| ${md(e.name)}${e.type === 'symlink' ? ` → ${md(e.linkTarget ?? '')}` : ''} | ${formatBytes(e.size)} | \`${e.sha256}\` | ${md(e.source)} | ${new Date(e.stagedAt).toLocaleString()} | ${e.fence ?? '—'} |`);
    }
    if (summary.count > MAX_ROWS) lines.push('', vscode.l10n.t('… and {0} more artifacts.', formatCount(summary.count - MAX_ROWS)));
    return lines.join('\n');
  }

  dispose(): void {
    for (const d of this.subscriptions) d.dispose();
    this._onDidChange.dispose();
  }
}

function keyOfUri(uri: vscode.Uri): string {
  const q = new URLSearchParams(uri.query);
  return keyOf(q.get('staticDir') ?? '', q.get('tag') ?? '');
}

/** Rows of history shown: the newest. */
const HISTORY_ROWS = 50;

/** Who held the build and what happened to it, newest first, from the core's history. */
async function historySection(staticDir: string, tag: string): Promise<string[]> {
  const events = await history(staticDir, { tag, limit: HISTORY_ROWS }).catch(() => [] as HistoryEvent[]);
  if (events.length === 0) return [];
  const out = [`## ${vscode.l10n.t('History')}`, '', `| ${vscode.l10n.t('When')} | ${vscode.l10n.t('What')} | ${vscode.l10n.t('Who')} | ${vscode.l10n.t('Details')} | ${vscode.l10n.t('Token')} |`, '|---|---|---|---|--:|'];
  for (const e of [...events].reverse()) {
    const who = `${e.holder.user}@${e.holder.hostname}, pid ${e.holder.pid}`;
    const details: string[] = [];
    if (e.heldMs !== undefined) details.push(vscode.l10n.t('held {0}', formatDuration(e.heldMs)));
    if (e.waitedMs !== undefined && e.waitedMs > 0) details.push(vscode.l10n.t('waited {0}', formatDuration(e.waitedMs)));
    if (e.previous !== undefined) details.push(vscode.l10n.t('from {0}', `${e.previous.user ?? '?'}@${e.previous.hostname ?? '?'}`));
    if (e.artifacts !== undefined) details.push(vscode.l10n.t('{0} artifacts, {1}', formatCount(e.artifacts), formatBytes(e.bytes ?? 0)));
    if (e.ok !== undefined) details.push(e.ok ? vscode.l10n.t('whole') : vscode.l10n.t('{0} problems', e.problems ?? 0));
    if (e.reason !== undefined) details.push(e.reason);
    if (e.reservedUntil !== undefined) details.push(vscode.l10n.t('until {0}', new Date(Date.parse(e.reservedUntil)).toLocaleString()));
    if (e.holder.purpose !== undefined) details.push(e.holder.purpose);
    out.push(`| ${new Date(e.time).toLocaleString()} | ${e.kind} | ${md(who)} | ${md(details.join('; '))} | ${e.fence ?? '—'} |`);
  }
  if (events.length === HISTORY_ROWS) out.push('', vscode.l10n.t('The newest {0} events.', HISTORY_ROWS));
  out.push('');
  return out;
}
