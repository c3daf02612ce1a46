/**
 * A co-user plants what every command prints: holder records whose fields hold newlines, escape
 * sequences, bidirectional overrides and C1 controls, a holder's time and history lines whose
 * times pass `Date.parse` but hold a newline (in a parenthesised comment), directories named with
 * a newline, with a bidi override, and with bytes that are not UTF-8, artifacts named alike. Each
 * command must print each value as one escaped cell: exactly the lines a benign directory gives,
 * no raw control or format character, valid UTF-8, JSON that strict parsers take (no lone
 * surrogate), times written anew from their parsed values. And a name that is not UTF-8 is listed
 * everywhere, never hidden, and `status` takes it as the listing printed it.
 */
import { strict as assert } from 'assert';
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { sha256Hex } from '../../../src/core/base/crypto';
import { HISTORY_DIR, LOCK_NAME, META_DIR, OWNER_FILE, TIMESTAMP_FILE } from '../../../src/core/base/protocol';
import { TOOL, cleanup, tempDir, waitFor } from '../../helpers';


/** A time `Date.parse` takes (the parenthesis is a comment to it) that holds a forged row. */
const FORGED_TIME = 'Jan 1 2024 (\nfree  board-FORGED)';
const FORGED_ROW = 'free  board-FORGED';
const HOSTILE = {
  user: 'mallory\u001b[2J\u001b[H',
  hostname: 'build\u202eevil',
  purpose: `nightly\n${FORGED_ROW}  nobody`,
  clientId: 'client\u0085x',
  acquiredAt: FORGED_TIME,
};
const BENIGN = { user: 'alice', hostname: 'buildhost', purpose: 'nightly', clientId: 'client1', acquiredAt: '2024-01-01T00:00:00.000Z' };

/** Tag segments on disk: a newline, a bidi override, a byte that is not UTF-8. */
const NEWLINE_NAME = `R2\n${FORGED_ROW}`;
const BIDI_NAME = 'R\u202e3';
const RAW_NAME = Buffer.from('R\xff', 'latin1');

interface Out {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderr: Buffer;
}

function tool(staticDir: string, args: readonly string[]): Promise<Out> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [TOOL, ...args], { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir }, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.once('error', reject);
    child.once('close', (code, signal) => resolve({ code, signal, stdout: Buffer.concat(out), stderr: Buffer.concat(err) }));
  });
}

/** Valid UTF-8 with no control character but newline and tab, no format character (bidi, zero width), no line separator. */
function clean(what: string, bytes: Buffer): string {
  const text = bytes.toString('utf8');
  assert.ok(Buffer.from(text, 'utf8').equals(bytes), `${what}: not valid UTF-8: ${JSON.stringify(text)}`);
  const bad = /(?![\n\t])[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u.exec(text);
  assert.equal(bad, null, `${what} writes ${JSON.stringify(bad?.[0])} as it is:\n${JSON.stringify(text)}`);
  for (const line of text.split('\n')) assert.ok(!line.startsWith(FORGED_ROW), `${what} shows a forged row: ${JSON.stringify(line)}`);
  return text;
}

const lines = (text: string): string[] => (text === '' ? [] : text.replace(/\n$/, '').split('\n'));

/** Every string in a parsed JSON value, keys too. */
function strings(v: unknown, out: string[] = []): string[] {
  if (typeof v === 'string') out.push(v);
  else if (Array.isArray(v)) for (const x of v) strings(x, out);
  else if (typeof v === 'object' && v !== null) {
    for (const [k, x] of Object.entries(v)) {
      out.push(k);
      strings(x, out);
    }
  }
  return out;
}

/** JSON (or JSON lines) that a strict consumer takes: clean bytes, and no lone surrogate in any string. */
function json(what: string, bytes: Buffer, jsonLines = false): unknown[] {
  const text = clean(what, bytes);
  const values = jsonLines ? lines(text).map((l) => JSON.parse(l) as unknown) : [JSON.parse(text) as unknown];
  for (const s of strings(values)) assert.ok(!/\p{Cs}/u.test(s), `${what}: a lone surrogate in ${JSON.stringify(s)}`);
  return values;
}

function owner(fields: typeof BENIGN, pid: number): string {
  return JSON.stringify({ ...fields, pid, token: `t${pid}`, staleMs: 3_600_000, refreshMs: 1_000, fence: 7 });
}

/** A lock as another host's holder leaves it: fresh, its record in place, judged by its heartbeat. */
function plantLock(area: string | Buffer, record: string): void {
  const lock = Buffer.concat([Buffer.from(area), Buffer.from(`/${LOCK_NAME}`)]);
  fs.mkdirSync(lock, { recursive: true });
  fs.writeFileSync(Buffer.concat([lock, Buffer.from(`/${OWNER_FILE}`)]), record);
}

describe('attack: values a co-user plants reach every command only as escaped cells, never as rows or control codes', function () {
  this.timeout(120_000);
  let root: string;
  let staticDir: string;
  let board: string;

  before(async () => {
    root = tempDir('dss-forged-');
    staticDir = path.join(root, 'static');
    board = path.join(staticDir, 'board');
    fs.mkdirSync(board, { recursive: true });
    plantLock(path.join(board, 'R0'), owner(BENIGN, 4242));
    plantLock(path.join(board, 'R1'), owner(HOSTILE, 4243));
    plantLock(Buffer.concat([Buffer.from(`${board}/`), RAW_NAME]), owner(BENIGN, 4244));
    for (const name of [NEWLINE_NAME, BIDI_NAME]) {
      fs.mkdirSync(path.join(board, name));
      fs.writeFileSync(path.join(board, name, TIMESTAMP_FILE), '');
    }
    // A damaged manifest: du's note names its path, newline and all.
    fs.writeFileSync(path.join(board, NEWLINE_NAME, '.devserver-staging.manifest.json'), 'not json');
    // A staged build with names a stager accepts (C1, bidi), then files planted beside them.
    const src = path.join(root, 'src');
    fs.mkdirSync(src);
    fs.writeFileSync(path.join(src, 'a\u202eb.bin'), 'a');
    fs.writeFileSync(path.join(src, 'c\u0085d.txt'), 'c');
    const staged = await tool(staticDir, ['stage', 'board/R5', src]);
    assert.equal(staged.code, 0, staged.stderr.toString());
    fs.writeFileSync(path.join(board, 'R5', `x\n${FORGED_ROW}`), '');
    fs.writeFileSync(path.join(board, 'R5', 'evil\u202e.txt'), '');
    fs.writeFileSync(Buffer.concat([Buffer.from(`${board}/R5/`), Buffer.from('\xff.bin', 'latin1')]), '');
    // History lines a co-user appends: a forged time, reason, tag and holder.
    const key = sha256Hex('board/R1');
    const segDir = path.join(staticDir, META_DIR, HISTORY_DIR, key.slice(0, 2), key);
    fs.mkdirSync(segDir, { recursive: true });
    const holder = { user: HOSTILE.user, hostname: HOSTILE.hostname, pid: 1, clientId: HOSTILE.clientId, purpose: HOSTILE.purpose };
    fs.writeFileSync(
      path.join(segDir, 'mallory.0.jsonl'),
      `${JSON.stringify({ tag: 'board/R1', kind: 'acquired', time: FORGED_TIME, holder, fence: 3 })}\n` +
        `${JSON.stringify({ tag: 'board/R1', kind: 'released', time: '2024-01-01T01:00:00.000Z', holder, reason: `done\n${FORGED_ROW}\u202e` })}\n`,
    );
  });

  after(() => cleanup(root));

  it('what was planted is there: the names as their bytes, a time Date.parse takes with a newline in it', () => {
    const names = fs.readdirSync(Buffer.from(board), { encoding: 'buffer' });
    for (const n of [Buffer.from(NEWLINE_NAME), Buffer.from(BIDI_NAME), RAW_NAME]) assert.ok(names.some((b) => b.equals(n)), n.toString('latin1'));
    assert.ok(Number.isFinite(Date.parse(FORGED_TIME)) && FORGED_TIME.includes('\n'));
  });

  it('list: one row per area, the name that is not UTF-8 among them; JSON a strict parser takes', async () => {
    const r = await tool(staticDir, ['list', 'board']);
    assert.equal(r.code, 0, r.stderr.toString());
    assert.equal(lines(r.stdout.toString()).length, 1 + 6, r.stdout.toString());
    const out = lines(clean('list', r.stdout));
    assert.ok(out.some((l) => l.includes('"board/R\\xff"')), 'the area named by a byte that is not UTF-8 is listed, escaped');
    assert.ok(out.some((l) => l.includes('"board/R2\\nfree  board-FORGED"')));
    assert.ok(out.some((l) => l.includes('"board/R\\u202e3"')));
    assert.ok(out.some((l) => l.includes('"mallory\\u001b[2J\\u001b[H"@"build\\u202eevil"')));
    const [entries] = json('list --json', (await tool(staticDir, ['--json', 'list', 'board'])).stdout) as [{ tag: string }[]];
    assert.equal(entries.length, 6);
    assert.ok(entries.some((e) => e.tag === '"board/R\\xff"'), JSON.stringify(entries.map((e) => e.tag)));
  });

  it('status: as many lines as for a benign holder, the time written anew; the name that is not UTF-8 taken as listed', async () => {
    const benign = await tool(staticDir, ['status', 'board/R0']);
    const hostile = await tool(staticDir, ['status', 'board/R1']);
    assert.equal(hostile.code, 0, hostile.stderr.toString());
    assert.equal(lines(hostile.stdout.toString()).length, lines(benign.stdout.toString()).length, hostile.stdout.toString());
    const text = clean('status', hostile.stdout);
    assert.match(text, /acquired: {3}2024-01-01T00:00:00Z /);
    assert.ok(!text.includes('Jan 1'), text);
    const raw = await tool(staticDir, ['status', '"board/R\\xff"']);
    assert.equal(raw.code, 0, raw.stderr.toString());
    assert.ok(!raw.stdout.toString().includes('no such staging area'), raw.stdout.toString());
    const rawText = clean('status of the raw name', raw.stdout);
    assert.match(rawText, /^"board\/R\\xff": held\n/);
    const [info] = json('status --json', (await tool(staticDir, ['--json', 'status', '"board/R\\xff"'])).stdout) as [{ tag: string; exists: boolean; state: string }];
    assert.deepEqual([info.tag, info.exists, info.state], ['"board/R\\xff"', true, 'held']);
    const [held] = json('status --json', (await tool(staticDir, ['--json', 'status', 'board/R1'])).stdout) as [{ holder: { acquiredAt: string } }];
    assert.equal(held.holder.acquiredAt, '2024-01-01T00:00:00.000Z');
  });

  it('du and prune --dry-run: one row per area, the damaged manifest noted on one line', async () => {
    const du = await tool(staticDir, ['du', 'board']);
    assert.equal(du.code, 0, du.stderr.toString());
    // Header, six areas, the total, a blank line and the note.
    assert.equal(lines(du.stdout.toString()).length, 1 + 6 + 1 + 2, du.stdout.toString());
    const rows = lines(clean('du', du.stdout));
    assert.ok(rows.some((l) => l.startsWith('"board/R\\xff"')), rows.join('\n'));
    json('du --json', (await tool(staticDir, ['--json', 'du', 'board'])).stdout);
    const prune = await tool(staticDir, ['prune', 'board', '--keep', '0', '--dry-run']);
    assert.equal(prune.code, 0, prune.stderr.toString());
    assert.equal(lines(prune.stdout.toString()).length, 1 + 6 + 1, prune.stdout.toString());
    const pruned = lines(clean('prune', prune.stdout));
    // Names no command can lock are never removed: said, on their row.
    assert.ok(pruned.some((l) => /^skipped +"board\/R\\xff" .*not valid UTF-8/.test(l)), pruned.join('\n'));
    json('prune --json', (await tool(staticDir, ['--json', 'prune', 'board', '--keep', '0', '--dry-run'])).stdout);
  });

  it('watch: one snapshot line per build, the name that is not UTF-8 among them, text and JSON', async () => {
    for (const asJson of [false, true]) {
      const child = spawn(process.execPath, [TOOL, ...(asJson ? ['--json'] : []), 'watch', 'board'], { env: { ...process.env, DEVSERVER_STATIC_DIR: staticDir } });
      const chunks: Buffer[] = [];
      child.stdout.on('data', (b: Buffer) => chunks.push(b));
      const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      try {
        await waitFor(() => (lines(Buffer.concat(chunks).toString()).length >= 6 ? true : undefined), 20_000, 'the snapshot of the six builds');
      } finally {
        child.kill('SIGINT');
      }
      assert.equal(await exit, 130);
      const out = Buffer.concat(chunks);
      if (asJson) {
        const events = json('watch --json', out, true) as { tag: string }[];
        assert.equal(events.length, 6);
        assert.ok(events.some((e) => e.tag === '"board/R\\xff"'));
      } else {
        const text = lines(clean('watch', out));
        assert.equal(text.length, 6, text.join('\n'));
        assert.ok(text.some((l) => l.includes('"board/R\\xff"  held')), text.join('\n'));
      }
    }
  });

  it('verify and stage: artifact names escaped, one line per problem', async () => {
    const r = await tool(staticDir, ['verify', 'board/R5']);
    assert.equal(r.code, 1, r.stderr.toString());
    assert.equal(lines(r.stdout.toString()).length, 3 + 1, r.stdout.toString());
    const out = lines(clean('verify', r.stdout));
    assert.ok(out.some((l) => l.includes('"\\xff.bin"')), out.join('\n'));
    json('verify --json', (await tool(staticDir, ['--json', 'verify', 'board/R5'])).stdout);
    const src = path.join(root, 'src');
    const staged = await tool(staticDir, ['stage', 'board/R6', src]);
    assert.equal(staged.code, 0, staged.stderr.toString());
    assert.equal(lines(clean('stage', staged.stdout)).length, 2);
    clean('stage progress', staged.stderr);
    json('stage --json', (await tool(staticDir, ['--json', 'stage', '--add', 'board/R6', src])).stdout);
  });

  it('history: one row per event, times written anew, reasons on their row', async () => {
    const r = await tool(staticDir, ['history', 'board/R1']);
    assert.equal(r.code, 0, r.stderr.toString());
    assert.equal(lines(r.stdout.toString()).length, 1 + 2, r.stdout.toString());
    const rows = lines(clean('history', r.stdout));
    assert.ok(rows[1].startsWith('2024-01-01T00:00:00Z  acquired'), rows[1]);
    const events = json('history --json', (await tool(staticDir, ['--json', 'history', 'board/R1'])).stdout, true) as { time: string }[];
    assert.deepEqual(
      events.map((e) => e.time),
      ['2024-01-01T00:00:00.000Z', '2024-01-01T01:00:00.000Z'],
    );
  });

  it('lock, force-release, destroy and errors: one line each, escaped', async () => {
    const held = await tool(staticDir, ['lock', 'board/R1', '--', 'true']);
    assert.equal(held.code, 3);
    assert.equal(lines(clean('lock (held)', held.stderr)).length, 1);
    assert.match(held.stderr.toString(), /"mallory\\u001b\[2J\\u001b\[H"@"build\\u202eevil"/);
    const raw = await tool(staticDir, ['lock', '"board/R\\xff"', '--', 'true']);
    assert.equal(raw.code, 2);
    assert.equal(lines(clean('lock (raw name)', raw.stderr)).length, 1);
    assert.match(raw.stderr.toString(), /"board\/R\\xff".*not valid UTF-8/);
    const jsonErr = await tool(staticDir, ['--json', 'lock', 'board/R1', '--', 'true']);
    json('lock --json error', jsonErr.stderr);
    const released = await tool(staticDir, ['force-release', 'board/R1']);
    assert.equal(released.code, 0, released.stderr.toString());
    assert.equal(lines(clean('force-release', released.stdout)).length, 1);
    // The holder it removed is in the history now, with its fields.
    const after = await tool(staticDir, ['history', 'board/R1']);
    assert.equal(lines(clean('history after force-release', after.stdout)).length, 1 + 3);
    const destroyed = await tool(staticDir, ['destroy', '"board/R\\u202e3"']);
    assert.equal(destroyed.code, 0, destroyed.stderr.toString());
    assert.deepEqual(lines(clean('destroy', destroyed.stdout)), ['Destroyed "board/R\\u202e3".']);
    const bad = await tool(staticDir, ['verify', `"board/R2\\n${FORGED_ROW}"`]);
    assert.equal(bad.code, 2);
    assert.equal(lines(clean('an error naming a tag with a newline', bad.stderr)).length, 1);
  });
});
