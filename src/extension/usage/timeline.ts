/**
 * The timeline of a window as SVG: one lane per build, a bar per holding coloured by how it
 * ended, a thin bar above it per wait, ticks along the time axis. Its colours are classes that
 * the page's style sheet gives VS Code's theme colours; every co-user's text is escaped (`shown`)
 * and only ever in a `<title>` or `<text>`. Free of `vscode`.
 */
import type { Hold, Lane, UsageFigures, Wait, Who } from '../../core';
import { esc, shown } from './html';

/** What the timeline says in words, in the user's language. */
export interface TimelineWords {
  /** How a holding ended, by `Hold['end']`. */
  ends: Record<Hold['end'], string>;
  waited: string;
  /** "{0} more not drawn". */
  omitted: (n: number) => string;
  /** A tick's label. */
  tick: (ms: number, stepMs: number) => string;
  duration: (ms: number) => string;
}

/**
 * The drawing's own units: it is scaled to the page's width (up to a bound in the style sheet), so
 * its words keep a readable size in a panel of 600 pixels or more; each lane's tag is written
 * above its bars, so the bars have the whole width.
 */
const WIDTH = 760;
const PAD = 6;
const LANE = 40;
const TOP = 22;
const LABEL_Y = 13;
const WAIT_Y = 17;
const WAIT = 5;
const BAR_Y = 23;
const BAR = 13;

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** Tick steps, the first that gives no more than 12 ticks. */
const STEPS = [HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, DAY, 2 * DAY, 7 * DAY, 30 * DAY];

const fmt = (n: number): string => (Math.round(n * 10) / 10).toString();

/** Who, with what for, as HTML: each of a co-user's words escaped on its own. */
function whoHtml(w: Who): string {
  return `${shown(`${w.user}@${w.hostname}${w.pid !== undefined ? `:${w.pid}` : ''}`)}${w.purpose !== undefined ? ` (${shown(w.purpose)})` : ''}`;
}

/** A lane's tag as it fits above the lane: the end of it, where builds of one folder differ. */
function laneLabel(tag: string): string {
  return tag.length <= 90 ? tag : `…${tag.slice(tag.length - 89)}`;
}

export function timelineSvg(f: UsageFigures, words: TimelineWords): string {
  const span = Math.max(1, f.untilMs - f.sinceMs);
  const plot = WIDTH - 2 * PAD;
  const x = (ms: number): number => PAD + (Math.min(Math.max(ms, f.sinceMs), f.untilMs) - f.sinceMs) * (plot / span);
  const height = TOP + Math.max(1, f.lanes.length) * LANE + 4;
  const out: string[] = [`<svg class="timeline" viewBox="0 0 ${WIDTH} ${height}" width="100%" role="img" xmlns="http://www.w3.org/2000/svg">`];
  const step = STEPS.find((s) => span / s <= 12) ?? STEPS[STEPS.length - 1];
  for (let t = Math.ceil(f.sinceMs / step) * step; t <= f.untilMs; t += step) {
    out.push(`<line class="tick" x1="${fmt(x(t))}" x2="${fmt(x(t))}" y1="${TOP - 16}" y2="${height}"/>`);
    // Beside its line, to the right: one at the right edge would be cut off.
    if (x(t) < WIDTH - 50) out.push(`<text class="tick-label" x="${fmt(x(t) + 3)}" y="${TOP - 8}">${esc(words.tick(t, step))}</text>`);
  }
  f.lanes.forEach((lane, i) => out.push(laneSvg(lane, TOP + i * LANE, x, words)));
  out.push('</svg>');
  return out.join('');
}

function laneSvg(lane: Lane, y: number, x: (ms: number) => number, words: TimelineWords): string {
  const tag = lane.usage.tag;
  const parts: string[] = [
    `<g class="lane">`,
    `<rect class="lane-bg" x="0" y="${y}" width="${WIDTH}" height="${LANE}"/>`,
    `<text class="lane-label" x="${PAD}" y="${y + LABEL_Y}"><title>${shown(tag)}${lane.omitted > 0 ? esc(` — ${words.omitted(lane.omitted)}`) : ''}</title>${shown(laneLabel(tag))}</text>`,
  ];
  for (const h of lane.holds) parts.push(holdBar(h, y, x, words));
  for (const w of lane.waits) parts.push(waitBar(w, y, x, words));
  parts.push('</g>');
  return parts.join('');
}

function holdBar(h: Hold, y: number, x: (ms: number) => number, words: TimelineWords): string {
  const x1 = x(h.fromMs);
  const w = Math.max(1.5, x(h.toMs) - x1);
  const by = h.by !== undefined ? ` — ${whoHtml(h.by)}` : '';
  const title = `${whoHtml(h.holder)}: ${esc(words.ends[h.end])}${by}, ${esc(words.duration(h.toMs - h.fromMs))}`;
  return `<rect class="hold ${esc(h.end)}" x="${fmt(x1)}" y="${y + BAR_Y}" width="${fmt(w)}" height="${BAR}"><title>${title}</title></rect>`;
}

function waitBar(wt: Wait, y: number, x: (ms: number) => number, words: TimelineWords): string {
  const x1 = x(wt.fromMs);
  const w = Math.max(1.5, x(wt.toMs) - x1);
  const title = `${whoHtml(wt.who)}: ${esc(words.waited)} ${esc(words.duration(wt.toMs - wt.fromMs))}`;
  return `<rect class="wait" x="${fmt(x1)}" y="${y + WAIT_Y}" width="${fmt(w)}" height="${WAIT}"><title>${title}</title></rect>`;
}
