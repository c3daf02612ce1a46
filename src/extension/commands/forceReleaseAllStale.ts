import * as vscode from 'vscode';
import { formatDuration, forceRelease, inspect, shownLock } from '../../core';
import { errorMessage } from '../errors';
import type { Node } from '../tree/provider';
import { dialogDetail } from '../prompts';
import { registerCommand, type Uses } from './command';
import { describeLock } from './forceRelease';
import { buildsAmong, entryOfNode, lockWords, shortHolderOf, staticDirOfNode } from './targets';

/**
 * Force-releases the stale locks of the builds the view knows (below a static directory or folder
 * when started from its row): a quick pick of them, all ticked, then one question, then each lock
 * judged once more and broken only if it is still the stale one that was shown.
 */
export function forceReleaseAllStaleCommand(ctx: Uses<'buildsUnder' | 'windowLocks'>): vscode.Disposable {
  const { config, log, prompts, windowLocks, buildsUnder } = ctx;
  return registerCommand('devserverStaging.forceReleaseAllStale', ctx, async (node?: Node) => {
    const scopes = node !== undefined ? [{ staticDir: staticDirOfNode(node), tag: entryOfNode(node)?.tag ?? '' }] : config.current.staticDirs.map((d) => ({ staticDir: d, tag: '' }));
    const known = scopes.flatMap((s) => buildsUnder(s.staticDir, s.tag)).filter((e) => e.state === 'stale');
    const t = config.current.timing;
    // Judged now: the view's listing may be older than a holder's return.
    const stale = (await Promise.all(buildsAmong(known).map((e) => inspect(e.staticDir, e.tag, t).catch(() => e)))).filter((e) => e.state === 'stale');
    if (stale.length === 0) {
      void prompts.notify('info', vscode.l10n.t('No build has a stale lock.'));
      return;
    }
    const items = stale.map((e) => ({
      label: e.tag,
      description: vscode.l10n.t('stale · {0}', shortHolderOf(e)),
      detail: [
        e.heartbeatAgeMs !== undefined ? vscode.l10n.t('last heartbeat {0} ago', formatDuration(e.heartbeatAgeMs)) : undefined,
        e.holderAlive === false ? vscode.l10n.t('its process is gone') : e.holderAlive === undefined ? vscode.l10n.t('on another machine') : undefined,
        e.staticDir,
      ]
        .filter((s) => s !== undefined)
        .join(' · '),
      picked: true,
      entry: e,
    }));
    const picked = await prompts.pickMany(items, { title: vscode.l10n.t('Force-release which stale locks?'), placeHolder: vscode.l10n.t('Untick the builds to leave alone'), matchOnDescription: true, matchOnDetail: true });
    if (picked === undefined || picked.length === 0) return;
    const chosen = picked.map((p) => p.entry);
    const ok = await prompts.confirm(
      chosen.length === 1 ? vscode.l10n.t('Force-release the stale lock on {0}?', chosen[0].tag) : vscode.l10n.t('Force-release {0} stale locks?', chosen.length),
      dialogDetail([...chosen.map(describeLock), '', vscode.l10n.t('A holder that comes back finds its lock gone; what it staged meanwhile is not kept.')]),
      chosen.length === 1 ? vscode.l10n.t('Force Release') : vscode.l10n.t('Force Release {0}', chosen.length),
    );
    if (!ok) return;
    const released: string[] = [];
    const left: string[] = [];
    for (const e of chosen) {
      try {
        const now = await inspect(e.staticDir, e.tag, config.current.timing);
        if (now.state !== 'stale' || now.lockId !== e.lockId) {
          left.push(vscode.l10n.t('{0} (now {1})', e.tag, lockWords(now, windowLocks.has(e.staticDir, e.tag))));
          continue;
        }
        // That very instance: a holder that took it over since is never the one broken.
        const { state: _state, ...instance } = shownLock(e);
        await forceRelease(e.staticDir, e.tag, { ...t, clientId: windowLocks.clientId, expect: instance });
        log.info(`Force-released the stale lock on ${e.tag} in ${e.staticDir}, last held by ${shortHolderOf(e)}.`);
        released.push(e.tag);
      } catch (err) {
        left.push(`${e.tag} (${errorMessage(err)})`);
        log.warn(`Could not force-release ${e.tag} in ${e.staticDir}: ${errorMessage(err)}`);
      }
    }
    const head = released.length === 1 ? vscode.l10n.t('Force-released the stale lock on {0}.', released[0]) : vscode.l10n.t('Force-released {0} stale locks.', released.length);
    if (left.length === 0) void prompts.notify('info', head);
    else void prompts.notify('warning', `${head} ${vscode.l10n.t('Left alone: {0}.', left.join('; '))}`);
  });
}
