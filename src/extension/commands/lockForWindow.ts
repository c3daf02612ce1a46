import * as vscode from 'vscode';
import type { Node } from '../tree/provider';
import { registerCommand, type Uses } from './command';
import type { BuildArgs } from './forceRelease';
import { targets } from './targets';

/** Holds a build's lock for as long as this window is open, or until released. A notification's button names the build (`args`). */
export function lockForWindowCommand(ctx: Uses<'states' | 'windowLocks'>): vscode.Disposable {
  const { states, windowLocks } = ctx;
  return registerCommand('devserverStaging.lockForWindow', ctx, async (node?: Node, nodes?: Node[], args?: BuildArgs) => {
    const named = args !== undefined ? states.entry(args.staticDir, args.tag) : undefined;
    const chosen = named !== undefined ? [named] : await targets(ctx, { node, nodes, title: vscode.l10n.t('Lock which builds for this window?'), only: ['free', 'stale'] });
    for (const e of chosen) if (!windowLocks.has(e.staticDir, e.tag)) await windowLocks.lock(e.staticDir, e.tag);
  });
}
