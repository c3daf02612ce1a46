/**
 * Showing a build in the view: after a staging (when the model has seen it), and for Go to
 * Build. The tree lists lazily and a big folder shows a page at a time, so the build's page is
 * brought in and its node made before VS Code is asked to reveal it.
 */
import type * as vscode from 'vscode';
import type { LockStates } from '../core';
import { NO_FILTER } from './model/view';
import type { Node, StagingTreeProvider } from './tree/provider';

/** How long a new build may take to reach the model (the watcher settles events first). */
const WAIT_MS = 3_000;
const STEP_MS = 50;

export interface RevealHow {
  /** Move the focus to the view (Go to Build); otherwise select only. */
  focus?: boolean;
  /**
   * Reveal even when the view is hidden, clearing a filter that hides the build (Go to Build).
   * Otherwise a staging finished in the background never switches the side bar or a filter.
   */
  always?: boolean;
}

export type Reveal = (staticDir: string, tag: string, how?: RevealHow) => Promise<Node | undefined>;

export function revealer(tree: StagingTreeProvider, view: vscode.TreeView<Node>, states: LockStates, onFilterCleared: (tag: string) => void): Reveal {
  return async (staticDir, tag, how = {}) => {
    if (how.always !== true && !view.visible) return undefined;
    const deadline = Date.now() + WAIT_MS;
    while (states.record(staticDir, tag)?.kind !== 'build') {
      if (Date.now() > deadline) return undefined;
      await new Promise((resolve) => setTimeout(resolve, STEP_MS));
    }
    if (tree.hides(staticDir, tag)) {
      if (how.always !== true) return undefined;
      tree.setFilter(NO_FILTER);
      onFilterCleared(tag);
    }
    await tree.pageIn(staticDir, tag);
    const node = tree.nodeFor(staticDir, tag);
    if (node === undefined) return undefined;
    await view.reveal(node, { select: true, focus: how.focus === true, expand: false });
    return node;
  };
}
