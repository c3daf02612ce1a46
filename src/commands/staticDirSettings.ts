/**
 * Where the value of `devserverStaging.staticDirs` in force comes from, so that adding or removing
 * a static directory changes that place: a value written to the user settings while the
 * workspace sets its own would change nothing on screen.
 */
import * as vscode from 'vscode';
import { SECTION, expandPath, readSettings } from '../config';

const KEY = 'staticDirs';

/** A place the setting can be written, with the list it holds there. */
export interface SettingsLayer {
  target: vscode.ConfigurationTarget;
  /** For messages: "workspace settings", "user settings". */
  name: string;
  /** The entries as written there (`~`, `${workspaceFolder}` unexpanded). */
  entries: string[];
}

const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);

/**
 * The layer whose list is in force: the workspace's when it sets one (lists are not merged, the
 * workspace's replaces the user's), else the user's, which is also where a first one goes.
 */
export function layerInForce(): SettingsLayer {
  const info = vscode.workspace.getConfiguration(SECTION).inspect<unknown>(KEY);
  if (info?.workspaceValue !== undefined) {
    const file = vscode.workspace.workspaceFile !== undefined ? vscode.workspace.workspaceFile.fsPath : '.vscode/settings.json';
    return { target: vscode.ConfigurationTarget.Workspace, name: vscode.l10n.t('the workspace settings ({0})', file), entries: strings(info.workspaceValue) };
  }
  return { target: vscode.ConfigurationTarget.Global, name: vscode.l10n.t('the user settings'), entries: strings(info?.globalValue) };
}

/** The absolute directory an entry of the setting names, as the view expands it. */
export function expanded(entry: string): string | undefined {
  return expandPath(entry, vscode.workspace.workspaceFolders?.[0]?.uri.fsPath);
}

/** Writes the list to the layer; says which layer, and why, when it cannot. */
export async function write(layer: SettingsLayer, entries: string[]): Promise<void> {
  try {
    await vscode.workspace.getConfiguration(SECTION).update(KEY, entries, layer.target);
  } catch (err) {
    throw new Error(vscode.l10n.t('Could not change {0}: {1}', layer.name, err instanceof Error ? err.message : String(err)));
  }
}

/** The static directories in force now, expanded. */
export const inForce = (): string[] => readSettings().staticDirs;
