/**
 * The extension's notice that a reservation was broken, from what a co-user writes: after a real
 * force-release of this user's reservation, a line planted in the build's history with its token,
 * dated just after the real record, naming a breaker whose user, host and purpose hold links
 * (`[x](command:…)`), newlines, bidi and escape characters. The notice tells the planted breaker
 * (the attack reached it), and its words, as the editor puts them in a notification, make no link
 * by VS Code's reading (or a port of it), hold one line and no control or format character. Lines
 * dated far ahead, planted before, neither take the real breaker's place nor push it out.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { describeActor, explainLoss, history, inspect, type LostLease } from '../../../src/core';
import { HISTORY_DIR, META_DIR, historyDirOf } from '../../../src/core/base/protocol';
import { Notices, type Notice } from '../../../src/extension/model/notices';
import { notificationText } from '../../../src/extension/shown';
import { changes, fingerprint, plantCanaries } from '../../attack';
import { CLI, ROOT, cleanup, cli, run, tempDir } from '../../helpers';
import { installedWorkbench, linksIn, notificationParser, portedNotificationParser } from '../../vscodeText';

const COMMAND = 'command:workbench.action.terminal.sendSequence?%5B%7B%22text%22%3A%22id%5Cn%22%7D%5D';
/** Breakers as a co-user records them: each field made to act in a notification. */
const BREAKERS = [
  { user: `[Show Log](${COMMAND})`, hostname: 'h', purpose: 'p' },
  { user: 'boss', hostname: `[x](${COMMAND})\u202e\u2066gnp.exe`, purpose: `[y](${COMMAND})` },
  { user: 'R1\nYour reservation of eve/R2 was extended.', hostname: 'evil\u001b]0;title\u0007\u2028', purpose: '\u0085' },
];
const RAW = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/u;

/** Lines appended to a segment of the build's history, as a co-user can. */
function plant(staticDir: string, tag: string, lines: readonly object[]): void {
  const dir = path.join(staticDir, META_DIR, HISTORY_DIR, ...historyDirOf(tag));
  fs.appendFileSync(path.join(dir, 'planted.0.jsonl'), lines.map((l) => `${JSON.stringify(l)}\n`).join(''));
}

/** This user's reservation of `tag`, force-released for real from the host `elsewhere`, its lease gone; `before` runs first. */
async function brokenReservation(staticDir: string, tag: string, before: (fence: number) => void = () => undefined): Promise<{ notices: Notices; said: Notice[]; gone: LostLease[] }> {
  fs.mkdirSync(path.join(staticDir, tag), { recursive: true });
  fs.writeFileSync(path.join(staticDir, tag, 'staged.timestamp'), '');
  assert.equal((await cli(staticDir, ['reserve', tag, '--for', '1h', '--note', 'mine'])).code, 0);
  const notices = new Notices();
  const said: Notice[] = [];
  const gone: LostLease[] = [];
  notices.onNotice((n) => said.push(n));
  notices.onGone((l) => gone.push(l));
  const area = { staticDir, tag };
  const held = await inspect(staticDir, tag);
  assert.equal(held.reservation?.mine, true);
  notices.update(area, held, Date.now());
  before(held.holder!.fence!);
  const fr = await run('unshare', ['--uts', 'sh', '-c', 'hostname elsewhere && exec "$@"', 'sh', process.execPath, CLI, '--static-dir', staticDir, 'force-release', tag]);
  assert.equal(fr.code, 0, fr.stderr);
  return { notices, said, gone };
}

describe('attack: a broken reservation told from planted history lines', function () {
  this.timeout(60_000);

  it('tells the planted breaker as text: no link, one line, no control or format character', async () => {
    const workbench = installedWorkbench(ROOT);
    const parse = workbench !== undefined ? notificationParser(workbench) : portedNotificationParser;
    const root = tempDir('dss-attack-notices-');
    const staticDir = path.join(root, 'static');
    const outside = path.join(root, 'outside');
    plantCanaries(outside);
    const before = fingerprint(outside);
    try {
      let trials = 0;
      /** Raw, the words would have made a link. */
      let linked = 0;
      for (const [i, breaker] of BREAKERS.entries()) {
        const tag = `eve/R${i}`;
        let fence = 0;
        const { notices, said, gone } = await brokenReservation(staticDir, tag, (f) => (fence = f));
        const area = { staticDir, tag };
        // The co-user's line: the same token, dated just after the real record.
        plant(staticDir, tag, [{ tag, kind: 'force-released', time: new Date(Date.now() + 1_000).toISOString(), holder: { ...breaker, pid: 1, clientId: 'c' }, fence }]);
        notices.update(area, await inspect(staticDir, tag), Date.now());
        assert.equal(gone.length, 1);
        notices.lost(await explainLoss(gone[0]));
        const n = said[0];
        assert.ok(n !== undefined && n.kind === 'lost', JSON.stringify(said));
        // The attack reached the notice: the breaker told is the planted one.
        assert.equal(n.loss.by?.user, breaker.user);
        assert.equal(n.loss.by?.hostname, breaker.hostname);
        // As notifications.ts words it, and as Prompts.notify hands it to VS Code.
        const raw = `Your reservation of ${n.tag} was force-released by ${describeActor(n.loss.by)} at ${new Date(n.loss.at).toLocaleString()}.`;
        const shown = notificationText(raw);
        assert.deepEqual(linksIn(parse(shown)), [], shown);
        assert.ok(!RAW.test(shown) && !/[\r\n]/.test(shown), JSON.stringify(shown));
        if (linksIn(parse(raw)).length > 0) linked++;
        notices.dispose();
        trials++;
      }
      assert.equal(trials, BREAKERS.length);
      assert.equal(linked, 2, 'raw, the first two breakers make links');
      assert.deepEqual(changes(outside, before, fingerprint(outside)), []);
    } finally {
      cleanup(root);
    }
  });

  it('tells the real breaker, whatever lines dated far ahead say of the token: none of them is newest', async () => {
    const root = tempDir('dss-attack-notices-');
    const staticDir = path.join(root, 'static');
    try {
      const tag = 'eve/R9';
      // Planted before the force-release, as a co-user who guesses the token can: 60 lines dated in the year 10000.
      const { notices, said, gone } = await brokenReservation(staticDir, tag, (fence) =>
        plant(staticDir, tag, Array.from({ length: 60 }, (_, k) => ({ tag, kind: 'force-released', time: new Date(Date.parse('+010000-01-01T00:00:00Z') + k).toISOString(), holder: { user: 'boss', hostname: 'admin', pid: 1, clientId: 'c' }, fence }))),
      );
      notices.update({ staticDir, tag }, await inspect(staticDir, tag), Date.now());
      assert.equal(gone.length, 1);
      const loss = await explainLoss(gone[0]);
      notices.lost(loss);
      // The attack was there to read: the history holds the planted lines.
      assert.equal((await history(staticDir, { tag })).filter((e) => e.holder.user === 'boss').length, 60);
      assert.equal(loss.kind, 'force-released');
      assert.equal(loss.by?.hostname, 'elsewhere', JSON.stringify(loss.by));
      assert.equal(said.length, 1);
      notices.dispose();
    } finally {
      cleanup(root);
    }
  });
});
