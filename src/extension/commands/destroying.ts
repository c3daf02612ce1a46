/**
 * What Destroy… and Destroy Builds… share: judging each build afresh, one dialog that says what
 * will happen to each (whose lock breaks), and destroying exactly what the user was told about:
 * each build's lock as the dialog named it goes to the core, which refuses one that changed, and
 * the user is asked afresh about those.
 */
import * as vscode from 'vscode';
import { destroy, formatCount, inspect, isStagingError, shownLock, type ListEntry, type LockInfo } from '../../core';
import { errorMessage } from '../errors';
import type { Log } from '../log';
import { dialogDetail, type Prompts } from '../prompts';
import type { Uses } from './command';
import { leaseOn } from './forceRelease';
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
async function judge(entries: readonly ListEntry[], deps: DestroyDeps): Promise<Judged[]> {
  const { timing } = deps.config.current;
  return Promise.all(
    entries.map(async (e) => {
      const info = await inspect(e.staticDir, e.tag, timing).catch(() => e as LockInfo);
      return { staticDir: e.staticDir, tag: e.tag, info, mine: info.state === 'held' && leaseOn(deps.windowLocks, info) !== undefined };
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
export function lines(judged: readonly Judged[]): string[] {
  const shown = judged.slice(0, MAX_LINES).map((j) => `${j.tag} — ${lockWords(j.info, j.mine)}`);
  if (judged.length > MAX_LINES) shown.push(vscode.l10n.t('… and {0} more', judged.length - MAX_LINES));
  return shown;
}

/**
 * Asks once, naming every build's state; the button says how many locks break. Not skippable
 * when any does: breaking a lock someone else holds is never done without asking.
 */
export async function confirmDestroy(judged: readonly Judged[], question: string, more: string[], button: { plain: string; breaking: (locks: number) => string }, prompts: Prompts): Promise<boolean> {
  const locks = judged.filter(breaks).length;
  const said = summary(judged);
  const detail = dialogDetail([
    ...lines(judged),
    '',
    vscode.l10n.t('Everything staged there is deleted. This cannot be undone.'),
    ...(locks > 0 ? [locks === 1 ? vscode.l10n.t('Destroying breaks 1 lock: its holder may still be writing, and fails.') : vscode.l10n.t('Destroying breaks {0} locks: their holders may still be writing, and fail.', locks)] : []),
    ...more,
  ]);
  return prompts.confirm(said === '' ? question : `${question} ${said}`, detail, locks > 0 ? button.breaking(locks) : button.plain, locks === 0);
}

/** The question asked afresh about builds whose locks changed while the user was asked. */
export function askedAgain(judged: readonly Judged[]): string {
  const n = judged.length;
  return n === 1
    ? `${vscode.l10n.t('Its lock changed while you were asked.')} ${vscode.l10n.t('Destroy {0}?', judged[0].tag)}`
    : `${vscode.l10n.t('Their locks changed while you were asked.')} ${vscode.l10n.t('Destroy {0} builds?', n)}`;
}

/** The same prompts, but every question is asked even with confirmations off. */
export function alwaysAsking(prompts: Prompts): Prompts {
  return { ...prompts, confirm: (message, detail, button) => prompts.confirm(message, detail, button, false) };
}

/** How destroying one build ended; `now`: the lock found there instead of the one the dialog named. */
type Outcome = { tag: string; done: true } | { tag: string; done: false; why: string; now?: LockInfo };

/** Questions asked about builds whose locks kept changing before the command gives up on them. */
const ROUNDS = 3;

/**
 * Destroys the builds as they were shown. Each build's lock as the dialog named it (none, or one
 * instance in one state) goes to the core, which breaks (`force`) only that lock and refuses when
 * another is there: a build locked, or whose lock changed hands, after the question is left.
 */
async function destroyJudged(judged: readonly Judged[], deps: DestroyDeps): Promise<Outcome[]> {
  const { timing } = deps.config.current;
  const clientId = deps.windowLocks.clientId;
  const outcomes: Outcome[] = [];
  await deps.prompts.progress({ title: vscode.l10n.t('Destroying') }, async (report) => {
    for (const j of judged) {
      report({ message: j.tag, increment: 100 / judged.length });
      const started = Date.now();
      const force = !j.mine && j.info.state !== 'free';
      try {
        // This window's own lock is let go of properly; what was shown is then a free build.
        if (j.mine) await deps.windowLocks.release(j.staticDir, j.tag);
        await destroy(j.staticDir, j.tag, { ...timing, clientId, force, expect: j.mine ? { state: 'free' } : shownLock(j.info) });
        deps.log.info(`Destroyed ${j.tag} in ${j.staticDir}${force ? `, breaking the lock of ${holderOf(j.info)}` : ''} (${Date.now() - started} ms).`);
        outcomes.push({ tag: j.tag, done: true });
      } catch (err) {
        if (isStagingError(err, 'ENOENT')) {
          outcomes.push({ tag: j.tag, done: true });
        } else if (isStagingError(err, 'ELOCKED') && err.lock !== undefined) {
          const why = j.info.state === 'free' || j.mine ? vscode.l10n.t('it was locked after you were asked: {0}', lockWords(err.lock, false)) : vscode.l10n.t('its lock changed after you were asked: now {0}', lockWords(err.lock, false));
          outcomes.push({ tag: j.tag, done: false, why, ...(err.changed === true && err.lock.dir === j.info.dir ? { now: err.lock } : {}) });
        } else {
          outcomes.push({ tag: j.tag, done: false, why: errorMessage(err) });
        }
        deps.log.warn(`Did not destroy ${j.tag} in ${j.staticDir}: ${errorMessage(err)}`);
      }
    }
  });
  return outcomes;
}

/**
 * Judges the builds, asks (`ask`), destroys what the user agreed to, and asks afresh about the
 * builds whose lock changed in between, naming the lock there now (`again`: such a question is
 * asked even with confirmations off). Undefined when the first question was declined.
 */
export async function askAndDestroy(builds: readonly ListEntry[], ask: (judged: readonly Judged[], again: boolean) => Promise<boolean>, deps: DestroyDeps): Promise<Outcome[] | undefined> {
  const outcomes: Outcome[] = [];
  let todo = await judge(builds, deps);
  let changed = new Map<string, Outcome>();
  for (let round = 0; round < ROUNDS && todo.length > 0; round++) {
    if (!(await ask(todo, round > 0))) {
      if (round === 0) return undefined;
      break;
    }
    const got = await destroyJudged(todo, deps);
    changed = new Map();
    for (const o of got) {
      if (!o.done && o.now !== undefined) changed.set(o.tag, o);
      else outcomes.push(o);
    }
    todo = todo.filter((j) => changed.has(j.tag)).map((j) => ({ staticDir: j.staticDir, tag: j.tag, info: (changed.get(j.tag) as { now: LockInfo }).now, mine: false }));
  }
  // Those asked about afresh and declined: as the last try found them.
  for (const j of todo) outcomes.push(changed.get(j.tag)!);
  return outcomes;
}

/** Tells the user how destroying went: what was destroyed, and what was not and why. */
export function reportDestroyed(outcomes: readonly Outcome[], prompts: Prompts, log: Log): void {
  const failed = outcomes.filter((o): o is Extract<Outcome, { done: false }> => !o.done);
  if (failed.length === 0) {
    if (outcomes.length > 0) void prompts.notify('info', outcomes.length === 1 ? vscode.l10n.t('Destroyed {0}.', outcomes[0].tag) : vscode.l10n.t('Destroyed {0} builds.', formatCount(outcomes.length)));
    return;
  }
  const done = outcomes.length - failed.length;
  const head = outcomes.length === 1 ? vscode.l10n.t('{0} was not destroyed: {1}.', failed[0].tag, failed[0].why) : vscode.l10n.t('Destroyed {0} of {1} builds. Not destroyed: {2}.', done, outcomes.length, failed.map((f) => `${f.tag} (${f.why})`).join('; '));
  const showLog = vscode.l10n.t('Show Log');
  void prompts.notify('warning', head, showLog).then((choice) => {
    if (choice === showLog) log.show(true);
  });
}
