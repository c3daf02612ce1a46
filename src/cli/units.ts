/** Sizes and durations as people type and read them. */

import { formatBytes } from '../core/base/format';
import { parseDuration, parseSize } from '../core/base/units';

export { formatBytes, parseDuration, parseSize };

/**
 * 20000 -> "20,000". Always grouped the English way, whatever the locale: the command line's
 * output reads the same on every machine (the view uses the user's locale instead).
 */
export function formatCount(n: number): string {
  return n.toLocaleString('en');
}

/** Bytes per second over `ms`, as "12.3 MiB/s"; "-" while there is too little to tell. */
export function formatRate(bytes: number, ms: number): string {
  if (ms < 200 || bytes <= 0) return '-';
  return `${formatBytes(Math.round((bytes * 1000) / ms))}/s`;
}
