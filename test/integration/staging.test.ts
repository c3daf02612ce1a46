import { strict as assert } from 'assert';
import * as crypto from 'crypto';
import * as fs from 'fs';
import type * as http from 'http';
import * as path from 'path';
import * as vscode from 'vscode';
import type { DevserverStagingApi } from '../../src/extension/extension';
import type { Node } from '../../src/extension/tree/provider';
import { startServer, type TestServer } from '../fixtures';
import { cleanup, snapshot, tempDir, waitFor } from '../helpers';
import { api } from './activate.test';
import { labelOf, nodeOf } from './walk';

let ext: DevserverStagingApi;
let staticDir: string;
let sourceDir: string;
let server: TestServer;
/** Called by the slow server once it has sent part of its body: the moment to press Cancel. */
let midway: (() => void) | undefined;

async function childrenOf(tag: string): Promise<Node[]> {
  return ext.tree.getChildren(await nodeOf(ext, staticDir, tag));
}

const sha = (p: string): string => crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex');

/** A download that trickles: 4 KiB every 20 ms, 2 MiB in all; says when 64 KiB have gone. */
function slowBody(_req: http.IncomingMessage, res: http.ServerResponse): void {
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(2 << 20) });
  let sent = 0;
  const chunk = Buffer.alloc(4096, 9);
  const t = setInterval(() => {
    if (res.destroyed || sent >= 2 << 20) {
      clearInterval(t);
      res.end();
      return;
    }
    res.write(chunk);
    sent += chunk.length;
    if (sent === 64 * 1024) midway?.();
  }, 20);
}

describe('staging from VS Code', function () {
  before(async () => {
    ext = await api();
    staticDir = tempDir('dss-stage-it-');
    sourceDir = tempDir('dss-stage-src-');
    fs.writeFileSync(path.join(sourceDir, 'chromiumos_test_image.tar.xz'), crypto.randomBytes(300_000));
    fs.writeFileSync(path.join(sourceDir, 'autotest.tar'), crypto.randomBytes(5_000));
    fs.mkdirSync(path.join(sourceDir, 'payloads'));
    fs.writeFileSync(path.join(sourceDir, 'payloads', 'full.bin'), crypto.randomBytes(1_000));
    server = await startServer(slowBody);
    await vscode.workspace.getConfiguration('devserverStaging').update('staticDirs', [staticDir], vscode.ConfigurationTarget.Global);
    await waitFor(async () => ((await ext.tree.getChildren()).some((r) => r.kind === 'staticDir' && r.dir === staticDir) ? true : undefined), 5_000, 'the root');
  });

  after(async () => {
    await vscode.workspace.getConfiguration('devserverStaging').update('staticDirs', undefined, vscode.ConfigurationTarget.Global);
    await server.close();
    cleanup(staticDir);
    cleanup(sourceDir);
  });

  it('Stage Build copies a folder into a new build, which the tree shows with its artifacts and sizes', async () => {
    await vscode.commands.executeCommand('devserverStaging.stageBuild', undefined, undefined, { staticDir, tag: 'eve/R7', sources: [sourceDir] });
    const dir = path.join(staticDir, 'eve/R7');
    assert.equal(sha(path.join(dir, 'chromiumos_test_image.tar.xz')), sha(path.join(sourceDir, 'chromiumos_test_image.tar.xz')));
    assert.ok(fs.existsSync(path.join(dir, 'payloads', 'full.bin')));
    assert.equal(fs.existsSync(path.join(dir, 'devserver.lock')), false, 'the lock is released');
    let last = '';
    const children = await waitFor(async () => {
      const c = await childrenOf('eve/R7').catch((e: unknown) => {
        last = String(e);
        return undefined;
      });
      if (c !== undefined) last = c.map((n) => n.kind).join(',');
      return c !== undefined && c.length >= 3 ? c : undefined;
    }, 3_000, 'R7 with its contents').catch((e: unknown) => {
      throw new Error(`${String(e)}; last seen: ${last}`);
    });
    const shown = children.map((n) => {
      const item = ext.tree.getTreeItem(n);
      return `${n.kind}:${labelOf(item)}:${String(item.description)}`;
    });
    assert.ok(shown.includes('artifact:payloads:undefined'), `an artifact folder, without a size: ${shown.join(', ')}`);
    assert.ok(shown.includes('artifact:autotest.tar:4.9 KiB'), shown.join(', '));
    assert.ok(shown.includes('artifact:chromiumos_test_image.tar.xz:293 KiB'), shown.join(', '));
    const artifact = children.find((n) => n.kind === 'artifact' && !n.artifact.directory)!;
    assert.equal((ext.tree.getTreeItem(artifact)).command?.command, 'devserverStaging.openArtifact');
    const r7 = (await childrenOf('eve')).find((n) => n.kind === 'build' && n.tag === 'eve/R7')!;
    const tip = ((await ext.tree.resolveTreeItem(ext.tree.getTreeItem(r7), r7)).tooltip as vscode.MarkdownString).value;
    assert.match(tip, /Contents: 3 artifacts, 299 KiB/);
  });

  /** Runs `work` with the notifications it shows taken down instead of shown. */
  async function telling(work: () => Thenable<unknown>): Promise<string[]> {
    const said: string[] = [];
    const notify = ext.prompts.notify;
    ext.prompts.notify = async (severity, message) => (said.push(`${severity}: ${message}`), undefined);
    try {
      await work();
    } finally {
      ext.prompts.notify = notify;
    }
    return said;
  }

  it('Cancel midway through a new build leaves nothing behind, and no lock, and says so', async () => {
    const abort = new AbortController();
    midway = () => abort.abort();
    const said = await telling(() => vscode.commands.executeCommand('devserverStaging.stageBuild', undefined, undefined, { staticDir, tag: 'eve/R8', sources: [`${server.base}/image.bin`], signal: abort.signal }));
    assert.ok(abort.signal.aborted, 'cancelled midway, not finished first');
    assert.equal(fs.existsSync(path.join(staticDir, 'eve/R8')), false);
    assert.deepEqual(said, ['info: Staging eve/R8 was cancelled; no build was created.']);
  });

  it('Cancel midway through Add Artifacts keeps every artifact staged before, byte for byte', async () => {
    const dir = path.join(staticDir, 'eve/R7');
    const before = snapshot(dir);
    const hashes = [...before.keys()].filter((p) => fs.statSync(p).isFile()).map((p) => `${p}:${sha(p)}`);
    const abort = new AbortController();
    midway = () => abort.abort();
    const said = await telling(() => vscode.commands.executeCommand('devserverStaging.addArtifacts', undefined, undefined, { staticDir, tag: 'eve/R7', sources: [`${server.base}/extra.bin`], signal: abort.signal }));
    assert.ok(abort.signal.aborted);
    assert.deepEqual(said, ['info: Adding artifacts to eve/R7 was cancelled; the build is as it was.']);
    assert.deepEqual(snapshot(dir), before);
    assert.deepEqual([...before.keys()].filter((p) => fs.statSync(p).isFile()).map((p) => `${p}:${sha(p)}`), hashes);
    assert.equal(fs.existsSync(path.join(dir, 'devserver.lock')), false);
  });

  it('refuses a different artifact of the same name and changes nothing', async () => {
    const other = tempDir('dss-stage-other-');
    fs.writeFileSync(path.join(other, 'autotest.tar'), 'different');
    const target = path.join(staticDir, 'eve/R7/autotest.tar');
    const was = sha(target);
    await vscode.commands.executeCommand('devserverStaging.addArtifacts', undefined, undefined, { staticDir, tag: 'eve/R7', sources: [path.join(other, 'autotest.tar')], overwrite: false });
    assert.equal(sha(target), was);
    cleanup(other);
  });

  it('shows a missing static directory as a warning item, and Create Directory makes it', async () => {
    const missing = path.join(staticDir, '..', `${path.basename(staticDir)}-missing`);
    await vscode.workspace.getConfiguration('devserverStaging').update('staticDirs', [staticDir, missing], vscode.ConfigurationTarget.Global);
    const root = await waitFor(async () => (await ext.tree.getChildren()).find((r) => r.kind === 'staticDir' && r.dir === missing), 5_000, 'the missing root');
    const item = ext.tree.getTreeItem(root);
    assert.equal(item.contextValue, 'staticDir.problem');
    assert.equal(item.description, 'does not exist');
    await vscode.commands.executeCommand('devserverStaging.createStaticDir', root);
    assert.ok(fs.statSync(missing).isDirectory());
    const again = (await ext.tree.getChildren()).find((r) => r.kind === 'staticDir' && r.dir === missing)!;
    assert.equal((ext.tree.getTreeItem(again)).contextValue, 'staticDir');
    cleanup(missing);
  });
});
