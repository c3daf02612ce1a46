import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import { parseTag, type Timing } from '../core';
import { errorMessage } from '../errors';
import type { Log } from '../log';
import type { Prompts } from '../prompts';
import type { StatusBar } from '../statusBar';
import type { Node } from '../tree/provider';
import type { WindowLocks } from '../windowLocks';
import { registerCommand } from './command';
import { pickSources, runStaging, type Reveal, type StagingArgs } from './staging';
import { entryOfNode, kindOf, staticDirOfNode } from './targets';

/** Why a tag cannot name a new build, by the core's rules; undefined when it can. */
export function tagProblem(staticDir: string, tag: string): string | undefined {
  try {
    parseTag(tag.trim());
  } catch (err) {
    return errorMessage(err);
  }
  if (fs.existsSync(path.join(staticDir, tag.trim()))) return vscode.l10n.t('{0} exists already: use Add Artifacts to stage into it.', tag.trim());
  return undefined;
}

/** What the tag box starts with: the folder of the row it was started from (a build's own folder). */
async function folderOf(node: Node | undefined): Promise<string> {
  const e = entryOfNode(node);
  if (e === undefined) return '';
  const folder = (await kindOf(e)) === 'build' ? path.posix.dirname(e.tag) : e.tag;
  return folder === '.' ? '' : `${folder}/`;
}

/** Stages a new build: static directory, tag (checked as it is typed), then sources. */
export function stageBuildCommand(staticDirs: () => readonly string[], windowLocks: WindowLocks, statusBar: StatusBar, prompts: Prompts, reveal: Reveal, timing: () => Timing, log: Log): vscode.Disposable {
  return registerCommand('devserverStaging.stageBuild', log, async (node?: Node, _nodes?: Node[], args: StagingArgs = {}) => {
    const title = vscode.l10n.t('Stage Build');
    let staticDir = args.staticDir ?? (node !== undefined ? staticDirOfNode(node) : undefined);
    if (staticDir === undefined) {
      const dirs = staticDirs();
      if (dirs.length === 0) throw new Error(vscode.l10n.t('No static directory is configured. Add one first (Devserver Staging: Add Static Directory…).'));
      staticDir = dirs.length === 1 ? dirs[0] : await vscode.window.showQuickPick([...dirs], { title, placeHolder: vscode.l10n.t('Into which static directory?') });
      if (staticDir === undefined) return undefined;
    }
    const base = staticDir;
    const tag =
      args.tag ??
      (await prompts.input({
        title,
        prompt: vscode.l10n.t('The tag of the new build: a path below {0}, such as board-release/R120-15662.0.0', base),
        value: await folderOf(node),
        validateInput: (v) => (v.trim() === '' ? undefined : tagProblem(base, v)),
      }))?.trim();
    if (tag === undefined || tag === '') return undefined;
    const sources = args.sources ?? (await pickSources(title));
    if (sources === undefined || sources.length === 0) return undefined;
    return runStaging(
      { staticDir: base, tag, add: false, sources, ...(args.overwrite !== undefined ? { overwrite: args.overwrite } : {}), ...(args.signal ? { signal: args.signal } : {}) },
      { timing: timing(), windowLocks, statusBar, prompts, reveal, log },
    );
  });
}
