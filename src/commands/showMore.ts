import type * as vscode from 'vscode';
import type { Log } from '../log';
import type { MoreNode } from '../tree/moreNode';
import type { StagingTreeProvider } from '../tree/provider';
import { registerCommand } from './command';

/** The "Show more" row of a big folder: its next page of builds. */
export function showMoreCommand(tree: StagingTreeProvider, log: Log): vscode.Disposable {
  return registerCommand('devserverStaging.showMore', log, (more?: MoreNode) => {
    if (more !== undefined) tree.showMore(more);
  });
}
