/** Sizes as people read them, for messages of the core and output of the command line. */

const BINARY = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

// Made on first use: the command line loads this module at start, and most commands count nothing.
let counts: Intl.NumberFormat | undefined;

/** 100000 -> "100,000", in the user's locale: counts as the view and its messages write them. */
export function formatCount(n: number): string {
  return (counts ??= new Intl.NumberFormat()).format(n);
}

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

/** One character as JSON writes it escaped: `\u001b`. */
const escapeChar = (c: string): string => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/**
 * A co-user's text as a terminal or a notification shows it rather than obeys it: build names and
 * a holder's user, host and purpose come from directories and records anyone sharing the static
 * directory can write, and an escape sequence among them (ESC, CSI, OSC, BEL) would retitle the
 * terminal, rewrite what it shows, or on some terminals set the clipboard; a newline would forge
 * a line. Text with any control character is shown quoted, each escaped (`"evil\u001b]0;…"`).
 */
export function printable(text: string): string {
  return /[\u0000-\u001f\u007f-\u009f]/.test(text) ? JSON.stringify(text).replace(/[\u007f-\u009f]/g, escapeChar) : text;
}

/**
 * Text the command line writes, whole, as a terminal should show it: every control character but
 * newline and tab escaped (`\u001b`). What `printable` missed cannot act on the terminal either.
 */
export function terminalText(text: string): string {
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, escapeChar);
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

let collator: Intl.Collator | undefined;

/**
 * Printable ASCII in the order of the collator's first level (CLDR's root collation): spaces,
 * punctuation and symbols, then digits (compared as numbers), then letters, a and A together.
 * Measured from the collator itself; a unit test compares the two on random names.
 */
const ASCII_ORDER = ' _-,;:!?.\'"()[]{}@*/\\&#%`^+<=>|~$0123456789aAbBcCdDeEfFgGhHiIjJkKlLmMnNoOpPqQrRsStTuUvVwWxXyYzZ';
/** Each printable character's rank at the first level (case ignored); the digits share one, as numbers do. */
const RANK = new Int8Array(128).fill(-1);
const DIGIT_RANK = ((): number => {
  let rank = 0;
  let digits = -1;
  for (const c of ASCII_ORDER) {
    const code = c.charCodeAt(0);
    if (c >= '0' && c <= '9') RANK[code] = digits < 0 ? (digits = rank++) : digits;
    else if (c >= 'A' && c <= 'Z') RANK[code] = RANK[code + 32]!;
    else RANK[code] = rank++;
  }
  return digits;
})();
/** Names the comparison below is exact for: printable ASCII, digit runs of reasonable length. */
const PLAIN = /^(?:[\x20-\x2f\x3a-\x7e]|[0-9]{1,200}(?![0-9]))*$/;

const isDigit = (code: number): boolean => code >= 48 && code <= 57;

/**
 * The collator's answer for two names of printable ASCII, worked out without it: the characters'
 * ranks in turn, a run of digits against another by value (leading zeros do not count), and where
 * all that ties, case: lower before upper, at the first letter whose case differs.
 */
function compareAscii(a: string, b: string): number {
  let i = 0;
  let j = 0;
  let caseOrder = 0;
  while (i < a.length && j < b.length) {
    const ca = a.charCodeAt(i);
    const cb = b.charCodeAt(j);
    const ra = RANK[ca];
    const rb = RANK[cb];
    if (ra === DIGIT_RANK && rb === DIGIT_RANK) {
      let ea = i;
      while (ea < a.length && isDigit(a.charCodeAt(ea))) ea++;
      let eb = j;
      while (eb < b.length && isDigit(b.charCodeAt(eb))) eb++;
      while (i < ea - 1 && a.charCodeAt(i) === 48) i++;
      while (j < eb - 1 && b.charCodeAt(j) === 48) j++;
      // More significant digits, a larger number; else the first digit that differs.
      if (ea - i !== eb - j) return ea - i < eb - j ? -1 : 1;
      for (; i < ea; i++, j++) {
        if (a.charCodeAt(i) !== b.charCodeAt(j)) return a.charCodeAt(i) < b.charCodeAt(j) ? -1 : 1;
      }
      continue;
    }
    if (ra !== rb) return ra < rb ? -1 : 1;
    if (caseOrder === 0 && ca !== cb) caseOrder = ca > cb ? -1 : 1;
    i++;
    j++;
  }
  if (i < a.length) return 1;
  if (j < b.length) return -1;
  return caseOrder;
}

/**
 * Build versions sort as people read them: R9 before R10, as `Intl.Collator('en', { numeric: true })`
 * orders them. Names of printable ASCII (nearly all) are compared without the collator, which
 * costs milliseconds to make (ICU's data): a command line run that lists a few builds should not
 * pay that. Anything else goes to the collator, made at its first use.
 */
export const naturalOrder: Pick<Intl.Collator, 'compare'> = {
  compare: (a, b) => (PLAIN.test(a) && PLAIN.test(b) ? compareAscii(a, b) : (collator ??= new Intl.Collator('en', { numeric: true, sensitivity: 'variant' })).compare(a, b)),
};
