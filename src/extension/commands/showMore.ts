import type * as vscode from 'vscode';
import type { MoreNode } from '../tree/moreNode';
import { registerCommand, type Uses } from './command';

/** The "Show more" row of a big folder: its next page of builds. */
export function showMoreCommand(ctx: Uses<'tree'>): vscode.Disposable {
  const { tree } = ctx;
  return registerCommand('devserverStaging.showMore', ctx, (more?: MoreNode) => {
    if (more !== undefined) tree.showMore(more);
  });
}
