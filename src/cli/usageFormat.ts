/**
 * Human-readable output of `du` and `prune`. `--json` bypasses all of this. Tags are names on the
 * disk (`printable`), reasons and errors sentences that may quote them (`messageText`).
 */
import type { AreaUsage } from '../core/usage';
import type { PruneResult } from '../core/prune';
import { formatDuration, messageText, printable } from '../core/base/format';
import { formatBytes } from './units';
import { cliMessage } from './nextSteps';

/** Rows in aligned columns under a header; the last column is not padded. */
export function table(header: readonly string[], rows: readonly string[][], rightAligned: ReadonlySet<number> = new Set()): string {
  const widths = columnWidths(header, rows);
  return `${[header, ...rows].map((r) => tableLine(r, widths, rightAligned)).join('\n')}\n`;
}

/** The widths of `table`'s columns. A loop, not Math.max(...): a call's arguments live on the stack, and rows may be hundreds of thousands. */
export function columnWidths(header: readonly string[], rows: Iterable<readonly string[]>): number[] {
  const widths = header.map((h) => h.length);
  for (const r of rows) for (let i = 0; i < widths.length; i++) widths[i] = Math.max(widths[i], (r[i] ?? '').length);
  return widths;
}

/** One row of `table`, in columns of `widths`. */
export function tableLine(cells: readonly string[], widths: readonly number[], rightAligned: ReadonlySet<number> = new Set()): string {
  return cells
    .map((c, i) => (rightAligned.has(i) ? c.padStart(widths[i]) : i === cells.length - 1 ? c : c.padEnd(widths[i])))
    .join('  ')
    .trimEnd();
}

function age(lastUsedMs: number, nowMs: number): string {
  return `${formatDuration(Math.max(0, nowMs - lastUsedMs))} ago`;
}

function stateOf(a: AreaUsage): string {
  const notes = [...(a.incomplete === true ? ['partly unreadable'] : []), ...(a.damaged !== undefined ? ['manifest damaged'] : [])];
  return notes.length > 0 ? `${a.state} (${notes.join(', ')})` : a.state;
}

/** Oldest first: the top of the table is what `prune` would take first. */
export function formatUsage(areas: readonly AreaUsage[], nowMs = Date.now()): string {
  if (areas.length === 0) return '(no staging areas)\n';
  const sorted = [...areas].sort((a, b) => a.lastUsedMs - b.lastUsedMs || a.tag.localeCompare(b.tag));
  const rows = sorted.map((a) => [printable(a.tag), formatBytes(a.bytes), String(a.artifacts), age(a.lastUsedMs, nowMs), stateOf(a)]);
  const bytes = areas.reduce((sum, a) => sum + a.bytes, 0);
  const artifacts = areas.reduce((sum, a) => sum + a.artifacts, 0);
  rows.push([`TOTAL (${areas.length} area${areas.length === 1 ? '' : 's'})`, formatBytes(bytes), String(artifacts), '', '']);
  const damaged = sorted.filter((a) => a.damaged !== undefined);
  // The first one's message says how to repair; the others are the same.
  const note = damaged.length > 0 ? `\n${damaged.length} area${damaged.length === 1 ? ' has' : 's have'} a damaged manifest. ${messageText(damaged[0].damaged ?? '')}\n` : '';
  return table(['TAG', 'SIZE', 'ARTIFACTS', 'LAST USED', 'STATE'], rows, new Set([1, 2])) + note;
}

export function formatPrune(r: PruneResult): string {
  const rows: string[][] = [
    ...r.removed.map((c) => [r.dryRun ? 'would remove' : 'removed', printable(c.tag), formatBytes(c.bytes), messageText(c.reason)]),
    ...r.skipped.map((c) => ['skipped', printable(c.tag), formatBytes(c.bytes), messageText(c.skippedBecause)]),
    ...r.failed.map((c) => ['failed', printable(c.tag), formatBytes(c.bytes), messageText(`${c.error.code}: ${cliMessage(c.error)}`)]),
  ];
  const plural = (n: number): string => `${n} area${n === 1 ? '' : 's'}`;
  const totals = [`${r.dryRun ? 'Would remove' : 'Removed'} ${plural(r.removed.length)}, ${formatBytes(r.bytes)}`];
  if (r.skipped.length > 0) totals.push(`skipped ${plural(r.skipped.length)} (see WHY)`);
  if (r.failed.length > 0) totals.push(`${r.failed.length} failed`);
  const summary = `${totals.join('; ')}.${r.dryRun ? ' (dry run: nothing was removed)' : ''}\n`;
  if (rows.length === 0) return `Nothing to prune.\n${summary}`;
  return table(['ACTION', 'TAG', 'SIZE', 'WHY'], rows, new Set([2])) + summary;
}
