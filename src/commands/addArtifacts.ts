import * as vscode from 'vscode';
import type { LockStates, Timing } from '../core';
import type { Log } from '../log';
import type { Prompts } from '../prompts';
import type { Mine } from '../model/mine';
import type { Node } from '../tree/provider';
import type { WindowLocks } from '../windowLocks';
import { registerCommand } from './command';
import type { Reveal } from '../reveal';
import { pickSources, runStaging, type StagingArgs } from './staging';
import { targets } from './targets';

/** Stages more artifacts into an existing build, under its lock. */
export function addArtifactsCommand(states: LockStates, windowLocks: WindowLocks, mine: Mine, prompts: Prompts, reveal: Reveal, timing: () => Timing, log: Log): vscode.Disposable {
  return registerCommand('devserverStaging.addArtifacts', log, async (node?: Node, _nodes?: Node[], args: StagingArgs = {}) => {
    const title = vscode.l10n.t('Add Artifacts');
    let staticDir = args.staticDir;
    let tag = args.tag;
    if (staticDir === undefined || tag === undefined) {
      const [e] = await targets(states, { node, title: vscode.l10n.t('Add artifacts to which build?'), single: true });
      if (e === undefined) return undefined;
      ({ staticDir, tag } = e);
    }
    // This window's own lock stands in the way of staging, which takes the lock itself.
    if (windowLocks.has(staticDir, tag)) await windowLocks.release(staticDir, tag);
    const sources = args.sources ?? (await pickSources(`${title}: ${tag}`));
    if (sources === undefined || sources.length === 0) return undefined;
    return runStaging(
      { staticDir, tag, add: true, sources, ...(args.overwrite !== undefined ? { overwrite: args.overwrite } : {}), ...(args.signal ? { signal: args.signal } : {}) },
      { timing: timing(), windowLocks, mine, prompts, reveal, log },
    );
  });
}
