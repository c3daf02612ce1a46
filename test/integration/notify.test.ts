/**
 * Notify When Free in a real VS Code: on a build another process holds, it takes no lock and no
 * place in line; clicked again it takes the wish back; once the holder lets go, one notification
 * says the build is free, its Lock button locks it for this window, and the wish is forgotten.
 */
import { strict as assert } from 'assert';
import * as vscode from 'vscode';
import type { DevserverStagingApi } from '../../src/extension/extension';
import type { Prompts } from '../../src/extension/prompts';
import type { RowNode } from '../../src/extension/tree/provider';
import { cleanup, exitOf, tempDir, waitFor } from '../helpers';
import { api } from './activate.test';
import { holdWithCli, makeBuild } from './fixture';
import { nodeOf as walk } from './walk';

let ext: DevserverStagingApi;
let staticDir: string;
let saved: Prompts['notify'];
/** The notifications shown, and the button each answered with. */
const told: string[] = [];
let answer: (message: string) => string | undefined = () => undefined;

const nodeOf = (tag: string): Promise<RowNode> => walk(ext, staticDir, tag);

describe('Notify When Free', function () {
  before(async () => {
    ext = await api();
    staticDir = tempDir('dss-notify-ui-');
    makeBuild(staticDir, 'eve/R1');
    await vscode.workspace.getConfiguration('devserverStaging').update('staticDirs', [staticDir], vscode.ConfigurationTarget.Global);
    await waitFor(() => nodeOf('eve/R1').catch(() => undefined), 5_000, 'the fixture in the tree');
    saved = ext.prompts.notify;
    ext.prompts.notify = async (_severity, message) => {
      told.push(message);
      return answer(message);
    };
  });

  after(async () => {
    ext.prompts.notify = saved;
    await vscode.commands.executeCommand('devserverStaging.releaseWindowLock', await nodeOf('eve/R1').catch(() => undefined));
    await vscode.workspace.getConfiguration('devserverStaging').update('staticDirs', undefined, vscode.ConfigurationTarget.Global);
    cleanup(staticDir);
  });

  it('takes no lock, is taken back by a second click, and says once that the build is free, with a Lock button that locks it for this window', async () => {
    const holder = await holdWithCli(staticDir, 'eve/R1');
    await waitFor(() => (ext.states.entry(staticDir, 'eve/R1')?.state === 'held' ? true : undefined), 5_000, 'R1 shown held');
    const ref = { staticDir, tag: 'eve/R1' };
    await vscode.commands.executeCommand('devserverStaging.notifyWhenFree', await nodeOf('eve/R1'));
    assert.equal(ext.notices.wished(ref), true);
    assert.match(told.at(-1)!, /You will be told once when eve\/R1 is free/);
    await vscode.commands.executeCommand('devserverStaging.notifyWhenFree', await nodeOf('eve/R1'));
    assert.equal(ext.notices.wished(ref), false);
    assert.match(told.at(-1)!, /You will not be told when eve\/R1 is free/);
    await vscode.commands.executeCommand('devserverStaging.notifyWhenFree', await nodeOf('eve/R1'));
    assert.equal(ext.notices.wished(ref), true);
    // Asking took nothing: no lease, no place in the line.
    assert.equal(ext.windowLocks.has(staticDir, 'eve/R1'), false);
    assert.equal(ext.windowLocks.placeOf(staticDir, 'eve/R1'), undefined);

    answer = (m) => (/is free now/.test(m) ? 'Lock' : undefined);
    holder.kill('SIGTERM');
    await exitOf(holder);
    await waitFor(() => (ext.windowLocks.has(staticDir, 'eve/R1') ? true : undefined), 10_000, 'the Lock button to lock R1 for this window');
    assert.deepEqual(
      told.filter((m) => /is free now/.test(m)),
      ['eve/R1 is free now.'],
    );
    assert.equal(ext.notices.wished(ref), false, 'the wish is forgotten once told');
    // This window's own lock coming and going tells nothing more.
    await vscode.commands.executeCommand('devserverStaging.releaseWindowLock', await nodeOf('eve/R1'));
    await waitFor(() => (ext.states.entry(staticDir, 'eve/R1')?.state === 'free' ? true : undefined), 5_000, 'R1 shown free');
    assert.equal(told.filter((m) => /is free now/.test(m)).length, 1);
  });
});
