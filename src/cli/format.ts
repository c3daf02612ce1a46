/** Human-readable output of the command-line tool. `--json` bypasses all of this. */
import { describeHolder } from '../core/lock';
import { formatDuration } from '../core/format';
import type { ListEntry, LockInfo } from '../core/types';

export { formatDuration };

function holderShort(info: LockInfo): string {
  if (info.holder !== undefined) return `${info.holder.user}@${info.holder.hostname}:${info.holder.pid}`;
  if (info.legacy !== undefined) return `python@${info.legacy.hostname}${info.legacy.pid !== undefined ? `:${info.legacy.pid}` : ''}`;
  return info.state === 'free' ? '' : '?';
}

export function formatList(entries: readonly ListEntry[]): string {
  if (entries.length === 0) return '(no staging areas)\n';
  const rows = entries.map((e) => [
    e.state,
    e.tag,
    holderShort(e),
    e.state === 'free' ? '' : formatDuration(e.heartbeatAgeMs),
    e.holder?.purpose ?? '',
  ]);
  const header = ['STATE', 'TAG', 'HOLDER', 'HEARTBEAT', 'PURPOSE'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return `${[line(header), ...rows.map(line)].join('\n')}\n`;
}

export function formatStatus(info: LockInfo): string {
  const lines: string[] = [`${info.tag}: ${info.state}${info.exists ? '' : ' (no such staging area)'}`, `  directory:  ${info.dir}`];
  if (info.holder !== undefined) {
    const h = info.holder;
    lines.push(`  holder:     ${describeHolder(info)}`, `  client:     ${h.clientId}`);
    if (h.acquiredAt !== '') lines.push(`  acquired:   ${h.acquiredAt} (${formatDuration(info.ageMs)} ago)`);
    if (h.fence !== undefined) lines.push(`  fence:      ${h.fence} (the lock's fencing token)`);
  } else if (info.legacy !== undefined) {
    lines.push(`  holder:     ${describeHolder(info)}`);
    if (info.legacy.pid === undefined && info.legacy.pidAndHash !== '') {
      lines.push(`  pid+hash:   ${info.legacy.pidAndHash} (the pid is a prefix of these digits)`);
    }
    if (info.legacy.uniqueFile !== undefined) lines.push(`  lock file:  ${info.legacy.uniqueFile}`);
  } else if (info.unreadable !== undefined) {
    lines.push(`  holder:     unknown: ${info.unreadable}`);
  } else if (info.state !== 'free') {
    lines.push('  holder:     unknown (no holder record)');
  }
  if (info.state !== 'free') lines.push(`  heartbeat:  ${formatDuration(info.heartbeatAgeMs)} ago`);
  if (info.holderAlive !== undefined) lines.push(`  process:    ${info.holderAlive ? 'running' : 'gone'}`);
  if (info.command !== undefined) lines.push(`  command:    pid ${info.command.pid}, ${info.commandAlive === true ? 'still running: the lock lasts until it ends' : 'ended'}`);
  if (info.staleReason !== undefined) lines.push(`  stale:      ${info.staleReason}`);
  return `${lines.join('\n')}\n`;
}
