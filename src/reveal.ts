/**
 * Showing a build in the view after a staging: the tree lists lazily, so each folder on the way
 * is listed (getChildren) before the build's row can be found and revealed.
 */
import type * as vscode from 'vscode';
import type { Node, StagingTreeProvider } from './tree/provider';

/** How long a new build may take to reach the view's listing (the watcher settles events first). */
const WAIT_MS = 3_000;
const STEP_MS = 50;

/**
 * Reveals `tag` of `staticDir` in `view`, selected but without taking the focus; only while the
 * view is visible, so a staging finished in the background never switches the side bar.
 */
export function revealer(tree: StagingTreeProvider, view: vscode.TreeView<Node>): (staticDir: string, tag: string) => Promise<void> {
  return async (staticDir, tag) => {
    if (!view.visible) return;
    const parts = tag.split('/');
    const deadline = Date.now() + WAIT_MS;
    for (;;) {
      await tree.getChildren();
      let found = tree.find(staticDir, '');
      for (let i = 0; found !== undefined && i < parts.length; i++) {
        await tree.getChildren(found);
        found = tree.find(staticDir, parts.slice(0, i + 1).join('/'));
      }
      if (found !== undefined) {
        await view.reveal(found, { select: true, focus: false, expand: false });
        return;
      }
      if (Date.now() > deadline) return;
      await new Promise((resolve) => setTimeout(resolve, STEP_MS));
    }
  };
}
