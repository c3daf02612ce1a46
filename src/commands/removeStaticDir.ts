import * as vscode from 'vscode';
import type { Log } from '../log';
import type { Prompts } from '../prompts';
import type { Node } from '../tree/provider';
import type { StaticDirArgs } from './chooseStaticDir';
import { registerCommand } from './command';
import { expanded, inForce, layerInForce, write } from './staticDirSettings';

/**
 * Stops showing a static directory: removes it from the settings the list in force comes from,
 * or says that it comes from a place this command cannot edit. Nothing on disk changes.
 */
export function removeStaticDirCommand(prompts: Prompts, log: Log): vscode.Disposable {
  return registerCommand('devserverStaging.removeStaticDir', log, async (node?: Node, _nodes?: Node[], args?: StaticDirArgs) => {
    const layer = layerInForce();
    let dir = args?.dir ?? (node?.kind === 'staticDir' ? node.dir : undefined);
    if (dir === undefined) {
      const shown = inForce();
      if (shown.length === 0) {
        void prompts.notify('info', vscode.l10n.t('No static directory is configured.'));
        return;
      }
      dir = (await prompts.pickOne(shown.map((d) => ({ label: d, description: layer.name })), { title: vscode.l10n.t('Remove which static directory from the view?') }))?.label;
      if (dir === undefined) return;
    }
    const gone = expanded(dir) ?? dir;
    const kept = layer.entries.filter((e) => (expanded(e) ?? e) !== gone);
    if (kept.length === layer.entries.length) {
      const open = vscode.l10n.t('Open Settings');
      const choice = await prompts.notify('warning', vscode.l10n.t('{0} does not come from {1}, so it cannot be removed here: it is set in a place this command cannot edit (a folder of a multi-root workspace, or the settings of a remote machine). Remove it in the settings.', gone, layer.name), open);
      if (choice === open) await vscode.commands.executeCommand('workbench.action.openSettings', 'devserverStaging.staticDirs');
      return;
    }
    await write(layer, kept);
    if (inForce().includes(gone)) throw new Error(vscode.l10n.t('{0} was removed from {1}, but the view still shows it: another setting lists it too.', gone, layer.name));
    log.info(`Removed static directory ${gone} from ${layer.name}; nothing on disk was changed.`);
  });
}
