/**
 * Who uses what: the figures of one build, a folder of builds or every build over windows of
 * time (the last day, the last week), from the history as it is on disk, read one area at a
 * time: memory follows the newest events of one area (`MAX_STATS_EVENTS`) and the figures kept,
 * never all the lines.
 */
import * as path from 'path';
import { historyDirOf } from '../../base/protocol';
import { parseTag } from '../../fs/tags';
import type { HistoryOptions } from './events';
import { holdsOfTimed } from './holds';
import { Kept, type Read } from './kept';
import { readTagDir, visitHistory } from './read';
import { defaultWarn } from './report';
import { type TallyLimits, type UsageFigures, UsageTally } from './tally';

/**
 * The newest events of one build read, at most: enough for years of honest use, and a bound on
 * memory whatever a co-user plants (segments of thousands of hosts, millions of events). Events
 * after the windows' end are left out first, so that lines dated far ahead cannot push out the
 * real ones.
 */
export const MAX_STATS_EVENTS = 100_000;

export const DAY_MS = 86_400_000;
export const WEEK_MS = 7 * DAY_MS;

export interface StatsQuery extends HistoryOptions, TallyLimits {
  /** A build's tag or a folder (every build below it); without it, or '', every build. */
  scope?: string;
  /** Only the build `scope` names, not those below it: one area's history is read, not all. */
  exact?: boolean;
  /** How far back each window reaches from `nowMs` (default: a day). */
  windowsMs?: readonly number[];
  /** The end of the windows (default: now). A holding with no end recorded runs to it. */
  nowMs?: number;
}

/** The figures of `historyStats` for one window; see `UsageFigures`. */
export async function historyStats(staticDir: string, query: StatsQuery = {}): Promise<UsageFigures[]> {
  const nowMs = query.nowMs ?? Date.now();
  const windows = query.windowsMs ?? [DAY_MS];
  let scope = '';
  let tallies: UsageTally[] = [];
  await visitHistory(
    staticDir,
    (sync) => {
      scope = query.scope === undefined || query.scope === '' ? '' : parseTag(query.scope).join('/');
      tallies = windows.map((ms) => new UsageTally({ scope, sinceMs: nowMs - ms, untilMs: nowMs }, query));
      return {
        ...(query.exact === true && scope !== '' ? { tag: scope } : {}),
        // Everything kept is read: a holding that began before a window may still run into it.
        sinceMs: -Infinity,
        untilMs: nowMs,
        limit: MAX_STATS_EVENTS,
        warn: query.warn ?? defaultWarn,
        sync,
        glance: false,
      };
    },
    async (dir, want) => {
      const kept = new Kept(MAX_STATS_EVENTS);
      await readTagDir(dir, want, kept);
      for (const [tag, events] of byTag(await kept.reads(), path.basename(dir.shown), scope)) {
        const th = holdsOfTimed(events, nowMs);
        for (const t of tallies) t.add(tag, th);
      }
    },
  );
  return tallies.map((t) => t.figures());
}

const inScope = (tag: string, scope: string): boolean => scope === '' || tag === scope || tag.startsWith(`${scope}/`);

/**
 * A tag directory's events by tag, those in scope only. A line naming a tag that is not this
 * directory's (written there by hand) is left out: each build's history is whole in one visit.
 */
function byTag(events: readonly Read[], dirName: string, scope: string): Map<string, Read[]> {
  const out = new Map<string, Read[]>();
  const ours = new Map<string, boolean>();
  for (const r of events) {
    const e = r.e;
    let ok = ours.get(e.tag);
    if (ok === undefined) {
      ok = inScope(e.tag, scope) && historyDirOf(e.tag)[1] === dirName;
      ours.set(e.tag, ok);
    }
    if (!ok) continue;
    const list = out.get(e.tag);
    if (list === undefined) out.set(e.tag, [r]);
    else list.push(r);
  }
  return out;
}
