import * as vscode from 'vscode';
import { reserve } from '../../core';
import type { Node } from '../tree/provider';
import { registerCommand, type Uses } from './command';
import { entryOf, type BuildArgs } from './forceRelease';
import { endOf } from '../model/reservation';
import { askReservationLength } from './reservationLength';
import { targets } from './targets';

/**
 * Reserves builds for the user (not for this window): each lock is held until the end picked,
 * with an optional note, whether or not the editor stays open.
 */
export function reserveCommand(ctx: Uses<'states' | 'windowLocks'>): vscode.Disposable {
  const { config, log, prompts, states, windowLocks } = ctx;
  return registerCommand('devserverStaging.reserve', ctx, async (node?: Node, nodes?: Node[], args?: BuildArgs) => {
    const chosen = args !== undefined ? [await entryOf(states, args, config.current.timing)] : await targets(ctx, { node, nodes, title: vscode.l10n.t('Reserve which builds?'), only: ['free', 'stale'] });
    if (chosen.length === 0) return;
    const title = chosen.length === 1 ? vscode.l10n.t('Reserve {0}', chosen[0].tag) : vscode.l10n.t('Reserve {0} builds', chosen.length);
    const forMs = await askReservationLength(prompts, title);
    if (forMs === undefined) return;
    const note = await prompts.input({ title, prompt: vscode.l10n.t('What is it for? Shown to others beside the build (optional).'), placeHolder: vscode.l10n.t('for example: flashing DUT-3') });
    if (note === undefined) return;
    for (const e of chosen) {
      const info = await reserve(e.staticDir, e.tag, { ...config.current.timing, forMs, note, clientId: windowLocks.clientId });
      log.info(`Reserved ${e.tag} in ${e.staticDir} until ${info.reservation?.until ?? '?'}.`);
      void prompts.notify('info', vscode.l10n.t('Reserved {0} until {1}.', e.tag, info.reservation !== undefined ? endOf(info.reservation.until) : '?'));
    }
  });
}
