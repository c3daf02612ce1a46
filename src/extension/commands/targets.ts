/**
 * What a command acts on: the clicked item and any others selected with it, or, from the command
 * palette, a quick pick of the builds the view knows. And the words every dialog uses for a
 * build's lock.
 */
import * as path from 'path';
import * as vscode from 'vscode';
import { formatDuration, isInside, type ListEntry, type LockInfo, type LockState, type LockStates } from '../../core';
import type { Prompts } from '../prompts';
import { dirOf, type Node } from '../tree/provider';

/** What choosing a build needs: the model, and the pickers. */
export interface Chooser {
  readonly states: LockStates;
  readonly prompts: Prompts;
}

/** Every known build below a folder (tag '' for the whole static directory). */
export type BuildsUnder = (staticDir: string, tag: string) => ListEntry[];

/** The listing entry of a build or folder row; undefined for static directories and artifacts. */
export function entryOfNode(node: Node | undefined): ListEntry | undefined {
  return node?.kind === 'build' || node?.kind === 'folder' ? node.entry : undefined;
}

/** The static directory a row belongs to, whatever its kind. */
export function staticDirOfNode(node: Node): string {
  let n: Node = node;
  while (n.parent !== undefined) n = n.parent;
  return n.kind === 'staticDir' ? n.dir : dirOf(n);
}

/** The entries of the clicked row and the rows selected with it, as the model knows them now. */
export function selectedEntries(states: LockStates, node: Node | undefined, nodes: readonly Node[] | undefined): ListEntry[] {
  const rows = nodes !== undefined && nodes.length > 0 ? nodes : node !== undefined ? [node] : [];
  return rows.map(entryOfNode).filter((e): e is ListEntry => e !== undefined).map((e) => states.entry(e.staticDir, e.tag) ?? e);
}

/** The builds among `entries`, without any that lies inside another one (an artifact folder). */
export function buildsAmong(entries: readonly ListEntry[]): ListEntry[] {
  const builds = entries.filter((e) => e.kind === 'build');
  return builds.filter((b) => !builds.some((o) => o !== b && o.staticDir === b.staticDir && b.tag.startsWith(`${o.tag}/`)));
}

/** What a command acts on, and how to ask when nothing was clicked. */
export interface TargetsOptions {
  /** The clicked row, and the rows selected with it. */
  node?: Node | undefined;
  nodes?: readonly Node[] | undefined;
  /** The quick pick's title, when the command came from the palette. */
  title: string;
  /** Offer only builds in these states. */
  only?: readonly LockState[];
  /** Let one build be picked rather than several. */
  single?: boolean;
}

/** The builds the clicked and selected rows stand for; from the palette, the ones picked. */
export async function targets({ states, prompts }: Chooser, { node, nodes, title, only, single = false }: TargetsOptions): Promise<ListEntry[]> {
  const picked = selectedEntries(states, node, nodes);
  if (picked.length > 0) return picked;
  const candidates = states
    .sortedBuilds()
    .map((r) => r.lock)
    .filter((e): e is ListEntry => e !== undefined && (only === undefined || only.includes(e.state)));
  if (candidates.length === 0) {
    void prompts.notify('info', vscode.l10n.t('No build to choose from: add a static directory with staged builds first.'));
    return [];
  }
  const items = candidates.map((e) => ({ label: e.tag, description: e.state === 'free' ? '' : `${e.state}${e.holder ? ` · ${e.holder.user}@${e.holder.hostname}` : ''}`, detail: e.staticDir, entry: e }));
  if (!single) {
    const chosen = await prompts.pickMany(items, { title, matchOnDescription: true });
    return chosen?.map((c) => c.entry) ?? [];
  }
  const chosen = await prompts.pickOne(items, { title, matchOnDescription: true });
  return chosen === undefined ? [] : [chosen.entry];
}

/** One directory: the clicked item's, or one picked from the palette. */
export async function oneDir(chooser: Chooser, node: Node | undefined, title: string): Promise<string | undefined> {
  if (node !== undefined) return dirOf(node);
  const [e] = await targets(chooser, { title, single: true });
  return e?.dir;
}

/** The configured static directory holding `p`, and the tag of `p` in it ('' for the directory itself). */
export function locate(staticDirs: readonly string[], p: string): { staticDir: string; tag: string } | undefined {
  // The deepest one: a static directory may lie inside another.
  const staticDir = [...staticDirs].sort((a, b) => b.length - a.length).find((d) => d === p || isInside(d, p));
  return staticDir === undefined ? undefined : { staticDir, tag: path.relative(staticDir, p).split(path.sep).join('/') };
}

/** Who holds a lock, in words: "alice@vm (pid 42)", "the Python devserver on vm (pid 42)". */
export function holderOf(e: Pick<LockInfo, 'holder' | 'legacy' | 'unreadable'>): string {
  if (e.holder !== undefined) return vscode.l10n.t('{0}@{1} (pid {2})', e.holder.user, e.holder.hostname, String(e.holder.pid));
  if (e.legacy !== undefined) {
    return e.legacy.pid !== undefined
      ? vscode.l10n.t('the Python devserver on {0} (pid {1})', e.legacy.hostname, String(e.legacy.pid))
      : vscode.l10n.t('the Python devserver on {0}', e.legacy.hostname);
  }
  if (e.unreadable !== undefined) return vscode.l10n.t('another process ({0})', e.unreadable);
  return vscode.l10n.t('another process');
}

/** Just `user@host`, for counts: "1 is held by alice@vm". */
export function shortHolderOf(e: Pick<LockInfo, 'holder' | 'legacy' | 'unreadable'>): string {
  if (e.holder !== undefined) return `${e.holder.user}@${e.holder.hostname}`;
  if (e.legacy !== undefined) return e.legacy.hostname;
  return holderOf(e);
}

/** When a lock was taken, for "since …": the time, and how long ago. */
export function sinceOf(e: Pick<LockInfo, 'holder' | 'ageMs'>, now = Date.now()): string | undefined {
  const at = e.holder !== undefined ? Date.parse(e.holder.acquiredAt) : NaN;
  if (!Number.isNaN(at)) return vscode.l10n.t('{0} ({1} ago)', new Date(at).toLocaleString(), formatDuration(now - at));
  return e.ageMs !== undefined ? vscode.l10n.t('{0} ago', formatDuration(e.ageMs)) : undefined;
}

/** One build's lock in a few words, for a line of a dialog: "held by alice@vm (pid 42) since …". */
export function lockWords(e: LockInfo, mine: boolean): string {
  if (mine) return vscode.l10n.t('held by this window');
  switch (e.state) {
    case 'free':
      return vscode.l10n.t('free');
    case 'held': {
      const since = sinceOf(e);
      return since !== undefined ? vscode.l10n.t('held by {0} since {1}', holderOf(e), since) : vscode.l10n.t('held by {0}', holderOf(e));
    }
    case 'stale': {
      const beat = e.heartbeatAgeMs !== undefined ? vscode.l10n.t(', last heartbeat {0} ago', formatDuration(e.heartbeatAgeMs)) : '';
      return vscode.l10n.t('stale: last held by {0}{1}', holderOf(e), beat);
    }
    case 'legacy':
      return vscode.l10n.t('legacy lock of {0}', holderOf(e));
  }
}
