/**
 * The question before a destructive action, with Cancel chosen by Enter. VS Code's modal dialog
 * puts the focus on the first button an extension gives and adds its own Cancel after them
 * (`isCloseAffordance` only says which given button that Cancel is): a dialog can have Cancel
 * focused only beside a second Cancel. A quick pick can: Cancel comes first and is the active item,
 * the action second, and what it acts on below them, one line each, scrolling however many there
 * are (a dialog of 100 lines is taller than the window).
 */
import * as vscode from 'vscode';

interface Choice extends vscode.QuickPickItem {
  go: boolean;
}

/**
 * One line of what the action acts on. "tag — how it is locked" gets two lines, the tag and then
 * its lock in full width, which a quick pick's single line would cut short.
 */
function lineItem(line: string): Choice {
  const at = line.indexOf(' — ');
  return at < 0 ? { label: line, go: false } : { label: line.slice(0, at), detail: line.slice(at + 3), go: false };
}

/** Resolves true only when the user chose `button`; Enter at once, Escape, or any other line cancels. */
export function askBeforeActing(message: string, detail: string, button: string): Promise<boolean> {
  const pick = vscode.window.createQuickPick<Choice>();
  const cancel: Choice = { label: `$(close) ${vscode.l10n.t('Cancel')}`, alwaysShow: true, go: false };
  const go: Choice = { label: `$(warning) ${button}`, alwaysShow: true, go: true };
  const lines = detail.split('\n').filter((l) => l.trim() !== '');
  pick.title = message;
  pick.placeholder = vscode.l10n.t('Enter cancels; to go ahead, choose “{0}”', button);
  // Clicking elsewhere must not answer: only a choice or Escape does.
  pick.ignoreFocusOut = true;
  pick.items = [cancel, go, ...(lines.length > 0 ? [{ label: '', kind: vscode.QuickPickItemKind.Separator, go: false }] : []), ...lines.map(lineItem)];
  pick.activeItems = [cancel];
  return new Promise<boolean>((resolve) => {
    pick.onDidAccept(() => {
      resolve(pick.selectedItems[0]?.go === true);
      pick.hide();
    });
    pick.onDidHide(() => {
      resolve(false);
      pick.dispose();
    });
    pick.show();
  });
}
