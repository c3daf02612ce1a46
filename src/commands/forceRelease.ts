import * as vscode from 'vscode';
import { describeHolder, formatDuration, forceRelease, type ListEntry, type Timing } from '../core';
import type { Log } from '../log';
import type { Prompts } from '../prompts';
import type { LockStates } from '../model/lockStates';
import type { Node } from '../tree/provider';
import type { WindowLocks } from '../windowLocks';
import { registerCommand } from './command';
import { targets } from './targets';

/** What the user must know before breaking a lock: who, since when, and whether they still run. */
export function describeLock(e: ListEntry): string {
  const who = describeHolder(e);
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
  return `${e.tag}: ${who}${age}${beat}. ${alive}`;
}

/** Removes other holders' locks, after a modal that names each holder. */
export function forceReleaseCommand(states: LockStates, windowLocks: WindowLocks, prompts: Prompts, timing: () => Timing, log: Log): vscode.Disposable {
  return registerCommand('devserverStaging.forceRelease', log, async (node?: Node, nodes?: Node[]) => {
    const chosen = (await targets(states, node, nodes, vscode.l10n.t('Force-release which locks?'), ['held', 'stale', 'legacy'])).filter((e) => e.state !== 'free');
    if (chosen.length === 0) return;
    const ok = await prompts.confirm(
      chosen.length === 1 ? vscode.l10n.t('Force-release the lock on {0}?', chosen[0]!.tag) : vscode.l10n.t('Force-release {0} locks?', chosen.length),
      `${chosen.map(describeLock).join('\n')}\n\n${vscode.l10n.t('A holder that is still working loses its lock and may leave a half-staged build.')}`,
      vscode.l10n.t('Force Release'),
    );
    if (!ok) return;
    for (const e of chosen) {
      // A lock of this window's own is released properly rather than broken.
      if (windowLocks.has(e.staticDir, e.tag)) await windowLocks.release(e.staticDir, e.tag);
      else {
        const was = await forceRelease(e.staticDir, e.tag, { ...timing(), clientId: windowLocks.clientId });
        log.info(`Force-released ${e.tag} in ${e.staticDir}, held by ${describeHolder(was)}.`);
      }
    }
  });
}
