/**
 * What Stage Build and Add Artifacts share: asking for sources, and running the core's stage()
 * with progress, a working Cancel, and a word with the user on a conflict.
 */
import * as vscode from 'vscode';
import { formatBytes, formatCount, isStagingError, stage, type StageProgress, type StageResult } from '../../core';
import { errorMessage } from '../errors';
import { dialogDetail, type Prompts } from '../prompts';
import type { Uses } from './command';

/** Arguments a script or test can pass instead of answering the pickers. */
export interface StagingArgs {
  staticDir?: string;
  tag?: string;
  sources?: string[];
  overwrite?: boolean;
  /** Aborts the staging as the Cancel button does. */
  signal?: AbortSignal;
}

/** Asks where the artifacts come from: a folder, files, an archive or a URL. */
export async function pickSources(prompts: Prompts, title: string): Promise<string[] | undefined> {
  const kinds = [
    { label: vscode.l10n.t('Folder…'), iconPath: new vscode.ThemeIcon('folder'), source: 'folder' as const, detail: vscode.l10n.t('Copy a directory of artifacts') },
    { label: vscode.l10n.t('Files…'), iconPath: new vscode.ThemeIcon('files'), source: 'files' as const, detail: vscode.l10n.t('Copy one or more files') },
    { label: vscode.l10n.t('Archive…'), iconPath: new vscode.ThemeIcon('file-zip'), source: 'archive' as const, detail: vscode.l10n.t('Unpack a .tar, .tar.gz, .tar.xz or .zip') },
    { label: vscode.l10n.t('URL…'), iconPath: new vscode.ThemeIcon('globe'), source: 'url' as const, detail: vscode.l10n.t('Download over http(s); archives are unpacked') },
  ];
  const kind = (await prompts.pickOne(kinds, { title, placeHolder: vscode.l10n.t('Where do the artifacts come from?') }))?.source;
  if (kind === undefined) return undefined;
  if (kind === 'url') {
    const url = await prompts.input({
      title,
      prompt: vscode.l10n.t('An http(s) URL of a file or an archive'),
      placeHolder: 'https://example.com/builds/R120/image.tar.xz',
      validateInput: (v) => (/^https?:\/\/\S+$/.test(v.trim()) ? undefined : vscode.l10n.t('Give an http:// or https:// URL.')),
    });
    return url === undefined ? undefined : [url.trim()];
  }
  const picked = await vscode.window.showOpenDialog({
    title,
    canSelectFolders: kind === 'folder',
    canSelectFiles: kind !== 'folder',
    canSelectMany: kind === 'files',
    openLabel: vscode.l10n.t('Stage'),
    ...(kind === 'archive' ? { filters: { [vscode.l10n.t('Archives')]: ['tar', 'gz', 'tgz', 'xz', 'txz', 'zip'] } } : {}),
  });
  return picked?.map((u) => u.fsPath);
}

const isUrl = (source: string): boolean => /^https?:\/\//i.test(source);

/** "image.bin (1.2 MiB / 2.0 MiB, 60%)", or without total and percentage where none is known. */
export function progressMessage(p: StageProgress, total: number | undefined, done: number): string {
  const size = total !== undefined && total > 0 ? `${formatBytes(done)} / ${formatBytes(total)}, ${Math.min(100, Math.floor((100 * done) / total))}%` : formatBytes(done);
  return `${p.artifact || '…'} (${size})`;
}

/**
 * Stages `sources` into the area with progress and Cancel; offers Overwrite on a conflict. Once
 * done, the build is revealed in the view and the message offers to show it again.
 */
export async function runStaging(
  what: { staticDir: string; tag: string; add: boolean; sources: string[]; overwrite?: boolean; signal?: AbortSignal },
  deps: Uses<'windowLocks' | 'mine' | 'reveal'>,
): Promise<StageResult | undefined> {
  const { staticDir, tag, add, sources } = what;
  const started = Date.now();
  /** Time a question was open: not part of how long staging took. */
  let asking = 0;
  // A single download: the server's Content-Length is the total, when it sent one.
  const oneDownload = sources.length === 1 && isUrl(sources[0]);
  const title = add ? vscode.l10n.t('Adding artifacts to {0}', tag) : vscode.l10n.t('Staging {0}', tag);
  const attempt = (overwrite: boolean): Promise<StageResult> =>
    deps.prompts.progress({ title, cancellable: true }, (report, token) => {
      const abort = new AbortController();
      token.onCancellationRequested(() => abort.abort());
      what.signal?.addEventListener('abort', () => abort.abort(), { once: true });
      if (what.signal?.aborted === true) abort.abort();
      let reported = 0;
      return deps.mine.track({ staticDir, tag }, (mark) =>
        stage(staticDir, tag, sources, {
          ...deps.config.current.timing,
          add,
          overwrite,
          signal: abort.signal,
          clientId: deps.windowLocks.clientId,
          purpose: vscode.l10n.t('staging from VS Code'),
          onProgress: (p) => {
            let total = p.totalBytes;
            let done = p.bytes;
            if (total === undefined && oneDownload && p.downloadTotal !== undefined) {
              // As received from the server: an archive's unpacked size is not known up front.
              total = p.downloadTotal;
              done = p.downloadBytes ?? 0;
            }
            const pct = total !== undefined && total > 0 ? Math.min(100, (100 * done) / total) : undefined;
            report({ message: progressMessage(p, total, done), ...(pct !== undefined && pct > reported ? { increment: pct - reported } : {}) });
            mark(pct !== undefined ? pct / 100 : undefined);
            if (pct !== undefined && pct > reported) reported = pct;
          },
        }),
      );
    });
  // A cancelled staging changed nothing: said, since the progress notification just goes.
  const cancelled = (err: unknown): never => {
    if (isStagingError(err, 'ECANCELED')) {
      void deps.prompts.notify('info', add ? vscode.l10n.t('Adding artifacts to {0} was cancelled; the build is as it was.', tag) : vscode.l10n.t('Staging {0} was cancelled; no build was created.', tag));
    }
    throw err;
  };
  let result: StageResult;
  try {
    result = await attempt(what.overwrite === true);
  } catch (err) {
    if (!(isStagingError(err) && err.code === 'ECONFLICT') || what.overwrite !== undefined) cancelled(err);
    const asked = Date.now();
    const ok = await deps.prompts.confirm(errorMessage(err), dialogDetail([vscode.l10n.t('Nothing was changed. Overwrite replaces the artifacts that differ.')]), vscode.l10n.t('Overwrite'), false);
    asking += Date.now() - asked;
    if (!ok) return undefined;
    result = await Promise.resolve(attempt(true)).catch(cancelled);
  }
  const secs = ((Date.now() - started - asking) / 1000).toFixed(1);
  const summary = vscode.l10n.t('{0}: {1} added, {2} unchanged, {3} replaced ({4}) in {5} s.', tag, formatCount(result.added.length), formatCount(result.skipped.length), formatCount(result.replaced.length), formatBytes(result.bytes), secs);
  deps.log.info(`Staged ${sources.join(', ')} into ${tag} in ${staticDir}: ${summary}`);
  void deps.reveal(staticDir, tag).catch((err: unknown) => deps.log.warn(`Could not reveal ${tag}: ${String(err)}`));
  const reveal = vscode.l10n.t('Reveal');
  void deps.prompts.notify('info', summary, reveal).then(async (choice) => {
    if (choice !== reveal) return;
    await vscode.commands.executeCommand('devserverStaging.areas.focus');
    await deps.reveal(staticDir, tag);
  });
  return result;
}
