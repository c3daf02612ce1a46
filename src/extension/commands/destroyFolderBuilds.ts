import * as path from 'path';
import * as vscode from 'vscode';
import type { Node } from '../tree/provider';
import { registerCommand, type Uses } from './command';
import { alwaysAsking, askAndDestroy, askedAgain, confirmDestroy, reportDestroyed } from './destroying';
import { buildsAmong, entryOfNode, staticDirOfNode } from './targets';

/** A folder named by a script, a test or another command instead of a row. */
export interface FolderArgs {
  staticDir: string;
  tag: string;
  /** Ask even with confirmations off (the Delete key, which acts on the selection). */
  alwaysAsk?: boolean;
}

/**
 * Destroys every build below a folder after one modal that gives their number and names those
 * held, stale or legacy. The folder itself stays. `buildsUnder` is the model's list of the builds
 * it knows below a folder.
 */
export function destroyFolderBuildsCommand(ctx: Uses<'buildsUnder' | 'windowLocks'>): vscode.Disposable {
  const { log, prompts, buildsUnder } = ctx;
  return registerCommand('devserverStaging.destroyFolderBuilds', ctx, async (node?: Node, _nodes?: Node[], args?: FolderArgs) => {
    const folder = args ?? (node !== undefined ? { staticDir: staticDirOfNode(node), tag: entryOfNode(node)?.tag ?? '' } : undefined);
    if (folder === undefined) return;
    const where = folder.tag === '' ? folder.staticDir : folder.tag;
    const builds = buildsAmong(buildsUnder(folder.staticDir, folder.tag));
    if (builds.length === 0) {
      void prompts.notify('info', vscode.l10n.t('There are no builds in {0}.', where));
      return;
    }
    const outcomes = await askAndDestroy(builds, (judged, again) => {
      const n = judged.length;
      return confirmDestroy(
        judged,
        again
          ? askedAgain(judged)
          : n === 1
            ? vscode.l10n.t('Destroy the 1 build in {0}?', where)
            : vscode.l10n.t('Destroy the {0} builds in {1}?', n, where),
        [vscode.l10n.t('The folder {0} itself stays.', path.join(folder.staticDir, folder.tag))],
        {
          plain: n === 1 ? vscode.l10n.t('Destroy 1 Build') : vscode.l10n.t('Destroy {0} Builds', n),
          breaking: (locks) =>
            locks === 1
              ? n === 1
                ? vscode.l10n.t('Destroy 1 Build, Breaking 1 Lock')
                : vscode.l10n.t('Destroy {0} Builds, Breaking 1 Lock', n)
              : vscode.l10n.t('Destroy {0} Builds, Breaking {1} Locks', n, locks),
        },
        args?.alwaysAsk === true || again ? alwaysAsking(prompts) : prompts,
      );
    }, ctx);
    if (outcomes !== undefined) reportDestroyed(outcomes, prompts, log);
  });
}
