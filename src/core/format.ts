/** Sizes as people read them, for messages of the core and output of the command line. */

const BINARY = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

/** 1536 -> "1.5 KiB"; whole bytes below 1 KiB. */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) return '-';
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < BINARY.length - 1) {
    value /= 1024;
    unit++;
  }
  if (unit === 0) return `${bytes} B`;
  // One decimal, except where it would read as more precision than there is (1023.9 GiB).
  return `${value >= 100 ? Math.round(value) : value.toFixed(1)} ${BINARY[unit]}`;
}

/** A duration as people say it: "12 s", "4 min", "3 h", "2 d"; '-' when unknown. */
export function formatDuration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '-';
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 90) return `${s} s`;
  const m = Math.round(s / 60);
  if (m < 90) return `${m} min`;
  const h = Math.round(m / 60);
  if (h < 48) return `${h} h`;
  return `${Math.round(h / 24)} d`;
}

/** Build versions sort as people read them: R9 before R10. */
export const naturalOrder = new Intl.Collator('en', { numeric: true, sensitivity: 'variant' });
