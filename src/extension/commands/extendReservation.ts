import * as vscode from 'vscode';
import { extendReservation } from '../../core';
import type { Node } from '../tree/provider';
import { registerCommand, type Uses } from './command';
import { entryOf, type BuildArgs } from './forceRelease';
import { endOf } from '../model/reservation';
import { askReservationLength } from './reservationLength';
import { targets } from './targets';

/** Moves the end of the user's own reservations, each only while it is the instance shown. */
export function extendReservationCommand(ctx: Uses<'states' | 'windowLocks'>): vscode.Disposable {
  const { config, log, prompts, states, windowLocks } = ctx;
  return registerCommand('devserverStaging.extendReservation', ctx, async (node?: Node, nodes?: Node[], args?: BuildArgs) => {
    const picked = args !== undefined ? [await entryOf(states, args, config.current.timing)] : await targets(ctx, { node, nodes, title: vscode.l10n.t('Extend which reservations?'), only: ['held'] });
    const chosen = picked.filter((e) => e.reservation?.mine === true);
    if (chosen.length === 0) {
      if (picked.length > 0) void prompts.notify('info', vscode.l10n.t('None of them is your reservation.'));
      return;
    }
    const title = chosen.length === 1 ? vscode.l10n.t('Extend the reservation of {0}', chosen[0].tag) : vscode.l10n.t('Extend {0} reservations', chosen.length);
    const forMs = await askReservationLength(prompts, title);
    if (forMs === undefined) return;
    for (const e of chosen) {
      const info = await extendReservation(e.staticDir, e.tag, { ...config.current.timing, forMs, clientId: windowLocks.clientId, ...(e.holder !== undefined ? { token: e.holder.token } : {}) });
      log.info(`Moved the reservation of ${e.tag} in ${e.staticDir} to end at ${info.reservation?.until ?? '?'}.`);
      void prompts.notify('info', vscode.l10n.t('{0} is reserved until {1}.', e.tag, info.reservation !== undefined ? endOf(info.reservation.until) : '?'));
    }
  });
}
