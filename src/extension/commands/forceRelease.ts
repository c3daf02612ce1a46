import * as vscode from 'vscode';
import { forceRelease, formatDuration, inspect, isStagingError, shownLock, type Lease, type ListEntry, type LockInfo, type LockStates, type Timing } from '../../core';
import { dialogDetail } from '../prompts';
import type { Node } from '../tree/provider';
import type { WindowLocks } from '../windowLocks';
import { registerCommand, type Uses } from './command';
import { holderOf, targets } from './targets';

/** A build named by a script, a test or an error message's button instead of a row. */
export interface BuildArgs {
  staticDir: string;
  tag: string;
}

/** Questions asked about locks that kept changing before the command gives up. */
const ROUNDS = 3;

/** What the user must know before breaking a lock: who, since when, and whether they still run. */
export function describeLock(e: LockInfo): string {
  if (e.reservation !== undefined) {
    // A person's, not a process's: whether some process runs says nothing about it.
    const note = e.holder?.purpose !== undefined ? `, ${e.holder.purpose}` : '';
    const until = new Date(Date.parse(e.reservation.until)).toLocaleString();
    const when = e.reservation.ended ? vscode.l10n.t('its reservation ended at {0}', until) : vscode.l10n.t('reserved until {0}', until);
    return `${e.tag}: ${holderOf(e)}${note}, ${when}. ${vscode.l10n.t('A reservation is held for a person, who may still be using the build.')}`;
  }
  const purpose = e.holder?.purpose !== undefined ? `, ${e.holder.purpose}` : '';
  const age = e.ageMs !== undefined ? vscode.l10n.t(', taken {0} ago', formatDuration(e.ageMs)) : '';
  const beat = e.heartbeatAgeMs !== undefined ? vscode.l10n.t(', last heartbeat {0} ago', formatDuration(e.heartbeatAgeMs)) : '';
  const alive =
    e.commandAlive === true && e.command !== undefined
      ? vscode.l10n.t('Its process is gone, but the command it ran (pid {0}) is still running.', String(e.command.pid))
      : e.holderAlive === true
        ? vscode.l10n.t('Its process is still running.')
        : e.holderAlive === false
          ? vscode.l10n.t('Its process is gone.')
          : vscode.l10n.t('Its process is on another machine and cannot be checked.');
  return `${e.tag}: ${holderOf(e)}${purpose}${age}${beat}. ${alive}`;
}

/** The entry of a build named by its tag: as the view knows it, else judged now. */
export async function entryOf(states: LockStates, args: BuildArgs, timing: Timing): Promise<ListEntry> {
  return states.entry(args.staticDir, args.tag) ?? { name: args.tag.split('/').pop() ?? args.tag, kind: 'build', ...(await inspect(args.staticDir, args.tag, timing)) };
}

/** This window's lease on a lock, if the lock is that lease's instance (its token): never a lock another took since. */
export function leaseOn(windowLocks: Pick<WindowLocks, 'lease'>, lock: LockInfo): Lease | undefined {
  const lease = windowLocks.lease(lock.staticDir, lock.tag);
  return lease !== undefined && lock.holder !== undefined && lease.holder.token === lock.holder.token ? lease : undefined;
}

/**
 * Removes other holders' locks, after a modal that names each holder. Each lock is removed only
 * if it is still the instance the modal named: one that changed meanwhile (another holder took
 * over) is left, and asked about afresh.
 */
export function forceReleaseCommand(ctx: Uses<'states' | 'windowLocks'>): vscode.Disposable {
  const { config, log, prompts, states, windowLocks } = ctx;
  return registerCommand('devserverStaging.forceRelease', ctx, async (node?: Node, nodes?: Node[], args?: BuildArgs) => {
    const picked = args !== undefined ? [await entryOf(states, args, config.current.timing)] : await targets(ctx, { node, nodes, title: vscode.l10n.t('Force-release which locks?'), only: ['held', 'stale', 'legacy'] });
    // Judged again: the question must name the lock as it is now.
    let chosen: LockInfo[] = (await Promise.all(picked.map(async (e) => ({ ...e, ...(await inspect(e.staticDir, e.tag, config.current.timing).catch(() => e)) })))).filter((e) => e.state !== 'free');
    if (chosen.length === 0) {
      if (picked.length > 0) void prompts.notify('info', picked.length === 1 ? vscode.l10n.t('{0} is not locked any more.', picked[0].tag) : vscode.l10n.t('None of them is locked any more.'));
      return;
    }
    for (let round = 0; round < ROUNDS; round++) {
      const changedNote = round > 0 ? `${vscode.l10n.t('The lock changed while you were asked.')} ` : '';
      const ok = await prompts.confirm(
        changedNote + (chosen.length === 1 ? vscode.l10n.t('Force-release the lock on {0}?', chosen[0].tag) : vscode.l10n.t('Force-release {0} locks?', chosen.length)),
        dialogDetail([...chosen.map(describeLock), '', vscode.l10n.t('A holder that is still working loses its lock and may leave a half-staged build.')]),
        vscode.l10n.t('Force Release'),
        // A lock nobody was shown is never broken unasked.
        round === 0,
      );
      if (!ok) return;
      const changed: LockInfo[] = [];
      for (const e of chosen) {
        // A lock of this window's own is released properly rather than broken.
        if (leaseOn(windowLocks, e) !== undefined) {
          await windowLocks.release(e.staticDir, e.tag);
          continue;
        }
        const { state: _state, ...instance } = shownLock(e);
        try {
          const was = await forceRelease(e.staticDir, e.tag, { ...config.current.timing, clientId: windowLocks.clientId, expect: instance });
          log.info(`Force-released ${e.tag} in ${e.staticDir}, held by ${holderOf(was)}.`);
        } catch (err) {
          if (!(isStagingError(err, 'ELOCKED') && err.changed === true && err.lock !== undefined)) throw err;
          log.info(`Did not force-release ${e.tag} in ${e.staticDir}: its lock changed after the question (now ${holderOf(err.lock)}).`);
          changed.push(err.lock);
        }
      }
      if (changed.length === 0) return;
      chosen = changed;
    }
    void prompts.notify('warning', vscode.l10n.t('The locks kept changing while you were asked; the last ones shown were not released: {0}.', chosen.map((e) => e.tag).join(', ')));
  });
}
