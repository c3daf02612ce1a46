/**
 * `history` and `history --stats` (text and `--json`) of lines a co-user plants in a build's
 * history: durations of 2^53 ms, times at the ends of what a date can be (year -271821 and
 * +275760), times that are no time, negative counts, fields made to forge a row or act on the
 * terminal, a line of 10 MB, and hundreds of thousands of events of one holder spread over many
 * hosts' segments. Every command ends 0, prints no forged row or raw control character, shows the
 * planted text escaped (the attack reached it), and `--stats` holds a bounded number of events of a
 * build whatever is planted (it ends within a small heap).
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { HISTORY_DIR, META_DIR, historyDirOf, historySegmentName } from '../../../src/core/base/protocol';
import { changes, fingerprint, plantCanaries } from '../../attack';
import { cleanup, cli, tempDir } from '../../helpers';

const TAG = 'board/R1';
const FORGED = 'FORGED';
/** What a terminal would obey: C0 but newline, DEL, C1, and format and separator characters. */
const OBEYED = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\p{Cf}\u2028\u2029]/u;

const segmentDir = (staticDir: string, tag = TAG): string => path.join(staticDir, META_DIR, HISTORY_DIR, ...historyDirOf(tag));
const iso = (ms: number): string => new Date(ms).toISOString();
const actor = (user: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ user, hostname: 'elsewhere', pid: 42, clientId: 'c', ...extra });

/** The lines a co-user plants, each made to crash a reader, forge a row, or lie about a time. */
function forgedLines(nowMs: number): string[] {
  const ev = (o: Record<string, unknown>): string => JSON.stringify({ tag: TAG, ...o });
  return [
    ev({ kind: 'acquired', time: '+275760-09-13T00:00:00.000Z', holder: actor('future'), waitedMs: Number.MAX_SAFE_INTEGER, fence: 1 }),
    ev({ kind: 'acquired', time: iso(nowMs - 3_600_000), holder: actor('bigwait'), waitedMs: Number.MAX_SAFE_INTEGER, fence: 2 }),
    ev({ kind: 'released', time: iso(nowMs - 1_800_000), holder: actor('bigwait'), heldMs: Number.MAX_SAFE_INTEGER, fence: 2 }),
    ev({ kind: 'acquired', time: iso(nowMs - 1_700_000), holder: actor(`[x](command:workbench.action.quit)\u202eevil\n${FORGED} row`), fence: 3 }),
    ev({ kind: 'force-released', time: iso(nowMs - 600_000), holder: actor(`mallory\n${FORGED}  board/R9  free`, { purpose: '\u001b]0;pwned\u0007' }), previous: { user: '[y](command:x)', hostname: 'h\u2028x', pid: 1, clientId: 'c' }, fence: 3, heldMs: 1e308 }),
    ev({ kind: 'taken-over', time: '-271821-04-20T00:00:00.000Z', holder: actor('past'), previous: { user: 'p' }, fence: 4 }),
    ev({ kind: 'released', time: 'NaN', holder: actor('nan') }),
    ev({ kind: 'released', time: `2026-01-01T00:00:00Z (\n${FORGED})`, holder: actor('comment'), fence: 9 }),
    ev({ kind: 'released', time: iso(nowMs), holder: { user: 'negative', hostname: 'h', pid: -1 } }),
    ev({ kind: 'acquired', time: iso(nowMs - 100_000), holder: actor('negwait'), waitedMs: -5000, heldMs: -1, fence: 5 }),
    ev({ kind: 'released', time: iso(nowMs - 200_000), holder: actor('negwait'), fence: 5 }),
    ev({ kind: 'released', time: { toString: 1 }, holder: actor('object-time') }),
    `{"tag":"${TAG}","kind":"released","time":"${iso(nowMs)}","holder":${JSON.stringify(actor('dup'))},"holder":{"user":"second","hostname":"h","pid":7}}`,
    '{"tag":',
    '[1,2,3]',
  ];
}

function assertInert(what: string, text: string): void {
  const at = OBEYED.exec(text);
  assert.equal(at, null, `${what} prints ${JSON.stringify(at?.[0])}`);
  for (const line of text.split('\n')) assert.ok(!line.startsWith(FORGED) && !/^\S*\s+FORGED/.test(line), `${what} prints a forged row: ${JSON.stringify(line)}`);
}

describe('attack: forged history lines read by history and history --stats', function () {
  this.timeout(120_000);
  let root: string;
  let staticDir: string;
  let outside: string;
  let before: Map<string, string>;
  beforeEach(() => {
    root = tempDir('dss-attack-history-');
    staticDir = path.join(root, 'static');
    outside = path.join(root, 'outside');
    fs.mkdirSync(path.join(staticDir, TAG), { recursive: true });
    plantCanaries(outside);
    before = fingerprint(outside);
  });
  afterEach(() => {
    assert.deepEqual(changes(outside, before, fingerprint(outside)), [], 'nothing outside the static directory changed');
    cleanup(root);
  });

  it('prints hostile lines as text and figures, ends 0 for each form, and reads past a line of 10 MB', async () => {
    const nowMs = Date.now();
    const dir = segmentDir(staticDir);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, historySegmentName('elsewhere', 0)), `${forgedLines(nowMs).join('\n')}\n`);
    // A line of 10 MB, then a line after it that is read.
    const huge = JSON.stringify({ tag: TAG, kind: 'acquired', time: iso(nowMs - 50_000), holder: actor('x'.repeat(10_000_000)), fence: 6 });
    fs.writeFileSync(path.join(dir, historySegmentName('big', 0)), `${huge}\n${JSON.stringify({ tag: TAG, kind: 'released', time: iso(nowMs - 40_000), holder: actor('after-big'), fence: 6 })}\n`);
    let runs = 0;
    for (const args of [['history', TAG], ['history'], ['history', '--stats'], ['history', '--stats', TAG, '--since', '1w']]) {
      for (const json of [false, true]) {
        const r = await cli(staticDir, json ? ['--json', ...args] : args);
        const what = `${json ? '--json ' : ''}${args.join(' ')}`;
        assert.equal(r.code, 0, `${what}: ${r.stderr}`);
        assertInert(what, r.stdout + r.stderr);
        if (json) {
          for (const line of r.stdout.trim().split('\n')) JSON.parse(line);
          assert.doesNotMatch(r.stdout, /\\ud[89a-f]/i, 'no lone surrogate');
        }
        // The planted breaker reached the output, escaped: the attack was read.
        assert.match(r.stdout, json ? /mallory\\n/ : /"mallory\\nFORGED {2}board\/R9 {2}free@elsewhere:42"/, what);
        if (args.includes('--stats')) {
          // The 2^53 ms wait counted as a figure, and the times written from their values.
          assert.match(r.stdout, json ? /"waitedMs":9007199254740991/ : /104249991 d/, what);
        } else {
          assert.match(r.stdout, /after-big/, `${what}: the line after the 10 MB one`);
          assert.match(r.stdout, /\+275760-09-13T00:00:00/, what);
          assert.match(r.stdout, /-271821-04-20T00:00:00/, what);
          assert.doesNotMatch(r.stdout, /object-time|negative|comment/, `${what}: lines that are no event are left out`);
        }
        runs++;
      }
    }
    assert.equal(runs, 8);
  });

  it('--stats of 400,000 events of one holder in 40 hosts\' segments and 150,000 dated far ahead, with a heap of 192 MiB: a bounded number held, the real ones counted, no crash', async () => {
    const nowMs = Date.now();
    const dir = segmentDir(staticDir);
    fs.mkdirSync(dir, { recursive: true });
    const holder = JSON.stringify(actor('mallory', { purpose: 'p'.repeat(200) }));
    const events = 400_000;
    const hosts = 40;
    for (let h = 0; h < hosts; h++) {
      const lines: string[] = [];
      for (let k = h; k < events; k += hosts) {
        const time = iso(nowMs - 86_000_000 + k * (86_000_000 / events));
        lines.push(`{"tag":"${TAG}","kind":"${k % 2 === 0 ? 'acquired' : 'released'}","time":"${time}","holder":${holder},"fence":${1 + Math.floor(k / 2)},"waitedMs":2000}\n`);
      }
      fs.writeFileSync(path.join(dir, historySegmentName(`host${h}`, 0)), lines.join(''));
    }
    // And more than the bound of events dated far ahead, which a reader keeping the newest would keep instead.
    const ahead: string[] = [];
    for (let k = 0; k < 150_000; k++) ahead.push(`{"tag":"${TAG}","kind":"released","time":"${iso(Date.parse('9999-01-01T00:00:00Z') + k)}","holder":{"user":"ahead","hostname":"h","pid":1},"fence":${10_000_000 + k}}\n`);
    fs.writeFileSync(path.join(dir, historySegmentName('ahead', 0)), ahead.join(''));
    // A history planted 400,000 events deep against a heap of 192 MiB stands for one 20 times deeper
    // against the default heap: holding every event, the command runs out of memory and aborts.
    const r = await cli(staticDir, ['--json', 'history', '--stats'], { NODE_OPTIONS: '--max-old-space-size=192' });
    assert.equal(r.code, 0, `${r.code}: ${r.stderr.slice(-500)}`);
    // The attack was read: the holder's holdings and waits are counted.
    const figures = JSON.parse(r.stdout) as { holds: number; waits: number; lanes: { usage: { tag: string } }[] };
    assert.ok(figures.holds >= 40_000 && figures.waits >= 40_000, r.stdout.slice(0, 300));
    assert.equal(figures.lanes[0]?.usage.tag, TAG);
  });
});
