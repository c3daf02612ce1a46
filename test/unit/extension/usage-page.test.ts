/**
 * The Show Usage page, made from the figures the core computes from real history files: its
 * timeline (a lane per build, a bar per holding by how it ended, waits), its lists, its day/week
 * toggle with no script; a strict Content-Security-Policy with its one style sheet by nonce, and
 * theme colours only; a co-user's hostile user, host, purpose or tag shown as text, never as an
 * element, attribute, link or command.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { DAY_MS, WEEK_MS, historyStats, type UsageFigures } from '../../../src/core/log/history';
import { HISTORY_DIR, META_DIR, historyDirOf, historySegmentName } from '../../../src/core/base/protocol';
import { type UsageWords, usagePage } from '../../../src/extension/usage/usagePage';
import { cleanup, tempDir } from '../../helpers';

const words: UsageWords = {
  title: 'Usage of',
  everything: 'every build',
  lastDay: 'Last day',
  lastWeek: 'Last week',
  totals: (f: UsageFigures) => `${f.builds} builds used, ${f.holds} holdings, ${f.waits} waits`,
  nothing: 'Nothing.',
  ends: { released: 'released', destroyed: 'destroyed', lost: 'lost', 'force-released': 'force-released', 'taken-over': 'expired', unrecorded: 'ended', open: 'still held' },
  waited: 'waited',
  legendWait: 'waiting',
  omitted: (n) => `${n} more`,
  tick: (ms) => new Date(ms).toISOString().slice(11, 16),
  duration: (ms) => `${Math.round(ms / 1000)} s`,
  mostContended: 'Most contended',
  longestWaits: 'Longest waits',
  forceReleases: 'Force-releases',
  noneInWindow: 'None.',
  headers: { build: 'Build', holds: 'Holdings', held: 'Held', waits: 'Waits', waited: 'Waited', longest: 'Longest', who: 'Who', gotItAt: 'Got it at', when: 'When', holder: 'Holder', by: 'By' },
  time: (ms) => new Date(ms).toISOString(),
};

const NONCE = 'abcdefABCDEF0123456789';

/** The elements and attributes the page may have: anything else came from a name. */
const ELEMENTS = new Set(['html', 'head', 'meta', 'style', 'title', 'body', 'h1', 'h2', 'p', 'input', 'label', 'section', 'svg', 'line', 'text', 'g', 'rect', 'div', 'span', 'table', 'thead', 'tbody', 'tr', 'th', 'td']);
const ATTRIBUTES = new Set(['charset', 'http-equiv', 'content', 'name', 'nonce', 'class', 'type', 'id', 'checked', 'for', 'viewBox', 'width', 'height', 'role', 'xmlns', 'x', 'y', 'x1', 'x2', 'y1', 'y2', 'aria-hidden']);

/** Every tag of `html`: each `<` must open one (or close one, or be the doctype), with known attributes only. */
function checkMarkup(html: string): { elements: Map<string, number> } {
  const elements = new Map<string, number>();
  const tag = /<(\/?)([A-Za-z][\w-]*)((?:\s+[A-Za-z][\w-]*(?:="[^"<>]*")?)*)\s*\/?>|<!DOCTYPE html>/g;
  let matched = 0;
  for (const m of html.matchAll(tag)) {
    matched++;
    if (m[2] === undefined) continue;
    assert.ok(ELEMENTS.has(m[2]), `an element <${m[2]}> in the page`);
    for (const a of (m[3] ?? '').matchAll(/\s+([A-Za-z][\w-]*)(?:="[^"]*")?/g)) assert.ok(ATTRIBUTES.has(a[1]), `an attribute ${a[1]} on <${m[2]}>`);
    if (m[1] === '') elements.set(m[2], (elements.get(m[2]) ?? 0) + 1);
  }
  assert.equal((html.match(/</g) ?? []).length, matched, 'every < in the page opens or closes a known tag');
  return { elements };
}

describe('the Show Usage page', function () {
  this.timeout(30_000);
  let root: string;
  let staticDir: string;
  const now = Date.parse('2026-03-10T12:00:00Z');
  const at = (ms: number): string => new Date(now - ms).toISOString();

  beforeEach(() => {
    root = tempDir('dss-usage-page-');
    staticDir = path.join(root, 'static');
    fs.mkdirSync(staticDir);
  });
  afterEach(() => cleanup(root));

  function write(tag: string, lines: object[]): void {
    const dir = path.join(staticDir, META_DIR, HISTORY_DIR, ...historyDirOf(tag));
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, historySegmentName('ws1', 0)), lines.map((l) => `${JSON.stringify(l)}\n`).join(''));
  }

  async function page(scope = ''): Promise<string> {
    const [day, week] = await historyStats(staticDir, { scope, windowsMs: [DAY_MS, WEEK_MS], nowMs: now });
    return usagePage({ staticDir, scope, day, week, nonce: NONCE, words });
  }

  it('draws a lane per build, a bar per holding by how it ended, the waits, and the lists, for the day and the week', async () => {
    const who = (user: string, pid: number): object => ({ user, hostname: 'ws1', pid, clientId: `${user}${pid}` });
    write('eve/R1', [
      { tag: 'eve/R1', kind: 'acquired', time: at(5 * 3_600_000), holder: who('ann', 1), fence: 1, waitedMs: 2 },
      { tag: 'eve/R1', kind: 'released', time: at(4 * 3_600_000), holder: who('ann', 1), fence: 1, heldMs: 3_600_000 },
      { tag: 'eve/R1', kind: 'acquired', time: at(3 * 3_600_000), holder: who('bob', 2), fence: 2, waitedMs: 600_000 },
      { tag: 'eve/R1', kind: 'force-released', time: at(2 * 3_600_000), holder: who('cy', 3), fence: 2, heldMs: 3_600_000, previous: who('bob', 2) },
      { tag: 'eve/R1', kind: 'acquired', time: at(3_600_000), holder: who('dan', 4), fence: 3 },
    ]);
    write('eve/R2', [{ tag: 'eve/R2', kind: 'released', time: at(3 * DAY_MS), holder: who('old', 5), fence: 1, heldMs: 60_000 }]);
    const html = await page('eve');
    const { elements } = checkMarkup(html);
    const [day, week] = html.split('<section class="window week">');
    assert.equal((day.match(/<g class="lane">/g) ?? []).length, 1, 'the day: one lane, eve/R1');
    assert.equal((week.match(/<g class="lane">/g) ?? []).length, 2, 'the week: two lanes');
    for (const end of ['released', 'force-released', 'open']) assert.equal((day.match(new RegExp(`<rect class="hold ${end}" [^>]*height="13">`, "g")) ?? []).length, 1, end);
    assert.equal((day.match(/<rect class="wait" [^>]*height="5">/g) ?? []).length, 1, 'one wait drawn (2 ms is no wait)');
    assert.match(day, /bob@ws1:2: force-released — cy@ws1:3, 3600 s/);
    assert.match(day, /<h2>Force-releases<\/h2><table>.*<td class="tag">eve\/R1<\/td><td>bob@ws1:2<\/td><td>cy@ws1:3<\/td>/s);
    assert.match(day, /<h2>Longest waits<\/h2><table>.*<td class="n">600 s<\/td><td class="tag">eve\/R1<\/td><td>bob@ws1:2<\/td>/s);
    assert.equal(elements.get('input'), 2, 'the day/week toggle: two radio buttons');
    assert.match(html, /<input class="toggle" type="radio" name="window" id="w-day" checked>/);
    assert.match(html, /#w-day:checked ~ \.day, #w-week:checked ~ \.week \{ display: block; \}/);
  });

  it('a strict policy: nothing loads, no script runs, the one style sheet by nonce; colours from the theme only', async () => {
    write('eve/R1', [{ tag: 'eve/R1', kind: 'acquired', time: at(60_000), holder: { user: 'a', hostname: 'h', pid: 1, clientId: 'c' }, fence: 1 }]);
    const html = await page();
    const csp = /<meta http-equiv="Content-Security-Policy" content="([^"]*)">/.exec(html)?.[1];
    assert.ok(csp !== undefined, 'a policy');
    const rules = new Map(csp.split(';').map((r) => r.trim().split(/\s+/)).map(([k, ...v]) => [k, v.join(' ')]));
    assert.equal(rules.get('default-src'), "'none'");
    assert.equal(rules.get('script-src'), "'none'");
    assert.equal(rules.get('style-src'), `'nonce-${NONCE}'`);
    assert.ok(html.indexOf('Content-Security-Policy') < html.indexOf('<style'), 'the policy comes before anything it governs');
    assert.equal((html.match(/<style/g) ?? []).length, 1);
    assert.match(html, new RegExp(`<style nonce="${NONCE}">`));
    assert.doesNotMatch(html, /style="|<script|<link|<img|<iframe|href|src=|url\(/i);
    const style = /<style[^>]*>([\s\S]*?)<\/style>/.exec(html)![1];
    assert.doesNotMatch(style, /#[0-9a-f]{3,8}\b|rgba?\(|hsl/i, 'no colour of its own');
    assert.match(style, /var\(--vscode-charts-red\)/);
    assert.throws(() => usagePage({ staticDir, scope: '', day: {} as UsageFigures, week: {} as UsageFigures, nonce: `x' 'unsafe-inline`, words }), /nonce/);
  });

  it('a hostile user, host, purpose or tag is text: no element, attribute, link or command comes from it', async () => {
    const tag = 'eve/<img src=x onerror=alert(1)>';
    const evil = {
      user: '<script>alert(1)</script>',
      hostname: '"><svg onload=alert(2)>\u202e',
      pid: 7,
      clientId: 'x',
      purpose: '[Destroy](command:devserverStaging.destroy) <a href="command:devserverStaging.destroy">go</a> &amp; \n</title><script>',
    };
    write(tag, [
      { tag, kind: 'acquired', time: at(3_600_000), holder: evil, fence: 1, waitedMs: 120_000 },
      { tag, kind: 'force-released', time: at(1_800_000), holder: { ...evil, user: "' onmouseover='alert(3)" }, fence: 1, heldMs: 1_800_000, previous: evil },
    ]);
    const html = await page('eve');
    checkMarkup(html);
    assert.doesNotMatch(html, /<script|<img|<svg onload|<a /i);
    assert.doesNotMatch(html, /\u202e/, 'a bidi override is shown as an escape');
    assert.match(html, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/);
    assert.match(html, /eve\/&lt;img src=x onerror=alert\(1\)&gt;/);
    assert.match(html, /&#39; onmouseover=&#39;alert\(3\)/);
    assert.match(html, /&amp;amp;/, 'an entity in a name is shown as written');
  });
});
