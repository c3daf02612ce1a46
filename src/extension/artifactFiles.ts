/**
 * Artifacts open read-only. A staged build is written only under its lock, by staging: an editor
 * on the file itself would save a keystroke (with auto save, at once) into the build. So the editor
 * is given the artifact through this file system, which reads it as Open checks it (inside the
 * static directory, never through a link put in its place, never from a FIFO) and refuses every
 * write; VS Code shows such an editor as read-only.
 */
import * as fs from 'fs';
import * as vscode from 'vscode';
import { isInside } from '../core';
import { readArtifact } from './commands/sniff';
import { locate } from './commands/targets';

export const ARTIFACT_SCHEME = 'devserver-staging-artifact';

/** The read-only editor's address of an artifact at `file` (its real path, as `sniff` found it). */
export const artifactUri = (file: string): vscode.Uri => vscode.Uri.from({ scheme: ARTIFACT_SCHEME, path: file });

/** The static directory whose real path holds `real`. */
async function realOf(dirs: readonly string[], real: string): Promise<string | undefined> {
  for (const d of dirs) {
    const r = await fs.promises.realpath(d).catch(() => undefined);
    if (r !== undefined && isInside(r, real)) return d;
  }
  return undefined;
}

export class ArtifactFiles implements vscode.FileSystemProvider {
  private readonly _onDidChangeFile = new vscode.EventEmitter<vscode.FileChangeEvent[]>();
  readonly onDidChangeFile = this._onDidChangeFile.event;

  /** `staticDirs`: where artifacts may be read from, as the settings say now. */
  constructor(private readonly staticDirs: () => readonly string[]) {}

  /** Only what Open sniffed is read again: an artifact of a static directory the view shows. */
  private async read(uri: vscode.Uri): Promise<{ bytes: Uint8Array; st: { ctimeMs: number; mtimeMs: number; size: number } }> {
    const dirs = this.staticDirs();
    // Open gives the real path: a static directory set through a link holds it as its real path.
    const staticDir = locate(dirs, uri.path)?.staticDir ?? (await realOf(dirs, uri.path));
    if (staticDir === undefined) throw vscode.FileSystemError.NoPermissions(uri);
    const got = await readArtifact(uri.path, staticDir);
    if ('kind' in got) throw got.why === 'unreadable' && got.detail === 'ENOENT' ? vscode.FileSystemError.FileNotFound(uri) : vscode.FileSystemError.NoPermissions(uri);
    return got;
  }

  async stat(uri: vscode.Uri): Promise<vscode.FileStat> {
    const { st } = await this.read(uri);
    return { type: vscode.FileType.File, ctime: st.ctimeMs, mtime: st.mtimeMs, size: st.size, permissions: vscode.FilePermission.Readonly };
  }

  async readFile(uri: vscode.Uri): Promise<Uint8Array> {
    return (await this.read(uri)).bytes;
  }

  watch(): vscode.Disposable {
    return new vscode.Disposable(() => undefined);
  }

  readDirectory(uri: vscode.Uri): never {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  createDirectory(uri: vscode.Uri): never {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  writeFile(uri: vscode.Uri): never {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  delete(uri: vscode.Uri): never {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  rename(uri: vscode.Uri): never {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  dispose(): void {
    this._onDidChangeFile.dispose();
  }
}
