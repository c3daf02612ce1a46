import * as vscode from 'vscode';
import type { Node } from '../tree/provider';
import type { StaticDirArgs } from './chooseStaticDir';
import { registerCommand, type Uses } from './command';

/**
 * Stops showing a static directory: removes it from the settings the list in force comes from,
 * or says that it comes from a place this command cannot edit. Nothing on disk changes.
 */
export function removeStaticDirCommand(ctx: Uses): vscode.Disposable {
  const { config, log, prompts } = ctx;
  return registerCommand('devserverStaging.removeStaticDir', ctx, async (node?: Node, _nodes?: Node[], args?: StaticDirArgs) => {
    const layer = config.staticDirsLayer();
    let dir = args?.dir ?? (node?.kind === 'staticDir' ? node.dir : undefined);
    if (dir === undefined) {
      const shown = config.current.staticDirs;
      if (shown.length === 0) {
        void prompts.notify('info', vscode.l10n.t('No static directory is configured.'));
        return;
      }
      dir = (await prompts.pickOne(shown.map((d) => ({ label: d, description: layer.name })), { title: vscode.l10n.t('Remove which static directory from the view?') }))?.label;
      if (dir === undefined) return;
    }
    const gone = config.expand(dir) ?? dir;
    const kept = layer.entries.filter((e) => (config.expand(e) ?? e) !== gone);
    if (kept.length === layer.entries.length) {
      const open = vscode.l10n.t('Open Settings');
      const choice = await prompts.notify('warning', vscode.l10n.t('{0} does not come from {1}, so it cannot be removed here: it is set in a place this command cannot edit (a folder of a multi-root workspace, or the settings of a remote machine). Remove it in the settings.', gone, layer.name), open);
      if (choice === open) await vscode.commands.executeCommand('workbench.action.openSettings', 'devserverStaging.staticDirs');
      return;
    }
    await config.writeStaticDirs(layer, kept);
    if (config.reread().staticDirs.includes(gone)) throw new Error(vscode.l10n.t('{0} was removed from {1}, but the view still shows it: another setting lists it too.', gone, layer.name));
    log.info(`Removed static directory ${gone} from ${layer.name}; nothing on disk was changed.`);
    void prompts.notify('info', vscode.l10n.t('{0} is no longer shown in the view. Nothing on disk was changed.', gone));
  });
}
