/**
 * What Destroy… and Destroy Builds… share: judging each build afresh, one dialog that says what
 * will happen to each (whose lock breaks), and destroying exactly what the user was told about.
 */
import * as vscode from 'vscode';
import { destroy, inspect, isStagingError, type ListEntry, type LockInfo } from '../core';
import { errorMessage } from '../errors';
import type { Log } from '../log';
import type { Prompts } from '../prompts';
import type { Uses } from './command';
import { holderOf, lockWords, shortHolderOf } from './targets';

/** What judging and destroying use: the window's locks, the settings' timing, the log. */
export type DestroyDeps = Uses<'windowLocks'>;

/** A build as it was when the user was asked. */
export interface Judged {
  staticDir: string;
  tag: string;
  info: LockInfo;
  /** Held by this window: released properly, never broken. */
  mine: boolean;
}

/** Lines of a dialog listed before the rest are summed up as "… and N more". */
const MAX_LINES = 25;

/** Judges each build now: the listing the view shows may be seconds old. */
export async function judge(entries: readonly ListEntry[], deps: DestroyDeps): Promise<Judged[]> {
  const { timing } = deps.config.current;
  return Promise.all(
    entries.map(async (e) => {
      const info = await inspect(e.staticDir, e.tag, timing).catch(() => e as LockInfo);
      return { staticDir: e.staticDir, tag: e.tag, info, mine: info.state === 'held' && deps.windowLocks.has(e.staticDir, e.tag) };
    }),
  );
}

/** A lock that destroying breaks: someone else's that is held, or a legacy one (never taken over). */
const breaks = (j: Judged): boolean => !j.mine && (j.info.state === 'held' || j.info.state === 'legacy');

/** "1 is held by alice@vm, 1 is stale, 1 is held by this window": what is not simply free. */
export function summary(judged: readonly Judged[]): string {
  if (judged.length === 1) {
    const j = judged[0];
    if (j.mine) return vscode.l10n.t('It is held by this window.');
    switch (j.info.state) {
      case 'held':
        return vscode.l10n.t('It is held by {0}.', holderOf(j.info));
      case 'stale':
        return vscode.l10n.t('Its lock is stale (last held by {0}).', holderOf(j.info));
      case 'legacy':
        return vscode.l10n.t('It has a legacy lock of {0}.', holderOf(j.info));
      case 'free':
        return '';
    }
  }
  const parts: string[] = [];
  const count = (n: number, one: string, many: string): void => {
    if (n > 0) parts.push(n === 1 ? one : many);
  };
  const heldBy = new Map<string, number>();
  for (const j of judged) if (!j.mine && j.info.state === 'held') heldBy.set(shortHolderOf(j.info), (heldBy.get(shortHolderOf(j.info)) ?? 0) + 1);
  for (const [who, n] of heldBy) count(n, vscode.l10n.t('1 is held by {0}', who), vscode.l10n.t('{0} are held by {1}', n, who));
  const stale = judged.filter((j) => j.info.state === 'stale').length;
  count(stale, vscode.l10n.t('1 is stale'), vscode.l10n.t('{0} are stale', stale));
  const legacy = judged.filter((j) => j.info.state === 'legacy').length;
  count(legacy, vscode.l10n.t('1 has a legacy lock'), vscode.l10n.t('{0} have legacy locks', legacy));
  const mine = judged.filter((j) => j.mine).length;
  count(mine, vscode.l10n.t('1 is held by this window'), vscode.l10n.t('{0} are held by this window', mine));
  return parts.length > 0 ? `${parts.join(', ')}.` : '';
}

/** One line per build, at most MAX_LINES of them. */
export function lines(judged: readonly Judged[]): string {
  const shown = judged.slice(0, MAX_LINES).map((j) => `${j.tag} — ${lockWords(j.info, j.mine)}`);
  if (judged.length > MAX_LINES) shown.push(vscode.l10n.t('… and {0} more', judged.length - MAX_LINES));
  return shown.join('\n');
}

/**
 * Asks once, naming every build's state; the button says how many locks break. Not skippable
 * when any does: breaking a lock someone else holds is never done without asking.
 */
export async function confirmDestroy(judged: readonly Judged[], question: string, more: string[], button: { plain: string; breaking: (locks: number) => string }, prompts: Prompts): Promise<boolean> {
  const locks = judged.filter(breaks).length;
  const said = summary(judged);
  const detail = [
    lines(judged),
    '',
    vscode.l10n.t('Everything staged there is deleted. This cannot be undone.'),
    ...(locks > 0 ? [locks === 1 ? vscode.l10n.t('Destroying breaks 1 lock: its holder may still be writing, and fails.') : vscode.l10n.t('Destroying breaks {0} locks: their holders may still be writing, and fail.', locks)] : []),
    ...more,
  ].join('\n');
  return prompts.confirm(said === '' ? question : `${question} ${said}`, detail, locks > 0 ? button.breaking(locks) : button.plain, locks === 0);
}

/** The same prompts, but every question is asked even with confirmations off. */
export function alwaysAsking(prompts: Prompts): Prompts {
  return { ...prompts, confirm: (message, detail, button) => prompts.confirm(message, detail, button, false) };
}

/** How destroying one build ended. */
type Outcome = { tag: string; done: true } | { tag: string; done: false; why: string };

/**
 * Destroys the builds as they were shown. A lock is broken (`force`) only where the user saw that
 * same lock; a build that was locked, or whose lock changed hands, after the question is refused.
 */
export async function destroyJudged(judged: readonly Judged[], deps: DestroyDeps): Promise<Outcome[]> {
  const { timing } = deps.config.current;
  const clientId = deps.windowLocks.clientId;
  const outcomes: Outcome[] = [];
  await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: vscode.l10n.t('Destroying'), cancellable: false }, async (progress) => {
    for (const j of judged) {
      progress.report({ message: j.tag, increment: 100 / judged.length });
      const started = Date.now();
      try {
        let force = false;
        if (j.mine) {
          await deps.windowLocks.release(j.staticDir, j.tag);
        } else if (j.info.state !== 'free') {
          const now = await inspect(j.staticDir, j.tag, timing);
          if (now.state !== 'free') {
            if (now.state !== j.info.state || lockKey(now) !== lockKey(j.info)) {
              outcomes.push({ tag: j.tag, done: false, why: vscode.l10n.t('its lock changed after you were asked: now {0}', lockWords(now, false)) });
              continue;
            }
            force = true;
          }
        }
        await destroy(j.staticDir, j.tag, { ...timing, clientId, force });
        deps.log.info(`Destroyed ${j.tag} in ${j.staticDir}${force ? `, breaking the lock of ${holderOf(j.info)}` : ''} (${Date.now() - started} ms).`);
        outcomes.push({ tag: j.tag, done: true });
      } catch (err) {
        if (isStagingError(err, 'ENOENT')) {
          outcomes.push({ tag: j.tag, done: true });
        } else if (isStagingError(err, 'ELOCKED') && err.lock !== undefined) {
          outcomes.push({ tag: j.tag, done: false, why: vscode.l10n.t('it was locked after you were asked: {0}', lockWords(err.lock, false)) });
        } else {
          outcomes.push({ tag: j.tag, done: false, why: errorMessage(err) });
        }
        deps.log.warn(`Did not destroy ${j.tag} in ${j.staticDir}: ${errorMessage(err)}`);
      }
    }
  });
  return outcomes;
}

/** Tells the user about builds that were not destroyed; all destroyed needs no word (the view shows it). */
export function reportDestroyed(outcomes: readonly Outcome[], prompts: Prompts, log: Log): void {
  const failed = outcomes.filter((o): o is Extract<Outcome, { done: false }> => !o.done);
  if (failed.length === 0) return;
  const done = outcomes.length - failed.length;
  const head = outcomes.length === 1 ? vscode.l10n.t('{0} was not destroyed: {1}.', failed[0].tag, failed[0].why) : vscode.l10n.t('Destroyed {0} of {1} builds. Not destroyed: {2}.', done, outcomes.length, failed.map((f) => `${f.tag} (${f.why})`).join('; '));
  const showLog = vscode.l10n.t('Show Log');
  void prompts.notify('warning', head, showLog).then((choice) => {
    if (choice === showLog) log.show(true);
  });
}

/** What tells one lock from another in the same place: its instance, or the legacy lock's file. */
function lockKey(info: LockInfo): string {
  return info.lockId ?? info.holder?.token ?? info.legacy?.pidAndHash ?? '';
}
