/**
 * The extension's settings, read in one place. Paths are expanded here (`~`, `${userHome}`,
 * `${workspaceFolder}`) so that nothing downstream sees an unexpanded one.
 */
import * as os from 'os';
import * as path from 'path';
import * as vscode from 'vscode';
import { DEFAULT_TIMING, clampTiming, type Timing } from './core';
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
}

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

export function readSettings(): Settings {
  const c = vscode.workspace.getConfiguration(SECTION);
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  const dirs: string[] = [];
  for (const raw of c.get<unknown[]>('staticDirs', [])) {
    if (typeof raw !== 'string') continue;
    const p = expandPath(raw, folder);
    if (p !== undefined && !dirs.includes(p)) dirs.push(p);
  }
  const timing = clampTiming({
    staleMs: c.get<number>('staleSeconds', DEFAULT_TIMING.staleMs / 1000) * 1000,
    refreshMs: c.get<number>('refreshSeconds', DEFAULT_TIMING.refreshMs / 1000) * 1000,
  });
  const poll = c.get<number>('pollSeconds', 0);
  const order = c.get<string>('sortBuilds', 'version');
  return {
    staticDirs: dirs,
    timing,
    pollMs: Number.isFinite(poll) && poll > 0 ? Math.max(1_000, poll * 1000) : 0,
    order: (BUILD_ORDERS as readonly string[]).includes(order) ? (order as BuildOrder) : 'version',
    showUsage: c.get<boolean>('showSizeAndLastUse', false) === true,
  };
}

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

  dispose(): void {
    this.subscription.dispose();
    this._onDidChange.dispose();
  }
}
