/**
 * Names a co-user chooses, rendered by VS Code's own Markdown engine (`markdown.api.render`, what
 * the preview of Show Build Details uses): a tag holding backticks and a link to a `command:` URI,
 * artifact names with HTML and code spans, sources with line breaks that would start rows of their
 * own. What comes out must be text: no link, no image, no element the page does not make itself.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import { stage } from '../../src/core';
import type { DevserverStagingApi } from '../../src/extension/extension';
import { BuildNode } from '../../src/extension/tree/buildNode';
import { cleanup, tempDir, waitFor } from '../helpers';
import { api } from './activate.test';
import { pageText } from './walk';

const COMMAND = 'command:workbench.action.terminal.sendSequence?%5B%7B%22text%22%3A%22id%5Cn%22%7D%5D';
/** A tag whose every level carries markup (no '/' inside a level). */
const TAG = `board\` [Run](${COMMAND}) \`/R1 <img src=x onerror=alert(1)> ![t](t.png)`;
const NAMES = [`[Update](${COMMAND})`, '<img src=x onerror=alert(1)>', '``x`` `y', '# heading', '&#91;z&#93;(command:x)'];
const SOURCE = `/home/u/src\r| Verification | whole |\r<img src=x onerror=alert(1)> [x](${COMMAND})`;

/** The HTML VS Code's Markdown engine makes of `text`. */
const render = async (text: string): Promise<string> => String(await vscode.commands.executeCommand('markdown.api.render', text));

/** What in `html` is not text: links, images, scripts, any element besides the page's own. */
function markup(html: string): string[] {
  const ours = new Set(['h1', 'h2', 'p', 'code', 'pre', 'table', 'thead', 'tbody', 'tr', 'th', 'td', 'blockquote', 'strong', 'br', 'span', 'div']);
  return [...html.matchAll(/<([a-zA-Z][a-zA-Z0-9-]*)/g)].map((m) => m[1].toLowerCase()).filter((t) => !ours.has(t));
}

describe('hostile names in Show Build Details and the tooltips', function () {
  this.timeout(60_000);
  let ext: DevserverStagingApi;
  let staticDir: string;
  let source: string;

  before(async () => {
    ext = await api();
    staticDir = tempDir('dss-details-attack-');
    source = tempDir('dss-details-attack-src-');
    for (const name of NAMES) fs.writeFileSync(path.join(source, name), `${name}\n`);
    await stage(staticDir, TAG, [source], { clientId: 'details-attack' });
    // Sources with line breaks that markdown-it honours, as a hand-written manifest could hold.
    const file = path.join(staticDir, TAG, '.devserver-staging.manifest.json');
    const manifest = JSON.parse(fs.readFileSync(file, 'utf8')) as { artifacts: Record<string, { source: string }> };
    for (const e of Object.values(manifest.artifacts)) e.source = SOURCE;
    fs.rmSync(file);
    fs.writeFileSync(file, JSON.stringify(manifest));
    await vscode.workspace.getConfiguration('devserverStaging').update('staticDirs', [staticDir], vscode.ConfigurationTarget.Global);
    await waitFor(() => ext.states.record(staticDir, TAG), 10_000, 'the hostile build in the model');
  });

  after(async () => {
    await vscode.workspace.getConfiguration('devserverStaging').update('staticDirs', undefined, vscode.ConfigurationTarget.Global);
    cleanup(staticDir);
    cleanup(source);
  });

  it('the details page renders every name as text: no command link, no image, no row or heading of its own', async () => {
    const node = ext.tree.nodeFor(staticDir, TAG);
    assert.ok(node !== undefined, 'the build in the tree');
    const uri = await vscode.commands.executeCommand<vscode.Uri | undefined>('devserverStaging.showBuildDetails', node);
    assert.ok(uri !== undefined, 'Show Build Details opened a page');
    const text = await pageText(uri);
    const html = await render(text);
    assert.deepEqual(markup(html), [], html);
    assert.ok(!html.includes('href='), html);
    assert.equal((html.match(/<h1/g) ?? []).length, 1, html);
    // Every artifact on a row of its own under the header, and no source made one more.
    const artifacts = html.split('<table').pop()!;
    assert.equal((artifacts.match(/<tr/g) ?? []).length, 1 + NAMES.length, html);
    assert.ok(!/\| Verification \| whole \|/.test(text), text);
  });

  it('a manifest crafted to be parsed in one piece is not parsed on the page, which says what reads it in full', async () => {
    const tag = 'plain/R2';
    const dir = path.join(staticDir, tag);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'a.bin'), 'a');
    const entry = { name: 'a.bin', type: 'file', size: 1, sha256: '0'.repeat(64), source: '/out/a.bin', stagedAt: new Date().toISOString() };
    // 6 MiB of empty objects beside one sound artifact, not in the writer's layout: whole, one piece.
    fs.writeFileSync(path.join(dir, '.devserver-staging.manifest.json'), JSON.stringify({ version: 1, artifacts: { 'a.bin': entry }, x: new Array(2_100_000).fill({}) }));
    const node = await waitFor(() => ext.tree.nodeFor(staticDir, tag), 10_000, 'the crafted build in the tree');
    const uri = await vscode.commands.executeCommand<vscode.Uri | undefined>('devserverStaging.showBuildDetails', node);
    assert.ok(uri !== undefined, 'Show Build Details opened a page');
    const text = await pageText(uri);
    // (The page escapes Markdown: the colon comes as "\\:".)
    assert.match(text, /was not read here\\?: it is not laid out as this tool writes manifests/);
    assert.match(text, /The command-line tool reads it in full\\?\./);
    // Verify Build does not parse it either, and says the same.
    const said: string[] = [];
    const notify = ext.prompts.notify;
    ext.prompts.notify = async (severity, message) => (said.push(`${severity}: ${message}`), undefined);
    try {
      await vscode.commands.executeCommand('devserverStaging.verifyBuild', node);
    } finally {
      ext.prompts.notify = notify;
    }
    assert.equal(said.length, 1, said.join('\n'));
    assert.match(said[0], /^error: .*was not read here: it is not laid out as this tool writes manifests.*The command-line tool reads it in full\./s);
  });

  it('the tooltip of the build renders as text', async () => {
    const r = ext.states.record(staticDir, TAG)!;
    const md = BuildNode.tooltip(r, { mine: false, staging: undefined }, { artifacts: NAMES.length, bytes: 1 }, undefined);
    const html = await render(md.value);
    assert.deepEqual(markup(html), [], html);
    assert.ok(!html.includes('href='), html);
  });
});
