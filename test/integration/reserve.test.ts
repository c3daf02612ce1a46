/**
 * Reservations in a real VS Code: Reserve… asks a length and a note and leaves the build held for
 * the user (not the window); the row says whose and until when; Extend Reservation… moves the end
 * and Release Reservation lets it go; another user's reservation offers Force Release… instead.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import type { DevserverStagingApi } from '../../src/extension/extension';
import type { Prompts } from '../../src/extension/prompts';
import type { RowNode } from '../../src/extension/tree/provider';
import type { LockInfo } from '../../src/core';
import { cleanup, cli, tempDir, waitFor } from '../helpers';
import { api } from './activate.test';
import { makeBuild } from './fixture';
import { nodeOf as walk } from './walk';

let ext: DevserverStagingApi;
let staticDir: string;
let saved: Pick<Prompts, 'pickOne' | 'input'>;
/** The labels of the lengths offered, and the one the test picks. */
let offered: string[] = [];
let pick = '';
let note: string | undefined = '';

const nodeOf = (tag: string): Promise<RowNode> => walk(ext, staticDir, tag);
const rowOf = async (tag: string): Promise<vscode.TreeItem> => ext.tree.getTreeItem(await nodeOf(tag));

async function statusOf(tag: string): Promise<LockInfo> {
  const r = await cli(staticDir, ['--json', 'status', tag]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as LockInfo;
}

describe('reservations in the view', function () {
  before(async () => {
    ext = await api();
    staticDir = tempDir('dss-reserve-ui-');
    for (const v of ['R1', 'R2']) makeBuild(staticDir, `eve/${v}`);
    await vscode.workspace.getConfiguration('devserverStaging').update('staticDirs', [staticDir], vscode.ConfigurationTarget.Global);
    await waitFor(() => nodeOf('eve/R1').catch(() => undefined), 5_000, 'the fixture in the tree');
    saved = { pickOne: ext.prompts.pickOne, input: ext.prompts.input };
    ext.prompts.pickOne = async (items) => {
      offered = items.map((i) => i.label);
      return items.find((i) => i.label === pick);
    };
    ext.prompts.input = async () => note;
  });

  after(async () => {
    Object.assign(ext.prompts, saved);
    await vscode.workspace.getConfiguration('devserverStaging').update('staticDirs', undefined, vscode.ConfigurationTarget.Global);
    cleanup(staticDir);
  });

  it('Reserve… holds the build for the user with a note, Extend Reservation… moves its end, Release Reservation lets it go', async () => {
    pick = '4 hours';
    note = 'flashing DUT-3';
    await vscode.commands.executeCommand('devserverStaging.reserve', await nodeOf('eve/R1'));
    assert.deepEqual(offered, ['1 hour', '4 hours', '1 day', 'Custom…']);
    const reserved = await statusOf('eve/R1');
    assert.equal(reserved.state, 'held');
    assert.equal(reserved.holder?.purpose, 'flashing DUT-3');
    assert.ok(reserved.reservation !== undefined && reserved.reservation.leftMs > 3.9 * 3_600_000 && reserved.reservation.leftMs <= 4 * 3_600_000, JSON.stringify(reserved.reservation));
    // Not this window's: the window holds no lease on it, and it outlives the window.
    assert.equal(ext.windowLocks.has(staticDir, 'eve/R1'), false);
    const row = await waitFor(async () => {
      const item = await rowOf('eve/R1');
      return item.contextValue === 'build.held.myReservation' ? item : undefined;
    }, 5_000, 'R1 shown as the user\'s reservation');
    assert.match(String(row.description), /^reserved by you until \S.* · flashing DUT-3$/);

    pick = '1 day';
    await vscode.commands.executeCommand('devserverStaging.extendReservation', await nodeOf('eve/R1'));
    const extended = await statusOf('eve/R1');
    assert.equal(extended.holder?.token, reserved.holder?.token, 'the same reservation');
    assert.ok(extended.reservation!.leftMs > 23 * 3_600_000, JSON.stringify(extended.reservation));
    // The row follows the new end (the view hears the lock touched, and judges it again).
    await waitFor(async () => (ext.states.entry(staticDir, 'eve/R1')?.reservation?.until === extended.reservation!.until ? true : undefined), 5_000, 'the view to see the new end');

    await vscode.commands.executeCommand('devserverStaging.releaseReservation', await nodeOf('eve/R1'));
    assert.equal(fs.existsSync(path.join(staticDir, 'eve/R1', 'devserver.lock')), false);
    await waitFor(async () => ((await rowOf('eve/R1')).contextValue === 'build.free' ? true : undefined), 5_000, 'R1 shown free');
  });

  it("another user's reservation is shown as theirs, with Force Release… rather than Extend or Release", async () => {
    const r = await cli(staticDir, ['reserve', 'eve/R2', '--for', '2h', '--note', 'x\u001b[31m](command:workbench.action.quit)']);
    assert.equal(r.code, 0, r.stderr);
    // The kernel says whose it is: its work directory, given to another user.
    const lock = path.join(staticDir, 'eve/R2', 'devserver.lock');
    const work = fs.readdirSync(lock).find((n) => n.startsWith('work.'))!;
    fs.chownSync(path.join(lock, work), 65534, 65534);
    fs.utimesSync(lock, new Date(), new Date());
    const row = await waitFor(async () => {
      const item = await rowOf('eve/R2');
      return item.contextValue === 'build.held.reserved' ? item : undefined;
    }, 5_000, "R2 shown as another's reservation");
    const description = String(row.description);
    assert.match(description, /^reserved by root until /);
    assert.doesNotMatch(description, /\u001b/);
    // Extend on it does nothing but say so.
    const before = await statusOf('eve/R2');
    pick = '1 day';
    await vscode.commands.executeCommand('devserverStaging.extendReservation', await nodeOf('eve/R2'));
    assert.equal((await statusOf('eve/R2')).reservation?.until, before.reservation?.until);
    // Force Release… names it as a reservation, whose process says nothing; No keeps it.
    const asked: string[] = [];
    const confirm = ext.prompts.confirm;
    ext.prompts.confirm = async (message, detail) => (asked.push(`${message}\n${detail}`), false);
    try {
      await vscode.commands.executeCommand('devserverStaging.forceRelease', await nodeOf('eve/R2'));
    } finally {
      ext.prompts.confirm = confirm;
    }
    assert.equal(asked.length, 1);
    assert.match(asked[0], /eve\/R2: root@\S+ .*, reserved until .*\. A reservation is held for a person, who may still be using the build\./);
    assert.doesNotMatch(asked[0], /Its process/);
    // The note reaches the dialog inert: no escape character, no link.
    assert.doesNotMatch(asked[0], /\u001b|\]\(command:/);
    assert.ok(fs.existsSync(lock), 'kept after No');
    fs.chownSync(path.join(lock, work), 0, 0);
    const released = await cli(staticDir, ['release', 'eve/R2']);
    assert.equal(released.code, 0, released.stderr);
  });
});
