/**
 * The extension's settings, read and written here alone: one `Configuration`, made in activate(),
 * is handed to every part that needs a setting, which reads `current` when it acts and listens to
 * `onDidChange` where it must redraw. Paths are expanded here (`~`, `${userHome}`,
 * `${workspaceFolder}`) so that nothing downstream sees an unexpanded one.
 */
import * as os from 'os';
import * as path from 'path';
import * as vscode from 'vscode';
import { clampTiming, type Timing } from '../core';
import { BUILD_ORDERS, type BuildOrder } from './model/view';

export const SECTION = 'devserverStaging';

export interface Settings {
  /** Absolute static directories, in the order configured, without duplicates. */
  staticDirs: string[];
  timing: Timing;
  /** List shown directories again this often (0: never), for filesystems without file events. */
  pollMs: number;
  /** The order of builds within a folder. */
  order: BuildOrder;
  /** Show each build's size and last use on its row. */
  showUsage: boolean;
  /** Ask before force-releasing or destroying (questions that must be asked are asked anyway). */
  confirmDestructive: boolean;
}

/** A place `staticDirs` can be written, with the list it holds there. */
export interface SettingsLayer {
  target: vscode.ConfigurationTarget;
  /** For messages: "workspace settings", "user settings". */
  name: string;
  /** The entries as written there (`~`, `${workspaceFolder}` unexpanded). */
  entries: string[];
}

const STATIC_DIRS = 'staticDirs';

export function expandPath(raw: string, workspaceFolder: string | undefined): string | undefined {
  let p = raw.trim();
  if (p === '') return undefined;
  p = p.replace(/\$\{userHome\}/g, os.homedir());
  if (p.includes('${workspaceFolder}')) {
    // A workspace-relative directory means nothing without a workspace.
    if (workspaceFolder === undefined) return undefined;
    p = p.replace(/\$\{workspaceFolder\}/g, workspaceFolder);
  }
  if (p === '~' || p.startsWith('~/')) p = path.join(os.homedir(), p.slice(1));
  if (!path.isAbsolute(p)) {
    if (workspaceFolder === undefined) return undefined;
    p = path.join(workspaceFolder, p);
  }
  return path.normalize(p).replace(/(.)\/+$/, '$1');
}

function workspaceFolder(): string | undefined {
  return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
}

/** Polling less often than this is no polling a user would wait for; and a timer must stay below 2^31 ms. */
const MAX_POLL_MS = 3_600_000;

/** A setting in seconds as milliseconds; undefined when it is no finite number. */
function seconds(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v * 1000 : undefined;
}

function readSettings(): Settings {
  const c = vscode.workspace.getConfiguration(SECTION);
  const folder = workspaceFolder();
  const dirs: string[] = [];
  for (const raw of c.get<unknown[]>(STATIC_DIRS, [])) {
    if (typeof raw !== 'string') continue;
    const p = expandPath(raw, folder);
    if (p !== undefined && !dirs.includes(p)) dirs.push(p);
  }
  // Settings are whatever a settings file holds: text or a huge number is clamped there.
  const timing = clampTiming({
    staleMs: seconds(c.get<unknown>('staleSeconds')),
    refreshMs: seconds(c.get<unknown>('refreshSeconds')),
  });
  const poll = seconds(c.get<unknown>('pollSeconds')) ?? 0;
  const order = c.get<string>('sortBuilds', 'version');
  return {
    staticDirs: dirs,
    timing,
    pollMs: poll > 0 ? Math.min(MAX_POLL_MS, Math.max(1_000, poll)) : 0,
    order: (BUILD_ORDERS as readonly string[]).includes(order) ? (order as BuildOrder) : 'version',
    showUsage: c.get<boolean>('showSizeAndLastUse', false) === true,
    confirmDestructive: c.get<boolean>('confirmDestructiveActions', true) !== false,
  };
}

const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);

/** The settings as they are now, and an event with the fresh ones whenever one of ours changes. */
export class Configuration implements vscode.Disposable {
  private settings = readSettings();
  private readonly _onDidChange = new vscode.EventEmitter<Settings>();
  readonly onDidChange = this._onDidChange.event;
  private readonly subscription = vscode.workspace.onDidChangeConfiguration((e) => {
    if (!e.affectsConfiguration(SECTION)) return;
    this.settings = readSettings();
    this._onDidChange.fire(this.settings);
  });

  get current(): Settings {
    return this.settings;
  }

  /** The settings read afresh: after writing one, before its change event has come. */
  reread(): Settings {
    this.settings = readSettings();
    return this.settings;
  }

  /** The absolute directory an entry of `staticDirs` names, expanded as the view expands it. */
  expand(entry: string): string | undefined {
    return expandPath(entry, workspaceFolder());
  }

  /**
   * Where the list of static directories in force comes from, so that adding or removing one
   * changes that place: the workspace's when it sets one (lists are not merged, the workspace's
   * replaces the user's), else the user's, which is also where a first one goes. A value written
   * to the user settings while the workspace sets its own would change nothing on screen.
   */
  staticDirsLayer(): SettingsLayer {
    const info = vscode.workspace.getConfiguration(SECTION).inspect<unknown>(STATIC_DIRS);
    if (info?.workspaceValue !== undefined) {
      const file = vscode.workspace.workspaceFile !== undefined ? vscode.workspace.workspaceFile.fsPath : '.vscode/settings.json';
      return { target: vscode.ConfigurationTarget.Workspace, name: vscode.l10n.t('the workspace settings ({0})', file), entries: strings(info.workspaceValue) };
    }
    return { target: vscode.ConfigurationTarget.Global, name: vscode.l10n.t('the user settings'), entries: strings(info?.globalValue) };
  }

  /** Writes the list of static directories to `layer`; says which layer, and why, when it cannot. */
  async writeStaticDirs(layer: SettingsLayer, entries: string[]): Promise<void> {
    try {
      await vscode.workspace.getConfiguration(SECTION).update(STATIC_DIRS, entries, layer.target);
    } catch (err) {
      throw new Error(vscode.l10n.t('Could not change {0}: {1}', layer.name, err instanceof Error ? err.message : String(err)));
    }
  }

  dispose(): void {
    this.subscription.dispose();
    this._onDidChange.dispose();
  }
}
