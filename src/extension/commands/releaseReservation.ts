import * as vscode from 'vscode';
import { releaseReservation } from '../../core';
import type { Node } from '../tree/provider';
import { registerCommand, type Uses } from './command';
import { entryOf, type BuildArgs } from './forceRelease';
import { targets } from './targets';

/** Releases the user's own reservations, each only while it is the instance shown. */
export function releaseReservationCommand(ctx: Uses<'states' | 'windowLocks'>): vscode.Disposable {
  const { config, log, prompts, states, windowLocks } = ctx;
  return registerCommand('devserverStaging.releaseReservation', ctx, async (node?: Node, nodes?: Node[], args?: BuildArgs) => {
    const picked = args !== undefined ? [await entryOf(states, args, config.current.timing)] : await targets(ctx, { node, nodes, title: vscode.l10n.t('Release which reservations?'), only: ['held', 'stale'] });
    const chosen = picked.filter((e) => e.reservation?.mine === true);
    if (chosen.length === 0) {
      if (picked.length > 0) void prompts.notify('info', vscode.l10n.t('None of them is your reservation.'));
      return;
    }
    for (const e of chosen) {
      await releaseReservation(e.staticDir, e.tag, { ...config.current.timing, clientId: windowLocks.clientId, ...(e.holder !== undefined ? { token: e.holder.token } : {}) });
      log.info(`Released the reservation of ${e.tag} in ${e.staticDir}.`);
    }
  });
}
