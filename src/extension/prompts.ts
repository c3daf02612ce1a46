/**
 * Questions to the user and what the user is told. One object, made in activate() and handed to
 * every command, so that the integration tests can answer them (and read what was asked, and
 * what was said) the way a user would. It is also the one way to the editor's messages, pickers
 * and progress notifications: each text is made inert for its surface here (shown.ts), whatever
 * co-users' words a command put in it.
 */
import * as vscode from 'vscode';
import type { Configuration } from './config';
import { askBeforeActing } from './confirmPick';
import { dialogLine, notificationText, pickText } from './shown';

export type Severity = 'info' | 'warning' | 'error';

/** What a progress notification is told as the work goes: each message made inert too. */
export type ProgressReport = (step: { message?: string; increment?: number }) => void;

export interface Prompts {
  /**
   * The question before a destructive action, with Cancel first (Enter cancels). Resolves true
   * when the user chose `button`. A question that is not `skippable` is asked even when the user
   * turned confirmations off. `detail` is made of `dialogDetail` (its line breaks are the
   * question's own, each line a row).
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
  /** Work with its progress in a notification, and Cancel when `cancellable`. */
  progress<R>(options: { title: string; cancellable?: boolean }, task: (report: ProgressReport, token: vscode.CancellationToken) => Thenable<R>): Promise<R>;
  /** The editor's own calls, which receive the texts once they are inert: tests replace its methods to see them. */
  readonly editor: EditorUi;
}

/** The parts of VS Code's window that show text. */
export interface EditorUi {
  /** The question before a destructive action (`askBeforeActing`): true when `button` was chosen. */
  confirm(question: string, detail: string, button: string): Thenable<boolean>;
  message(severity: Severity, message: string, options: vscode.MessageOptions, ...items: string[]): Thenable<string | undefined>;
  quickPick<T extends vscode.QuickPickItem>(items: readonly T[], options: vscode.QuickPickOptions & { canPickMany: boolean }): Thenable<T | T[] | undefined>;
  inputBox(options: vscode.InputBoxOptions): Thenable<string | undefined>;
  withProgress<R>(options: vscode.ProgressOptions, task: (progress: vscode.Progress<{ message?: string; increment?: number }>, token: vscode.CancellationToken) => Thenable<R>): Thenable<R>;
}

const SHOW: Record<Severity, (message: string, options: vscode.MessageOptions, ...items: string[]) => Thenable<string | undefined>> = {
  info: (m, o, ...a) => vscode.window.showInformationMessage(m, o, ...a),
  warning: (m, o, ...a) => vscode.window.showWarningMessage(m, o, ...a),
  error: (m, o, ...a) => vscode.window.showErrorMessage(m, o, ...a),
};

const vscodeUi = (): EditorUi => ({
  confirm: (question, detail, button) => askBeforeActing(question, detail, button),
  message: (severity, message, options, ...items) => SHOW[severity](message, options, ...items),
  quickPick: (items, options) => vscode.window.showQuickPick(items, options),
  inputBox: (options) => vscode.window.showInputBox(options),
  withProgress: (options, task) => vscode.window.withProgress(options, task),
});

/** A modal's detail from its lines, each shown as one line whatever co-users' words it holds. */
export function dialogDetail(lines: readonly string[]): string {
  return lines.map(dialogLine).join('\n');
}

/** Shows `items` with their words inert, and hands back the caller's own items. */
async function pick<T extends vscode.QuickPickItem>(ui: EditorUi, items: readonly T[], options: vscode.QuickPickOptions, canPickMany: boolean): Promise<T[] | undefined> {
  const shown = items.map((i) => ({
    ...i,
    label: pickText(i.label),
    ...(i.description !== undefined ? { description: pickText(i.description) } : {}),
    ...(i.detail !== undefined ? { detail: pickText(i.detail) } : {}),
  }));
  const back = new Map<vscode.QuickPickItem, T>(shown.map((s, n) => [s, items[n]]));
  const chosen = await ui.quickPick(shown, { ...options, ...(options.title !== undefined ? { title: pickText(options.title) } : {}), canPickMany });
  if (chosen === undefined) return undefined;
  return (Array.isArray(chosen) ? chosen : [chosen]).map((c) => back.get(c)).filter((c): c is T => c !== undefined);
}

/** The editor's own dialogs; a skippable question is taken as yes while the settings turn confirmations off. */
export const createPrompts = (config: Configuration, editor: EditorUi = vscodeUi()): Prompts => ({
  editor,
  async confirm(message, detail, button, skippable = true) {
    if (skippable && !config.current.confirmDestructive) return true;
    return editor.confirm(pickText(message), detail.split('\n').map(pickText).join('\n'), pickText(button));
  },
  async pickOne(items, options) {
    return (await pick(editor, items, options, false))?.[0];
  },
  async pickMany(items, options) {
    return pick(editor, items, options, true);
  },
  async input(options) {
    const inert = (s: string | undefined): string | undefined => (s === undefined ? undefined : pickText(s));
    return editor.inputBox({ ...options, title: inert(options.title), prompt: inert(options.prompt), placeHolder: inert(options.placeHolder) });
  },
  async notify(severity, message, ...actions) {
    return editor.message(severity, notificationText(message), {}, ...actions);
  },
  async progress(options, task) {
    return editor.withProgress({ location: vscode.ProgressLocation.Notification, title: notificationText(options.title), cancellable: options.cancellable === true }, (progress, token) =>
      task((step) => progress.report(step.message !== undefined ? { ...step, message: notificationText(step.message) } : step), token),
    );
  },
});
