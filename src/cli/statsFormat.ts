/**
 * `history --stats` for people: who used what over a window, as short tables. `--json` bypasses
 * this. Every name, user, host and purpose is text from the disk (`printable`).
 */
import type { BuildFigures, Hold, UsageFigures, Wait, Who } from '../core/log/history';
import { formatDuration, printable, printableTime } from '../core/base/format';
import { table } from './usageFormat';

/** Short waits matter ("waited 15 ms"); longer ones as `formatDuration` says them. */
export function span(ms: number): string {
  return ms < 1_000 ? `${Math.round(ms)} ms` : formatDuration(ms);
}

export function whoText(w: Who): string {
  return printable(`${w.user}@${w.hostname}${w.pid !== undefined ? `:${w.pid}` : ''}`);
}

const time = (ms: number): string => printableTime(new Date(ms).toISOString());
const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;

function buildRow(u: BuildFigures): string[] {
  const waited = (ms: number): string => (u.waits === 0 ? '-' : span(ms));
  return [printable(u.tag), String(u.holds), span(u.heldMs), String(u.waits), waited(u.waitedMs), waited(u.longestWaitMs), String(u.forceReleases)];
}

const BUILD_HEADER = ['TAG', 'HOLDS', 'HELD', 'WAITS', 'WAITED', 'LONGEST WAIT', 'FORCE-RELEASED'];
const NUMBERS = new Set([1, 2, 3, 4, 5, 6]);

function waitRow(w: Wait): string[] {
  return [span(w.toMs - w.fromMs), printable(w.tag), whoText(w.who), time(w.toMs)];
}

function releaseRow(h: Hold): string[] {
  return [time(h.toMs), printable(h.tag), whoText(h.holder), h.by !== undefined ? whoText(h.by) : '?', span(h.toMs - h.fromMs)];
}

/** The figures of one window: a line of totals, then the busiest builds, the most contended, the longest waits and the force-releases. */
export function formatStats(f: UsageFigures): string {
  const what = f.scope === '' ? 'every build' : printable(f.scope);
  const head = `${what}, ${time(f.sinceMs)} to ${time(f.untilMs)}: ${plural(f.builds, 'build')} used, ${plural(f.holds, 'holding')}, ${plural(f.waits, 'wait')} (${span(f.waitedMs)} in all)\n`;
  if (f.builds === 0) return head;
  const parts = [head, `\nBusiest builds\n${table(BUILD_HEADER, f.lanes.map((l) => buildRow(l.usage)), NUMBERS)}`];
  if (f.contended.length > 0) parts.push(`\nMost contended\n${table(BUILD_HEADER, f.contended.map(buildRow), NUMBERS)}`);
  if (f.longestWaits.length > 0) parts.push(`\nLongest waits\n${table(['WAITED', 'TAG', 'WHO', 'GOT IT AT'], f.longestWaits.map(waitRow), new Set([0]))}`);
  if (f.forceReleases.length > 0) parts.push(`\nForce-releases\n${table(['TIME', 'TAG', 'HOLDER', 'BY', 'HELD'], f.forceReleases.map(releaseRow), new Set([4]))}`);
  return parts.join('');
}
