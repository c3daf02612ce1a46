import * as vscode from 'vscode';
import type { Node } from '../tree/provider';
import { registerCommand, type Uses } from './command';
import { pickSources, runStaging, type StagingArgs } from './staging';
import { targets } from './targets';

/** Stages more artifacts into an existing build, under its lock. */
export function addArtifactsCommand(ctx: Uses<'states' | 'windowLocks' | 'mine' | 'reveal'>): vscode.Disposable {
  const { prompts, windowLocks } = ctx;
  return registerCommand('devserverStaging.addArtifacts', ctx, async (node?: Node, _nodes?: Node[], args: StagingArgs = {}) => {
    const title = vscode.l10n.t('Add Artifacts');
    let staticDir = args.staticDir;
    let tag = args.tag;
    if (staticDir === undefined || tag === undefined) {
      const [e] = await targets(ctx, { node, title: vscode.l10n.t('Add artifacts to which build?'), single: true });
      if (e === undefined) return undefined;
      ({ staticDir, tag } = e);
    }
    // This window's own lock stands in the way of staging, which takes the lock itself.
    if (windowLocks.has(staticDir, tag)) await windowLocks.release(staticDir, tag);
    const sources = args.sources ?? (await pickSources(prompts, `${title}: ${tag}`));
    if (sources === undefined || sources.length === 0) return undefined;
    return runStaging(
      { staticDir, tag, add: true, sources, ...(args.overwrite !== undefined ? { overwrite: args.overwrite } : {}), ...(args.signal ? { signal: args.signal } : {}) },
      ctx,
    );
  });
}
