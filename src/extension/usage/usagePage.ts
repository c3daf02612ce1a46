/**
 * The Show Usage page: a build's or folder's timeline over the last day and the last week (a
 * toggle made of two radio buttons and CSS, so the page runs no script at all), then the most
 * contended builds, the longest waits and the force-releases. A plain function of the core's
 * figures: the panel only shows what it returns. Its Content-Security-Policy allows nothing but
 * its own style sheet (by nonce); every co-user's text is escaped (`shown`), and the page has no
 * link, form or script for such text to become. Free of `vscode`.
 */
import type { BuildFigures, Hold, UsageFigures, Wait, Who } from '../../core';
import { esc, shown } from './html';
import { type TimelineWords, timelineSvg } from './timeline';

export interface UsageWords extends TimelineWords {
  /** "Usage of {0}", the scope as `shown`; `everything` for a whole static directory. */
  title: string;
  everything: string;
  lastDay: string;
  lastWeek: string;
  /** "{0} builds used, {1} holdings, {2} waits ({3} in all)". */
  totals: (f: UsageFigures) => string;
  nothing: string;
  legendWait: string;
  mostContended: string;
  longestWaits: string;
  forceReleases: string;
  noneInWindow: string;
  headers: {
    build: string;
    holds: string;
    held: string;
    waits: string;
    waited: string;
    longest: string;
    who: string;
    gotItAt: string;
    when: string;
    holder: string;
    by: string;
  };
  time: (ms: number) => string;
}

export interface UsagePageInput {
  staticDir: string;
  /** '' for every build of the static directory. */
  scope: string;
  day: UsageFigures;
  week: UsageFigures;
  /** A fresh random value for each page: the one style sheet the policy lets in carries it. */
  nonce: string;
  words: UsageWords;
}

const STYLE = `
body { font-family: var(--vscode-font-family); font-size: var(--vscode-font-size); color: var(--vscode-foreground); background: var(--vscode-editor-background); padding: 0 16px 16px; }
h1 { font-size: 1.3em; font-weight: 600; margin: 12px 0 2px; }
h2 { font-size: 1.05em; font-weight: 600; margin: 18px 0 6px; }
.where { color: var(--vscode-descriptionForeground); margin: 0 0 10px; }
.toggle { position: absolute; opacity: 0; }
.toggle + label { display: inline-block; padding: 3px 10px; margin-right: 4px; border: 1px solid var(--vscode-button-secondaryBackground, var(--vscode-panel-border)); border-radius: 2px; cursor: pointer; color: var(--vscode-button-secondaryForeground, var(--vscode-foreground)); background: var(--vscode-button-secondaryBackground, transparent); }
.toggle:checked + label { background: var(--vscode-button-background); color: var(--vscode-button-foreground); border-color: var(--vscode-button-background); }
.toggle:focus-visible + label { outline: 1px solid var(--vscode-focusBorder); outline-offset: 2px; }
.window { display: none; }
#w-day:checked ~ .day, #w-week:checked ~ .week { display: block; }
.totals { margin: 10px 0; }
.timeline { display: block; max-width: 1100px; }
.lane-bg { fill: transparent; }
.lane:nth-child(even) .lane-bg { fill: var(--vscode-list-hoverBackground); fill-opacity: 0.5; }
.lane-label, .tick-label { fill: var(--vscode-foreground); font-size: 13px; font-family: var(--vscode-editor-font-family); }
.tick-label { fill: var(--vscode-descriptionForeground); font-size: 11px; }
.tick { stroke: var(--vscode-editorRuler-foreground, var(--vscode-panel-border)); stroke-width: 0.5; }
.hold { stroke: var(--vscode-editor-background); stroke-width: 0.5; }
.released { fill: var(--vscode-charts-green); }
.destroyed { fill: var(--vscode-charts-blue); }
.lost { fill: var(--vscode-charts-yellow); }
.force-released { fill: var(--vscode-charts-red); }
.taken-over { fill: var(--vscode-charts-orange); }
.unrecorded { fill: var(--vscode-disabledForeground); }
.open { fill: var(--vscode-charts-purple); }
.wait { fill: var(--vscode-charts-foreground, var(--vscode-foreground)); fill-opacity: 0.8; }
.legend { display: flex; flex-wrap: wrap; gap: 14px; margin: 6px 0 0; color: var(--vscode-descriptionForeground); }
.legend svg { vertical-align: middle; margin-right: 4px; }
table { border-collapse: collapse; margin: 4px 0; }
th, td { text-align: left; padding: 2px 14px 2px 0; vertical-align: top; }
th { font-weight: 600; color: var(--vscode-descriptionForeground); border-bottom: 1px solid var(--vscode-panel-border); }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
td.tag { font-family: var(--vscode-editor-font-family); overflow-wrap: anywhere; }
.none { color: var(--vscode-descriptionForeground); }
`;

const ENDS: readonly Hold['end'][] = ['released', 'destroyed', 'lost', 'force-released', 'taken-over', 'unrecorded', 'open'];

function swatch(cls: string): string {
  return `<svg width="14" height="10" aria-hidden="true"><rect class="${cls}" x="0" y="0" width="14" height="10"/></svg>`;
}

function whoText(w: Who): string {
  return shown(`${w.user}@${w.hostname}${w.pid !== undefined ? `:${w.pid}` : ''}`);
}

function tableOf(header: readonly string[], rows: readonly string[][], empty: string): string {
  if (rows.length === 0) return `<p class="none">${esc(empty)}</p>`;
  return `<table><thead><tr>${header.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>${rows.map((r) => `<tr>${r.join('')}</tr>`).join('')}</tbody></table>`;
}

const td = (html: string, cls = ''): string => `<td${cls !== '' ? ` class="${cls}"` : ''}>${html}</td>`;

function windowSection(f: UsageFigures, which: 'day' | 'week', words: UsageWords): string {
  const h = words.headers;
  const parts = [`<section class="window ${which}">`, `<p class="totals">${esc(words.totals(f))}</p>`];
  if (f.builds === 0) {
    parts.push(`<p class="none">${esc(words.nothing)}</p></section>`);
    return parts.join('');
  }
  parts.push(timelineSvg(f, words));
  parts.push(
    `<div class="legend">${ENDS.map((e) => `<span>${swatch(`hold ${e}`)}${esc(words.ends[e])}</span>`).join('')}<span>${swatch('wait')}${esc(words.legendWait)}</span></div>`,
  );
  const contended = (u: BuildFigures): string[] => [td(shown(u.tag), 'tag'), td(esc(String(u.waits)), 'n'), td(esc(words.duration(u.waitedMs)), 'n'), td(esc(words.duration(u.longestWaitMs)), 'n'), td(esc(String(u.holds)), 'n'), td(esc(words.duration(u.heldMs)), 'n')];
  parts.push(`<h2>${esc(words.mostContended)}</h2>`, tableOf([h.build, h.waits, h.waited, h.longest, h.holds, h.held], f.contended.map(contended), words.noneInWindow));
  const wait = (w: Wait): string[] => [td(esc(words.duration(w.toMs - w.fromMs)), 'n'), td(shown(w.tag), 'tag'), td(whoText(w.who)), td(esc(words.time(w.toMs)))];
  parts.push(`<h2>${esc(words.longestWaits)}</h2>`, tableOf([h.waited, h.build, h.who, h.gotItAt], f.longestWaits.map(wait), words.noneInWindow));
  const release = (x: Hold): string[] => [td(esc(words.time(x.toMs))), td(shown(x.tag), 'tag'), td(whoText(x.holder)), td(x.by !== undefined ? whoText(x.by) : '?'), td(esc(words.duration(x.toMs - x.fromMs)), 'n')];
  parts.push(`<h2>${esc(words.forceReleases)}</h2>`, tableOf([h.when, h.build, h.holder, h.by, h.held], f.forceReleases.map(release), words.noneInWindow));
  parts.push('</section>');
  return parts.join('');
}

/** A nonce as the policy takes it: letters and digits only (anything else would be refused, or worse). */
const NONCE = /^[A-Za-z0-9]{16,64}$/;

export function usagePage(input: UsagePageInput): string {
  const { words } = input;
  if (!NONCE.test(input.nonce)) throw new Error('usagePage: the nonce must be 16 to 64 letters and digits');
  const scope = input.scope === '' ? esc(words.everything) : shown(input.scope);
  const csp = `default-src 'none'; style-src 'nonce-${input.nonce}'; img-src 'none'; script-src 'none'; font-src 'none'; connect-src 'none'; media-src 'none'; frame-src 'none'; form-action 'none'; base-uri 'none'`;
  return [
    '<!DOCTYPE html><html><head><meta charset="utf-8">',
    `<meta http-equiv="Content-Security-Policy" content="${csp}">`,
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<style nonce="${input.nonce}">${STYLE}</style>`,
    `<title>${esc(words.title)}</title></head><body>`,
    `<h1>${esc(words.title)} ${scope}</h1>`,
    `<p class="where">${shown(input.staticDir)}</p>`,
    `<input class="toggle" type="radio" name="window" id="w-day" checked><label for="w-day">${esc(words.lastDay)}</label>`,
    `<input class="toggle" type="radio" name="window" id="w-week"><label for="w-week">${esc(words.lastWeek)}</label>`,
    windowSection(input.day, 'day', words),
    windowSection(input.week, 'week', words),
    '</body></html>',
  ].join('\n');
}
