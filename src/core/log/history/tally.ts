/**
 * The figures of a window of time, tallied one area at a time from its holdings and waits: per
 * build, the busiest builds' timelines, the most contended builds, the longest waits and the
 * force-releases. Memory follows the number of builds and the lists' lengths, not the history's.
 */
import type { Hold, TagHolds, Wait } from './holds';

/** One build's figures in a window. */
export interface BuildFigures {
  tag: string;
  holds: number;
  /** Time held within the window. */
  heldMs: number;
  waits: number;
  waitedMs: number;
  longestWaitMs: number;
  forceReleases: number;
}

/** One build's timeline: its holdings and waits that reach into the window, oldest first. */
export interface Lane {
  usage: BuildFigures;
  holds: Hold[];
  waits: Wait[];
  /** Holdings and waits left out: only the newest `MAX_LANE_ITEMS` of each are kept. */
  omitted: number;
}

export interface UsageFigures {
  /** The builds looked at: a tag, a folder (every build below it), or '' for all. */
  scope: string;
  sinceMs: number;
  untilMs: number;
  /** Builds held or waited for in the window. */
  builds: number;
  holds: number;
  waits: number;
  waitedMs: number;
  /** The builds held longest in the window, most first: their timelines. */
  lanes: Lane[];
  /** Most waits first, then most time waited. */
  contended: BuildFigures[];
  /** Longest first. */
  longestWaits: Wait[];
  /** Holdings ended by a force-release, newest first. */
  forceReleases: Hold[];
}

export interface TallyLimits {
  /** Timelines kept (default 12). */
  lanes?: number;
  /** Length of each list (default 10). */
  top?: number;
}

/** A lane's holdings (and waits) kept, the newest: a build held every minute for a week still draws. */
export const MAX_LANE_ITEMS = 500;

const overlaps = (fromMs: number, toMs: number, w: { sinceMs: number; untilMs: number }): boolean => toMs >= w.sinceMs && fromMs <= w.untilMs;

/** Busier first: longer held, then more holdings, then more waits; then by tag, so the order is one. */
const busier = (a: BuildFigures, b: BuildFigures): number => b.heldMs - a.heldMs || b.holds - a.holds || b.waits - a.waits || (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0);
const moreContended = (a: BuildFigures, b: BuildFigures): number => b.waits - a.waits || b.waitedMs - a.waitedMs || (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0);
const longer = (a: Wait, b: Wait): number => b.toMs - b.fromMs - (a.toMs - a.fromMs) || b.toMs - a.toMs;
const newer = (a: Hold, b: Hold): number => b.toMs - a.toMs;

/** Keeps `list` (sorted by `order`) to its best `max` with `item` added; no more than max+1 ever held. */
function keepBest<T>(list: T[], item: T, max: number, order: (a: T, b: T) => number): void {
  if (max <= 0) return;
  if (list.length >= max && order(item, list[list.length - 1]) >= 0) return;
  let i = list.length;
  while (i > 0 && order(item, list[i - 1]) < 0) i--;
  list.splice(i, 0, item);
  if (list.length > max) list.pop();
}

function newest<T extends { fromMs: number; toMs: number }>(items: T[]): { kept: T[]; omitted: number } {
  if (items.length <= MAX_LANE_ITEMS) return { kept: items, omitted: 0 };
  const kept = [...items].sort((a, b) => a.toMs - b.toMs).slice(items.length - MAX_LANE_ITEMS);
  return { kept: kept.sort((a, b) => a.fromMs - b.fromMs), omitted: items.length - MAX_LANE_ITEMS };
}

export class UsageTally {
  private readonly lanesMax: number;
  private readonly topMax: number;
  private readonly usages: BuildFigures[] = [];
  private readonly lanes: Lane[] = [];
  private readonly longestWaits: Wait[] = [];
  private readonly forceReleases: Hold[] = [];
  private holds = 0;
  private waits = 0;
  private waitedMs = 0;

  constructor(
    private readonly window: { scope: string; sinceMs: number; untilMs: number },
    limits: TallyLimits = {},
  ) {
    this.lanesMax = Math.max(0, Math.floor(limits.lanes ?? 12));
    this.topMax = Math.max(0, Math.floor(limits.top ?? 10));
  }

  /** Adds one build's holdings and waits (all of its history: what lies outside the window is left out here). */
  add(tag: string, th: TagHolds): void {
    const w = this.window;
    const holds = th.holds.filter((h) => overlaps(h.fromMs, h.toMs, w));
    const waits = th.waits.filter((x) => x.toMs >= w.sinceMs && x.toMs <= w.untilMs);
    if (holds.length === 0 && waits.length === 0) return;
    const u: BuildFigures = { tag, holds: holds.length, heldMs: 0, waits: waits.length, waitedMs: 0, longestWaitMs: 0, forceReleases: 0 };
    for (const h of holds) {
      u.heldMs += Math.max(0, Math.min(h.toMs, w.untilMs) - Math.max(h.fromMs, w.sinceMs));
      if (h.end === 'force-released' && h.toMs >= w.sinceMs && h.toMs <= w.untilMs) {
        u.forceReleases++;
        keepBest(this.forceReleases, h, this.topMax, newer);
      }
    }
    for (const x of waits) {
      const ms = x.toMs - x.fromMs;
      u.waitedMs += ms;
      u.longestWaitMs = Math.max(u.longestWaitMs, ms);
      keepBest(this.longestWaits, x, this.topMax, longer);
    }
    this.usages.push(u);
    this.holds += u.holds;
    this.waits += u.waits;
    this.waitedMs += u.waitedMs;
    if (this.lanesMax > 0 && (this.lanes.length < this.lanesMax || busier(u, this.lanes[this.lanes.length - 1].usage) < 0)) {
      const h = newest(holds);
      const x = newest(waits);
      keepBest(this.lanes, { usage: u, holds: h.kept, waits: x.kept, omitted: h.omitted + x.omitted }, this.lanesMax, (a, b) => busier(a.usage, b.usage));
    }
  }

  figures(): UsageFigures {
    const contended = this.usages.filter((u) => u.waits > 0).sort(moreContended).slice(0, this.topMax);
    return {
      ...this.window,
      builds: this.usages.length,
      holds: this.holds,
      waits: this.waits,
      waitedMs: this.waitedMs,
      lanes: this.lanes,
      contended,
      longestWaits: this.longestWaits,
      forceReleases: this.forceReleases,
    };
  }
}
