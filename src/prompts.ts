/**
 * Questions to the user that guard destructive actions. One object, so that the integration
 * tests can answer them (and read what was asked) the way a user would.
 */
import * as vscode from 'vscode';
import { SECTION } from './config';

export interface Prompts {
  /**
   * Resolves true when the user chose `button`. A question that is not `skippable` is asked
   * even when the user turned confirmations off.
   */
  confirm(message: string, detail: string, button: string, skippable?: boolean): Promise<boolean>;
}

export const prompts: Prompts = {
  async confirm(message, detail, button, skippable = true) {
    if (skippable && !vscode.workspace.getConfiguration(SECTION).get<boolean>('confirmDestructiveActions', true)) return true;
    return (await vscode.window.showWarningMessage(message, { modal: true, detail }, button)) === button;
  },
};
