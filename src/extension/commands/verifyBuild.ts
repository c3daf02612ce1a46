import * as vscode from 'vscode';
import { IN_EDITOR_MAX_PARSE, formatBytes, formatCount, verify, type VerifyProblem, type VerifyResult } from '../../core';
import type { Log } from '../log';
import type { Prompts } from '../prompts';
import type { Node } from '../tree/provider';
import { registerCommand, type Uses } from './command';
import { targets } from './targets';

/**
 * Problems of one build written to the log, one line each. A build wiped from under its manifest
 * has as many as it has artifacts, and 100,000 lines keep the extension host sending them to the
 * log for seconds after the result is shown; the rest are counted.
 */
const LOGGED_PROBLEMS = 1_000;

/**
 * Verify Build: re-hashes each selected build against its manifest, with progress and Cancel. A
 * build found damaged is marked in the tree until a verification finds it whole again; it only
 * reads, so it takes no lock and never keeps a stager waiting.
 */
export function verifyBuildCommand(ctx: Uses<'states'>): vscode.Disposable {
  const { config, log, prompts, states } = ctx;
  return registerCommand('devserverStaging.verifyBuild', ctx, async (node?: Node, nodes?: Node[]) => {
    const chosen = await targets(ctx, { node, nodes, title: vscode.l10n.t('Verify which builds?') });
    if (chosen.length === 0) return undefined;
    const results: VerifyResult[] = [];
    const cancelled = await prompts.progress({ title: vscode.l10n.t('Verifying'), cancellable: true }, async (report, token) => {
      const abort = new AbortController();
      token.onCancellationRequested(() => abort.abort());
      for (const [i, e] of chosen.entries()) {
        if (abort.signal.aborted) return true;
        let shown = 0;
        const started = Date.now();
        const result = await verify(e.staticDir, e.tag, {
          ...config.current.timing,
          maxParse: IN_EDITOR_MAX_PARSE,
          signal: abort.signal,
          onProgress: (p) => {
            // The bar covers all builds; each build its share by its bytes.
            const part = p.totalBytes > 0 ? p.bytes / p.totalBytes : p.totalFiles > 0 ? p.files / p.totalFiles : 1;
            const pct = ((i + part) / chosen.length) * 100;
            report({ message: `${e.tag}: ${formatBytes(p.bytes)} / ${formatBytes(p.totalBytes)}`, increment: pct - shown });
            shown = pct;
          },
        });
        results.push(result);
        states.markDamaged(e.staticDir, e.tag, result.ok ? undefined : summary(result.problems));
        log.info(`Verified ${e.tag} in ${e.staticDir}: ${result.checkedFiles} files, ${result.checkedBytes} bytes in ${Date.now() - started} ms; ${result.ok ? 'whole' : `${result.problems.length} problems`}.`);
        for (const p of result.problems.slice(0, LOGGED_PROBLEMS)) log.warn(`  ${e.tag}: ${describe(p)}`);
        if (result.problems.length > LOGGED_PROBLEMS) log.warn(`  ${e.tag}: … and ${formatCount(result.problems.length - LOGGED_PROBLEMS)} more problems`);
      }
      return false;
    });
    tell(results, cancelled, ctx);
    return results;
  });
}

function tell(results: readonly VerifyResult[], cancelled: boolean, { log, prompts }: { log: Log; prompts: Prompts }): void {
  const damaged = results.filter((r) => !r.ok);
  const busy = results.filter((r) => r.state !== 'free').map((r) => r.tag);
  const note = busy.length > 0 ? ` ${vscode.l10n.t('{0} was locked while verified: it may be being staged, and the result may change.', busy.join(', '))}` : '';
  const stopped = cancelled ? ` ${vscode.l10n.t('Cancelled before the rest.')}` : '';
  if (damaged.length === 0) {
    const files = results.reduce((n, r) => n + r.checkedFiles, 0);
    const bytes = results.reduce((n, r) => n + r.checkedBytes, 0);
    const what = results.length === 1 ? results[0].tag : vscode.l10n.t('{0} builds', results.length);
    void prompts.notify('info', vscode.l10n.t('{0} is whole: {1} files, {2} match the manifest.', what, formatCount(files), formatBytes(bytes)) + note + stopped);
    return;
  }
  const showLog = vscode.l10n.t('Show Log');
  const first = damaged[0];
  const message =
    damaged.length === 1
      ? vscode.l10n.t('{0} is damaged: {1}', first.tag, summary(first.problems))
      : vscode.l10n.t('{0} of {1} builds are damaged: {2}', damaged.length, results.length, damaged.map((r) => r.tag).join(', '));
  void prompts.notify('warning', message + note + stopped, showLog).then((c) => {
    if (c === showLog) log.show(true);
  });
}

const KIND: Record<VerifyProblem['kind'], () => string> = {
  missing: () => vscode.l10n.t('missing'),
  truncated: () => vscode.l10n.t('truncated'),
  grown: () => vscode.l10n.t('larger than recorded'),
  changed: () => vscode.l10n.t('changed'),
  unlisted: () => vscode.l10n.t('not in the manifest'),
  'not-a-file': () => vscode.l10n.t('not a file'),
  'not-a-link': () => vscode.l10n.t('not a link'),
  unreadable: () => vscode.l10n.t('unreadable'),
};

function describe(p: VerifyProblem): string {
  return `${p.path} ${KIND[p.kind]()}${p.detail !== undefined ? ` (${p.detail})` : ''}`;
}

/** "3 problems: a.bin missing, b.bin changed, …": what the tree and the tooltip say. */
function summary(problems: readonly VerifyProblem[]): string {
  const shown = problems.slice(0, 3).map(describe).join(', ');
  const more = problems.length > 3 ? ', …' : '';
  return problems.length === 1 ? shown : vscode.l10n.t('{0} problems: {1}', formatCount(problems.length), shown + more);
}
