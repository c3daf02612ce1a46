/**
 * Questions to the user and what the user is told. One object, made in activate() and handed to
 * every command, so that the integration tests can answer them (and read what was asked, and
 * what was said) the way a user would.
 */
import * as vscode from 'vscode';
import type { Configuration } from './config';

export type Severity = 'info' | 'warning' | 'error';

export interface Prompts {
  /**
   * A modal question. Resolves true when the user chose `button`. A question that is not
   * `skippable` is asked even when the user turned confirmations off.
   */
  confirm(message: string, detail: string, button: string, skippable?: boolean): Promise<boolean>;
  /** A quick pick of one item; undefined when dismissed. */
  pickOne<T extends vscode.QuickPickItem>(items: readonly T[], options: vscode.QuickPickOptions): Promise<T | undefined>;
  /** A quick pick of several; the items with `picked` start ticked. Undefined when dismissed. */
  pickMany<T extends vscode.QuickPickItem>(items: readonly T[], options: vscode.QuickPickOptions): Promise<T[] | undefined>;
  /** An input box; undefined when dismissed. */
  input(options: vscode.InputBoxOptions): Promise<string | undefined>;
  /** A notification with buttons: resolves the button chosen, undefined when it was closed. */
  notify(severity: Severity, message: string, ...actions: string[]): Promise<string | undefined>;
}

const SHOW: Record<Severity, (message: string, ...items: string[]) => Thenable<string | undefined>> = {
  info: (m, ...a) => vscode.window.showInformationMessage(m, ...a),
  warning: (m, ...a) => vscode.window.showWarningMessage(m, ...a),
  error: (m, ...a) => vscode.window.showErrorMessage(m, ...a),
};

/** The editor's own dialogs; a skippable question is taken as yes while the settings turn confirmations off. */
export const createPrompts = (config: Configuration): Prompts => ({
  async confirm(message, detail, button, skippable = true) {
    if (skippable && !config.current.confirmDestructive) return true;
    return (await vscode.window.showWarningMessage(message, { modal: true, detail }, button)) === button;
  },
  async pickOne(items, options) {
    return vscode.window.showQuickPick(items, { ...options, canPickMany: false });
  },
  async pickMany(items, options) {
    return vscode.window.showQuickPick(items, { ...options, canPickMany: true });
  },
  async input(options) {
    return vscode.window.showInputBox(options);
  },
  async notify(severity, message, ...actions) {
    return SHOW[severity](message, ...actions);
  },
});
