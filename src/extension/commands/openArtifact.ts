import * as path from 'path';
import * as vscode from 'vscode';
import { artifactUri } from '../artifactFiles';
import { formatBytes } from '../../core';
import { dirOf, type Node } from '../tree/provider';
import { clipboardText } from '../shown';
import { registerCommand, type Uses } from './command';
import { sniff } from './sniff';
import { locate, staticDirOfNode } from './targets';

/** The hex editor's extension and its editor, offered for binary artifacts when installed. */
const HEX_EXTENSION = 'ms-vscode.hexeditor';
const HEX_EDITOR = 'hexEditor.hexedit';

/**
 * Opens an artifact: a text file in a read-only preview editor (focus stays in the view, as a click
 * in the Explorer does); a binary or very large one never as text, but with Open with Hex Editor (when
 * installed), Reveal in File Explorer and Copy Path. The artifact rows run it on click and Enter;
 * arrow keys only move the focus in VS Code's trees, so browsing opens nothing.
 */
export function openArtifactCommand(ctx: Uses): vscode.Disposable {
  const { config, log, prompts } = ctx;
  return registerCommand('devserverStaging.openArtifact', ctx, async (target?: Node | vscode.Uri) => {
    if (target === undefined) return;
    const file = target instanceof vscode.Uri ? target.fsPath : dirOf(target);
    const staticDir = target instanceof vscode.Uri ? locate(config.current.staticDirs, file)?.staticDir : staticDirOfNode(target);
    const name = path.basename(file);
    if (staticDir === undefined) {
      void prompts.notify('warning', vscode.l10n.t('{0} is not in a static directory shown in the view; it is not opened.', file));
      return;
    }
    const s = await sniff(file, staticDir);
    if (s.kind === 'text') {
      // Read-only: nothing typed in it can reach the build (see artifactFiles.ts).
      await vscode.commands.executeCommand('vscode.open', artifactUri(s.path), { preview: true, preserveFocus: true });
      return;
    }
    if (s.kind === 'refused') {
      const why =
        s.why === 'outside'
          ? vscode.l10n.t('it is a link that leads outside the static directory')
          : s.why === 'not-a-file'
            ? vscode.l10n.t('it is not a regular file (a FIFO, socket or device)')
            : vscode.l10n.t('it cannot be read ({0})', s.detail ?? '');
      log.warn(`Did not open ${file}: ${why}.`);
      void prompts.notify('warning', vscode.l10n.t('{0} is not opened: {1}.', name, why));
      return;
    }
    const uri = vscode.Uri.file(s.path);
    const actions: { title: string; run: () => Thenable<unknown> }[] = [];
    if (vscode.extensions.getExtension(HEX_EXTENSION) !== undefined) actions.push({ title: vscode.l10n.t('Open with Hex Editor'), run: () => vscode.commands.executeCommand('vscode.openWith', uri, HEX_EDITOR, { preview: true }) });
    if (vscode.env.uiKind === vscode.UIKind.Desktop) actions.push({ title: vscode.l10n.t('Reveal in File Explorer'), run: () => vscode.commands.executeCommand('revealFileInOS', uri) });
    actions.push({ title: vscode.l10n.t('Copy Path'), run: () => vscode.env.clipboard.writeText(clipboardText(s.path)) });
    const message =
      s.why === 'large'
        ? vscode.l10n.t('{0} is {1}, too large to open as text.', name, formatBytes(s.size))
        : vscode.l10n.t('{0} is a binary file ({1}); it is not opened as text.', name, formatBytes(s.size));
    void prompts.notify('info', message, ...actions.map((a) => a.title)).then((choice) => actions.find((a) => a.title === choice)?.run());
  });
}
