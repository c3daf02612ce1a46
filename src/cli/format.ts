/**
 * Human-readable output of the command-line tool. `--json` bypasses all of this. Every name and
 * field a co-user can write goes through `printable` (a time through `printableTime`, a reason
 * that quotes such fields through `messageText`): one value, one cell, one line.
 */
import { describeHolder } from '../core/lock/refusals';
import { formatDuration, messageText, printable, printableTime } from '../core/base/format';
import { describeWaiter, type OnQueue } from '../core/lock/queue';
import type { ListEntry, LockInfo, QueueEntry } from '../core/base/types';

export { formatDuration };

function holderShort(info: LockInfo): string {
  if (info.holder !== undefined) return `${printable(info.holder.user)}@${printable(info.holder.hostname)}${info.reservation !== undefined ? '' : `:${info.holder.pid}`}`;
  if (info.legacy !== undefined) return `python@${printable(info.legacy.hostname)}${info.legacy.pid !== undefined ? `:${info.legacy.pid}` : ''}`;
  return info.state === 'free' ? '' : '?';
}

export function formatList(entries: readonly ListEntry[]): string {
  if (entries.length === 0) return '(no staging areas)\n';
  // A folder has no lock of its own: it says what it is, not "free".
  const rows = entries.map((e) => [
    e.kind === 'folder' ? 'folder' : e.reservation !== undefined && e.state === 'held' ? 'reserved' : e.state,
    printable(e.tag),
    holderShort(e),
    e.reservation !== undefined ? `until ${printableTime(e.reservation.until)}` : e.state === 'free' ? '' : formatDuration(e.heartbeatAgeMs),
    printable(e.holder?.purpose ?? ''),
  ]);
  const header = ['STATE', 'TAG', 'HOLDER', 'HEARTBEAT', 'PURPOSE'];
  const widths = header.map((h, i) => rows.reduce((w, r) => Math.max(w, r[i].length), h.length));
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return `${[line(header), ...rows.map(line)].join('\n')}\n`;
}

export function formatStatus(info: LockInfo, queue: readonly QueueEntry[] = []): string {
  const lines: string[] = [`${printable(info.tag)}: ${info.state}${info.exists ? '' : ' (no such staging area)'}`, `  directory:  ${printable(info.dir)}`];
  if (info.holder !== undefined) {
    const h = info.holder;
    lines.push(`  holder:     ${describeHolder(info)}`, `  client:     ${printable(h.clientId)}`);
    if (h.acquiredAt !== '') lines.push(`  acquired:   ${printableTime(h.acquiredAt)} (${formatDuration(info.ageMs)} ago)`);
    if (h.fence !== undefined) lines.push(`  fence:      ${h.fence} (the lock's fencing token)`);
  } else if (info.legacy !== undefined) {
    lines.push(`  holder:     ${describeHolder(info)}`);
    if (info.legacy.pid === undefined && info.legacy.pidAndHash !== '') {
      lines.push(`  pid+hash:   ${printable(info.legacy.pidAndHash)} (the pid is a prefix of these digits)`);
    }
    if (info.legacy.uniqueFile !== undefined) lines.push(`  lock file:  ${printable(info.legacy.uniqueFile)}`);
  } else if (info.unreadable !== undefined) {
    lines.push(`  holder:     unknown: ${messageText(info.unreadable)}`);
  } else if (info.state !== 'free') {
    lines.push('  holder:     unknown (no holder record)');
  }
  const r = info.reservation;
  if (r !== undefined) {
    const whose = r.mine === true ? 'yours' : r.ownerUid !== undefined ? `uid ${r.ownerUid}'s` : 'owner unknown';
    lines.push(`  reserved:   until ${printableTime(r.until)} (${r.ended ? 'ended' : `${formatDuration(r.leftMs)} left`}; ${whose})`);
  } else if (info.state !== 'free') lines.push(`  heartbeat:  ${formatDuration(info.heartbeatAgeMs)} ago`);
  if (info.holderAlive !== undefined) lines.push(`  process:    ${info.holderAlive ? 'running' : 'gone'}`);
  if (info.command !== undefined) lines.push(`  command:    pid ${info.command.pid}, ${info.commandAlive === true ? 'still running: the lock lasts until it ends' : 'ended'}`);
  if (info.staleReason !== undefined) lines.push(`  stale:      ${messageText(info.staleReason)}`);
  if (queue.length > 0) {
    const waiting = queue.filter((e) => e.position !== undefined).length;
    lines.push(`  queue:      ${waiting} waiting${waiting < queue.length ? `, ${queue.length - waiting} stale (skipped, removed by the next to look)` : ''}`);
    for (const e of queue) {
      const since = e.ageMs !== undefined ? `, waiting ${formatDuration(e.ageMs)}` : '';
      const place = e.position !== undefined ? `${e.position}.`.padEnd(4) : '-'.padEnd(4);
      const state = e.state === 'stale' ? `, stale: ${messageText(e.staleReason ?? 'no heartbeat')}` : `, heartbeat ${formatDuration(e.heartbeatAgeMs)} ago`;
      lines.push(`    ${place}${describeWaiter(e)}${since}${state}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

function ordinal(n: number): string {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? 'th' : (['th', 'st', 'nd', 'rd'][n % 10] ?? 'th');
  return `${n}${suffix}`;
}

/**
 * For `lock --wait` and `stage --wait` on a terminal: a line on stderr each time the place in line
 * changes. Nothing when stderr is not a terminal: scripts read only what they asked for.
 */
export function queueNotice(tag: string, stderr: { isTTY?: boolean; write(text: string): unknown }): OnQueue | undefined {
  if (stderr.isTTY !== true) return undefined;
  return (position, waiting) => {
    const others = waiting - 1;
    const behind = position === 1 ? 'next in line' : `${ordinal(position)} in line`;
    stderr.write(`devserver-stage: waiting for the lock on ${printable(tag)}: ${behind}${others > 0 ? ` (${waiting} waiting)` : ''}\n`);
  };
}
