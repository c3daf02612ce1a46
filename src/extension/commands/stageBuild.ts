import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import { findBuildAbove, parseTag } from '../../core';
import { errorMessage } from '../errors';
import type { Node } from '../tree/provider';
import { registerCommand, type Uses } from './command';
import { pickSources, runStaging, type StagingArgs } from './staging';
import { staticDirOfNode } from './targets';

/**
 * Why a tag cannot name a new build, by the core's rules; undefined when it can. A tag inside an
 * existing build is refused as the core refuses it (a build's folders are its artifacts).
 */
export async function tagProblem(staticDir: string, tag: string): Promise<string | undefined> {
  const t = tag.trim();
  try {
    parseTag(t);
  } catch (err) {
    return errorMessage(err);
  }
  const above = await findBuildAbove(staticDir, t).catch(() => undefined);
  if (above !== undefined) return vscode.l10n.t('{0} is inside the build {1}: choose a tag beside it, such as {2}.', t, above, siblingOf(above));
  if (fs.existsSync(path.join(staticDir, t))) return vscode.l10n.t('{0} exists already: use Add Artifacts to stage into it.', t);
  return undefined;
}

/** A tag next to `build`, for the message: its folder with a new name. */
function siblingOf(build: string): string {
  const i = build.lastIndexOf('/');
  return `${i < 0 ? '' : build.slice(0, i + 1)}…`;
}

/** Stages a new build: static directory, tag (checked as it is typed), then sources. */
export function stageBuildCommand(ctx: Uses<'windowLocks' | 'mine' | 'reveal'>): vscode.Disposable {
  const { config, prompts } = ctx;
  return registerCommand('devserverStaging.stageBuild', ctx, async (node?: Node, _nodes?: Node[], args: StagingArgs = {}) => {
    const title = vscode.l10n.t('Stage Build');
    let staticDir = args.staticDir ?? (node !== undefined ? staticDirOfNode(node) : undefined);
    if (staticDir === undefined) {
      const dirs = config.current.staticDirs;
      if (dirs.length === 0) throw new Error(vscode.l10n.t('No static directory is configured. Add one first (Devserver Staging: Add Static Directory…).'));
      staticDir = dirs.length === 1 ? dirs[0] : (await prompts.pickOne(dirs.map((d) => ({ label: d, dir: d })), { title, placeHolder: vscode.l10n.t('Into which static directory?') }))?.dir;
      if (staticDir === undefined) return undefined;
    }
    const base = staticDir;
    const folder = prefill(node);
    const tag =
      args.tag ??
      (await prompts.input({
        title,
        prompt: vscode.l10n.t('The tag of the new build: a path below {0}, such as board-release/R120-15662.0.0', base),
        value: folder,
        // The cursor after the folder, nothing selected: what is typed is the build's name in it.
        valueSelection: [folder.length, folder.length],
        validateInput: (v) => (v.trim() === '' ? undefined : tagProblem(base, v)),
      }))?.trim();
    if (tag === undefined || tag === '') return undefined;
    const sources = args.sources ?? (await pickSources(prompts, title));
    if (sources === undefined || sources.length === 0) return undefined;
    return runStaging({ staticDir: base, tag, add: false, sources, ...(args.overwrite !== undefined ? { overwrite: args.overwrite } : {}), ...(args.signal ? { signal: args.signal } : {}) }, ctx);
  });
}

/** Where a new build goes, from the row it was started on: that folder, or the build's folder. */
function prefill(node: Node | undefined): string {
  if (node === undefined || node.kind === 'staticDir' || node.kind === 'artifact' || node.kind === 'more') return '';
  const folder = node.kind === 'folder' ? node.tag : node.tag.slice(0, Math.max(0, node.tag.lastIndexOf('/')));
  return folder === '' ? '' : `${folder}/`;
}
