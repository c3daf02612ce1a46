import * as vscode from 'vscode';
import { formatBytes, formatDuration, parseDuration, prune, type PruneResult } from '../../core';
import { errorMessage } from '../errors';
import { dialogDetail } from '../prompts';
import type { Node } from '../tree/provider';
import { registerCommand, type Uses } from './command';
import { entryOfNode, holderOf, locate, staticDirOfNode } from './targets';

/** Where to clean up, named by a script, a test or an error message's button instead of a row. */
export interface CleanUpArgs {
  /** A path inside a configured static directory: its static directory is cleaned up. */
  path?: string;
  /** The answers to the two questions, for scripts and tests. */
  keep?: number;
  olderThanMs?: number;
}

type Candidate = PruneResult['removed'][number];
type Skipped = PruneResult['skipped'][number];

/** Lines of the preview listed before the rest are summed up as "… and N more". */
const MAX_LINES = 20;

function listed<T>(items: readonly T[], line: (item: T) => string): string[] {
  const lines = items.slice(0, MAX_LINES).map(line);
  if (items.length > MAX_LINES) lines.push(vscode.l10n.t('… and {0} more', items.length - MAX_LINES));
  return lines;
}

/** Why a build goes, from the rules that chose it. */
function reasonOf(c: Candidate, keep: number | undefined, now: number): string {
  const why: string[] = [];
  if (c.rules.includes('keep') && keep !== undefined) why.push(vscode.l10n.t('not among the {0} most recently used', keep));
  if (c.rules.includes('older-than')) why.push(vscode.l10n.t('last used {0} ago', formatDuration(now - c.lastUsedMs)));
  return why.join(vscode.l10n.t(' and '));
}

/** Why a chosen build stays: whose lock is on it. */
function keptBecause(s: Skipped): string {
  const lock = s.lock;
  if (lock !== undefined && s.state === 'held') return vscode.l10n.t('held by {0}', holderOf(lock));
  if (lock !== undefined && s.state === 'stale') return vscode.l10n.t('its lock is stale (last held by {0}): kept in case its holder comes back', holderOf(lock));
  if (lock !== undefined && s.state === 'legacy') return vscode.l10n.t('legacy lock of {0}', holderOf(lock));
  return s.skippedBecause;
}

/**
 * Removes the least recently used builds of a static directory (or of a folder in it): asks how
 * many to keep and/or how old is too old, shows what would go (with sizes, reasons, and the builds
 * that stay because they are locked), and on confirmation runs the core's prune, which never
 * removes a locked build. The preview is a promise: if the choice changed meanwhile (a build
 * staged, another aged), the new choice is shown before anything is removed.
 */
export function cleanUpCommand(ctx: Uses<'windowLocks'>): vscode.Disposable {
  const { config, log, prompts, windowLocks } = ctx;
  return registerCommand('devserverStaging.cleanUp', ctx, async (node?: Node, _nodes?: Node[], args: CleanUpArgs = {}) => {
    const title = vscode.l10n.t('Clean Up');
    let scope: { staticDir: string; tag: string } | undefined;
    if (args.path !== undefined) {
      const at = locate(config.current.staticDirs, args.path);
      if (at !== undefined) scope = { staticDir: at.staticDir, tag: '' };
    } else if (node !== undefined) scope = { staticDir: staticDirOfNode(node), tag: entryOfNode(node)?.tag ?? '' };
    else {
      const dirs = config.current.staticDirs;
      if (dirs.length === 0) throw new Error(vscode.l10n.t('No static directory is configured. Add one first (Devserver Staging: Add Static Directory…).'));
      const picked = dirs.length === 1 ? dirs[0] : (await prompts.pickOne(dirs.map((d) => ({ label: d })), { title, placeHolder: vscode.l10n.t('Clean up which static directory?') }))?.label;
      if (picked !== undefined) scope = { staticDir: picked, tag: '' };
    }
    if (scope === undefined) return undefined;
    const { staticDir, tag } = scope;
    const where = tag === '' ? staticDir : tag;

    let keep = args.keep;
    let olderThan = args.olderThanMs;
    if (keep === undefined && olderThan === undefined) {
      const keepText = await prompts.input({
        title: `${title}: ${where}`,
        // Counted over the whole of where it runs: a static directory's row counts across its folders.
        prompt:
          tag === ''
            ? vscode.l10n.t('Keep how many of the most recently used builds of the whole static directory, counted across all its folders (to keep some in each folder, use Clean Up… on each folder instead)? Leave it empty to keep any number, and give an age next.')
            : vscode.l10n.t('Keep how many of the most recently used builds in {0}? Leave it empty to keep any number, and give an age next.', tag),
        placeHolder: vscode.l10n.t('for example 10'),
        validateInput: (v) => (v.trim() === '' || /^\d+$/.test(v.trim()) ? undefined : vscode.l10n.t('A whole number of builds, such as 10, or nothing.')),
      });
      if (keepText === undefined) return undefined;
      keep = keepText.trim() === '' ? undefined : Number(keepText.trim());
      const noKeep = keep === undefined;
      const ageText = await prompts.input({
        title: `${title}: ${where}`,
        prompt: noKeep
          ? vscode.l10n.t('Remove builds not used for how long? For example 30d, 12h or 90m.')
          : vscode.l10n.t('Also remove builds not used for how long? For example 30d, 12h or 90m; leave it empty for no age limit.'),
        placeHolder: '30d',
        validateInput: (v) => {
          if (v.trim() === '') return noKeep ? vscode.l10n.t('Give an age, such as 30d (or press Escape and give a number to keep).') : undefined;
          return parseDuration(v) === undefined ? vscode.l10n.t('An age with its unit, such as 30d, 12h, 90m or 1d12h: a bare number could mean seconds or days.') : undefined;
        },
      });
      if (ageText === undefined) return undefined;
      olderThan = ageText.trim() === '' ? undefined : parseDuration(ageText);
    }
    const options = { ...config.current.timing, ...(keep !== undefined ? { keep } : {}), ...(olderThan !== undefined ? { olderThan } : {}), ...(tag !== '' ? { subpath: tag } : {}), clientId: windowLocks.clientId };
    const measure = (): Thenable<PruneResult> =>
      prompts.progress({ title: vscode.l10n.t('Looking at the builds in {0}…', where) }, () => prune(staticDir, { ...options, dryRun: true }));

    let preview = await measure();
    let confirmed = false;
    /** The builds the last question named, as it named them: only those may go, each only as it was. */
    let shown: Candidate[] = [];
    for (let round = 0; round < 3 && !confirmed; round++) {
      if (preview.removed.length === 0) {
        const kept = preview.skipped.length > 0 ? ` ${vscode.l10n.t('Beyond those limits but locked, so kept: {0}.', preview.skipped.map((s) => `${s.tag} (${keptBecause(s)})`).join('; '))}` : '';
        void prompts.notify('info', vscode.l10n.t('Nothing to clean up in {0}: no build is beyond those limits.', where) + kept);
        return undefined;
      }
      const now = Date.now();
      const n = preview.removed.length;
      const detail = dialogDetail([
        ...listed(preview.removed, (c) => `${c.tag} — ${formatBytes(c.bytes)} — ${reasonOf(c, keep, now)}`),
        ...(preview.skipped.length > 0 ? ['', vscode.l10n.t('Kept, because they are locked:'), ...listed(preview.skipped, (s) => `${s.tag} — ${keptBecause(s)}`)] : []),
        '',
        vscode.l10n.t('Locked builds are never removed. Everything staged in the others is deleted; this cannot be undone.'),
      ]);
      log.info(`Clean up ${where} in ${staticDir} would remove: ${preview.removed.map((c) => `${c.tag} (${formatBytes(c.bytes)})`).join(', ')}; keep, locked: ${preview.skipped.map((s) => s.tag).join(', ') || 'none'}.`);
      const changed = round > 0 ? `${vscode.l10n.t('The builds to remove changed while you were asked.')} ` : '';
      const ok = await prompts.confirm(
        changed + (n === 1 ? vscode.l10n.t('Remove 1 build from {0} and free {1}?', where, formatBytes(preview.bytes)) : vscode.l10n.t('Remove {0} builds from {1} and free {2}?', n, where, formatBytes(preview.bytes))),
        detail,
        n === 1 ? vscode.l10n.t('Remove 1 Build') : vscode.l10n.t('Remove {0} Builds', n),
        // The preview is the point of this command: shown even with confirmations off.
        false,
      );
      if (!ok) return undefined;
      // Chosen again just before removing: a choice that grew since is asked about afresh.
      shown = preview.removed;
      const again = await prune(staticDir, { ...options, dryRun: true });
      const names = new Set(shown.map((c) => c.tag));
      confirmed = again.removed.every((c) => names.has(c.tag));
      preview = again;
    }
    if (!confirmed) {
      void prompts.notify('warning', vscode.l10n.t('The builds to remove in {0} kept changing while you were asked; nothing was removed. Try again.', where));
      return undefined;
    }

    const started = Date.now();
    // The core removes only what was shown, each only while it is still free and unused since.
    const expect = shown.map((c) => ({ tag: c.tag, lastUsedMs: c.lastUsedMs }));
    const result = await prompts.progress({ title: vscode.l10n.t('Cleaning up {0}', where) }, () => prune(staticDir, { ...options, expect }));
    log.info(
      `Cleaned up ${where} in ${staticDir} in ${Date.now() - started} ms: removed ${result.removed.map((c) => c.tag).join(', ') || 'nothing'} (${formatBytes(result.bytes)}); ` +
        `kept ${result.skipped.map((s) => `${s.tag} (${keptBecause(s)})`).join(', ') || 'nothing'}; failed ${result.failed.map((f) => `${f.tag} (${f.error.message})`).join(', ') || 'nothing'}.`,
    );
    const locked = result.skipped.filter((s) => s.unshown !== true);
    const changed = result.skipped.filter((s) => s.unshown === true);
    const parts = [
      result.removed.length === 1 ? vscode.l10n.t('Removed 1 build from {0} ({1}).', where, formatBytes(result.bytes)) : vscode.l10n.t('Removed {0} builds from {1} ({2}).', result.removed.length, where, formatBytes(result.bytes)),
      ...(locked.length > 0 ? [vscode.l10n.t('Kept, because locked: {0}.', locked.map((s) => `${s.tag} (${keptBecause(s)})`).join('; '))] : []),
      ...(changed.length > 0 ? [vscode.l10n.t('Kept, because they changed after you were asked: {0}.', changed.map((s) => `${s.tag} (${keptBecause(s)})`).join('; '))] : []),
      ...(result.failed.length > 0 ? [vscode.l10n.t('Failed: {0}.', result.failed.map((f) => `${f.tag} (${errorMessage(f.error)})`).join('; '))] : []),
    ];
    const showLog = vscode.l10n.t('Show Log');
    void prompts.notify(result.failed.length > 0 ? 'warning' : 'info', parts.join(' '), showLog).then((choice) => {
      if (choice === showLog) log.show(true);
    });
    return result;
  });
}
