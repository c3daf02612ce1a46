/** Sizes and durations as people type them, for both front ends. */

const SIZE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  kib: 1024,
  kb: 1000,
  m: 1024 ** 2,
  mib: 1024 ** 2,
  mb: 1000 ** 2,
  g: 1024 ** 3,
  gib: 1024 ** 3,
  gb: 1000 ** 3,
  t: 1024 ** 4,
  tib: 1024 ** 4,
  tb: 1000 ** 4,
};

/**
 * "500M", "2G", "1.5GiB", "10MB", "4096" -> bytes. As in GNU coreutils, K/M/G/T and KiB/MiB/...
 * are powers of 1024, KB/MB/GB/TB powers of 1000. Undefined when it is not a size.
 */
export function parseSize(text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(text);
  if (m === null) return undefined;
  const factor = SIZE_UNITS[m[2].toLowerCase()];
  if (factor === undefined) return undefined;
  const bytes = Math.floor(Number(m[1]) * factor);
  return Number.isSafeInteger(bytes) ? bytes : undefined;
}

const DURATION_UNITS: Record<string, number> = { s: 1_000, m: 60_000, min: 60_000, h: 3_600_000, d: 86_400_000, w: 7 * 86_400_000 };

/**
 * "30d", "12h", "90m", "1d12h", "45s", "2w" -> milliseconds. A unit is required: a bare number
 * could mean seconds or days, and guessing wrong here deletes builds.
 */
export function parseDuration(text: string): number | undefined {
  const trimmed = text.trim();
  if (trimmed === '') return undefined;
  let total = 0;
  let rest = trimmed;
  while (rest !== '') {
    const m = /^(\d+(?:\.\d+)?)\s*(min|[smhdw])\s*/i.exec(rest);
    if (m === null) return undefined;
    total += Number(m[1]) * DURATION_UNITS[m[2].toLowerCase()];
    rest = rest.slice(m[0].length);
  }
  return Number.isFinite(total) ? Math.round(total) : undefined;
}
