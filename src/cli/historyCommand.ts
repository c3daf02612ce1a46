/**
 * `devserver-stage history [TAG]`: what happened to a build, oldest first: one line per event on
 * stdout, or with --json one JSON object per line (JSON lines, as the history is stored), so that
 * `tail -n 1` and `jq -c` work on it as on the files. With --stats, who used what over a window
 * (`statsFormat.ts`), or with --json one object.
 */
import { DAY_MS, history, historyStats, type HistoryActor, type HistoryEvent, type HistoryPrevious, type HistoryQuery } from '../core/log/history';
import { formatBytes } from '../core/base/format';
import { commandMain } from './context';
import { jsonText, printable, printableTime, stdout } from './output';
import { formatStats, span } from './statsFormat';
import { columnWidths, tableLine } from './usageFormat';

export interface HistoryCommandIo {
  stdout: { write(text: string): unknown };
  json: boolean;
}

export const main = commandMain(async (ctx, [tag]: readonly [string | undefined], o: { since?: number; limit?: number; stats?: boolean }) => {
  if (o.stats === true) {
    const [figures] = await historyStats(ctx.staticDir(), { ...(tag !== undefined ? { scope: tag } : {}), windowsMs: [o.since ?? DAY_MS], warn: ctx.warn });
    stdout.write(ctx.json ? `${jsonText(figures)}\n` : formatStats(figures));
    return 0;
  }
  const query: HistoryQuery = {
    warn: ctx.warn,
    ...(tag !== undefined ? { tag } : {}),
    ...(o.since !== undefined ? { sinceMs: Date.now() - o.since } : {}),
    ...(o.limit !== undefined ? { limit: o.limit } : {}),
  };
  return runHistory(ctx.staticDir(), query, { stdout, json: ctx.json });
});

/** Lines written at once: the output of a long history is never held whole. */
const CHUNK = 1_000;

export async function runHistory(staticDir: string, query: HistoryQuery, io: HistoryCommandIo): Promise<number> {
  const events = await history(staticDir, query);
  // Times are written anew from their parsed values (`jsonText`), never as the lines on disk have them.
  if (io.json) {
    for (let i = 0; i < events.length; i += CHUNK) io.stdout.write(events.slice(i, i + CHUNK).map((e) => `${jsonText(e)}\n`).join(''));
  } else {
    writeHistory(events, query.tag, io.stdout);
  }
  return 0;
}

function who(h: HistoryActor | HistoryPrevious): string {
  if (h.hostname === undefined) return 'unknown';
  const user = h.user ?? ('legacy' in h && h.legacy === true ? 'python' : '?');
  return printable(`${user}@${h.hostname}${h.pid !== undefined ? `:${h.pid}` : ''}`);
}

/** What else the event says, in words: token, durations, the lock removed, what was staged or found. */
function details(e: HistoryEvent): string {
  const parts: string[] = [];
  if (e.fence !== undefined) parts.push(`fence ${e.fence}`);
  if (e.waitedMs !== undefined) parts.push(`waited ${span(e.waitedMs)}`);
  if (e.heldMs !== undefined) parts.push(`held ${span(e.heldMs)}`);
  if (e.previous !== undefined) parts.push(`from ${who(e.previous)}${e.previous.purpose !== undefined ? ` (${printable(e.previous.purpose)})` : ''}`);
  if (e.kind === 'staged') parts.push(`${e.artifacts ?? 0} artifact${e.artifacts === 1 ? '' : 's'} written${e.skipped ? `, ${e.skipped} identical` : ''}, ${formatBytes(e.bytes ?? 0)}`);
  if (e.kind === 'verified') {
    const n = e.problems ?? 0;
    parts.push(`${e.ok === true ? 'OK' : `DAMAGED: ${n} problem${n === 1 ? '' : 's'}`}, ${e.files ?? 0} file${e.files === 1 ? '' : 's'}, ${formatBytes(e.bytes ?? 0)}`);
  }
  if (e.reservedUntil !== undefined) parts.push(`${e.kind === 'released' ? 'reserved' : 'until'} ${e.kind === 'released' ? `until ${printableTime(e.reservedUntil)}` : printableTime(e.reservedUntil)}`);
  if ((e.kind === 'acquired' || e.kind === 'reserved' || e.kind === 'extended') && e.holder.purpose !== undefined) parts.push(`for ${printable(e.holder.purpose)}`);
  if (e.reason !== undefined) parts.push(printable(e.reason));
  return parts.join(', ');
}

function rowOf(e: HistoryEvent): string[] {
  return [printableTime(e.time), printable(e.kind), printable(e.tag), who(e.holder), details(e)];
}

function* rowsOf(events: readonly HistoryEvent[]): Generator<string[]> {
  for (const e of events) yield rowOf(e);
}

const HEADER = ['TIME', 'EVENT', 'TAG', 'BY', 'DETAILS'];

/** One line per event, oldest first: time (UTC, to the second), event, tag, who, and the rest. */
export function formatHistory(events: readonly HistoryEvent[], tag?: string): string {
  let text = '';
  writeHistory(events, tag, { write: (t) => (text += t) });
  return text;
}

/** `formatHistory`, written a thousand lines at a time (each row is made twice: once for the widths of the columns). */
function writeHistory(events: readonly HistoryEvent[], tag: string | undefined, out: { write(text: string): unknown }): void {
  if (events.length === 0) {
    out.write(tag === undefined ? '(no history)\n' : `(no history for ${printable(tag)})\n`);
    return;
  }
  const widths = columnWidths(HEADER, rowsOf(events));
  out.write(`${tableLine(HEADER, widths)}\n`);
  for (let i = 0; i < events.length; i += CHUNK) out.write(events.slice(i, i + CHUNK).map((e) => `${tableLine(rowOf(e), widths)}\n`).join(''));
}
