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

/**
 * What is never sent as it is to whoever reads the output: control characters (C0, DEL, C1),
 * format characters (bidirectional overrides and isolates, zero-width characters, tag characters),
 * line and paragraph separators, and lone surrogates (bytes of a name that are not UTF-8, see
 * rawNames.ts, or a lone `\udXXX` escape in a co-user's JSON).
 */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/u;
const UNSAFE_ALL = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;
const QUOTED_ALL = /[\\"\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;
/** All of UNSAFE but newline and tab: what `terminalText` escapes. */
const TERMINAL_ALL = /(?![\n\t])[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;
const SHORT_ESCAPES: Readonly<Record<string, string>> = { '\\': '\\\\', '"': '\\"', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

const hex4 = (unit: number): string => `\\u${unit.toString(16).padStart(4, '0')}`;

/**
 * One character as an escape: `\n`, `\u001b`, `\u202e`, a byte that is not UTF-8 as `\xff`,
 * a character beyond the BMP as its two UTF-16 halves (`\udb40\udc41`), as JSON writes them.
 */
function escapeChar(c: string): string {
  const short = SHORT_ESCAPES[c];
  if (short !== undefined) return short;
  if (c.length === 2) return hex4(c.charCodeAt(0)) + hex4(c.charCodeAt(1));
  const unit = c.charCodeAt(0);
  return unit >= 0xdc80 && unit <= 0xdcff ? `\\x${(unit - 0xdc00).toString(16)}` : hex4(unit);
}

/**
 * A co-user's text as the output shows it rather than obeys it: names of builds and artifacts,
 * holder fields, reasons, anything read from the disk. An escape sequence among them (ESC, CSI,
 * OSC, BEL) would retitle the terminal, rewrite what it shows, or on some terminals set the
 * clipboard; a newline would forge a line or a row; a bidirectional override would show the
 * characters in another order. Text with any such character (see UNSAFE), or that begins with a
 * double quote, is shown between double quotes with each of them, `"` and `\\` escaped:
 * `"R1\nfree  board/R9"`, `"evil\u001b]0;\u0007"`, `"R\xff"`. Other text is shown as it is. So a
 * shown name always reads back as the one name it is (`readPrintable`), and the command line takes
 * it in that form.
 */
export function printable(text: string): string {
  return UNSAFE.test(text) || text.startsWith('"') ? `"${text.replace(QUOTED_ALL, escapeChar)}"` : text;
}

/**
 * A name as `printable` showed it, given back (a tag typed on the command line): text between
 * double quotes with the escapes of `printable` and JSON (`\\`, `\"`, `\/`, `\b`, `\f`, `\n`,
 * `\r`, `\t`, `\uXXXX`, and `\xNN` for a byte that is not UTF-8); any other text as it is.
 * Undefined for text that begins with a double quote but is not such a form.
 */
export function readPrintable(text: string): string | undefined {
  if (!text.startsWith('"')) return text;
  if (text.length < 2 || !text.endsWith('"')) return undefined;
  let out = '';
  for (let i = 1; i < text.length - 1; i++) {
    const c = text[i];
    if (c === '"') return undefined;
    if (c !== '\\') {
      out += c;
      continue;
    }
    const e = text[++i];
    const simple = ({ '\\': '\\', '"': '"', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' } as Record<string, string>)[e];
    if (simple !== undefined) {
      out += simple;
    } else if (e === 'u' && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 1, i + 5))) {
      out += String.fromCharCode(parseInt(text.slice(i + 1, i + 5), 16));
      i += 4;
    } else if (e === 'x' && /^[0-9a-fA-F]{2}$/.test(text.slice(i + 1, i + 3))) {
      const byte = parseInt(text.slice(i + 1, i + 3), 16);
      out += String.fromCharCode(byte < 0x80 ? byte : 0xdc00 + byte);
      i += 2;
    } else {
      return undefined;
    }
  }
  return out;
}

/**
 * Text the command line writes, whole, as a terminal should show it: every character `printable`
 * would escape but newline and tab, escaped (`\u001b`, `\xff`). A net under the functions above:
 * what they missed cannot act on the terminal either.
 */
export function terminalText(text: string): string {
  return text.replace(TERMINAL_ALL, escapeChar);
}

/**
 * A message (an error, a warning) as one line: the core's messages name paths and holders, which
 * co-users choose; none of them may start a line of its own or act on the terminal.
 */
export function messageText(text: string): string {
  return text.replace(UNSAFE_ALL, escapeChar);
}

/** A time from the disk (a record's `time`, a holder's `acquiredAt`) as its parsed value in ISO 8601 UTC; undefined when it is no time. */
export function parsedTime(text: unknown): string | undefined {
  const ms = typeof text === 'string' ? Date.parse(text) : NaN;
  return Number.isFinite(ms) ? new Date(ms).toISOString() : undefined;
}

/**
 * A time from the disk as text shows it: written anew from its parsed value, to the second
 * (`2024-05-01T12:00:00Z`), never as the co-user wrote it (`Date.parse` takes text with a newline
 * inside a parenthesis as a comment); `?` when it is no time.
 */
export function printableTime(text: unknown): string {
  return parsedTime(text)?.replace(/\.\d+Z$/, 'Z') ?? '?';
}

/** One JSON string token, escapes and all. Matched from the start of a JSON text, tokens are found in order: outside strings JSON has no `"`. */
const JSON_STRING = /"(?:[^"\\]|\\.)*"/g;
/** A lone surrogate as JSON.stringify writes it (a pair it writes as the character itself). */
const LONE_ESCAPE = /\\ud[89a-f][0-9a-f]{2}/;
/** What JSON.stringify leaves as it is but a consumer's terminal or parser should not get: DEL, C1, format characters, separators. */
const JSON_UNSAFE = /[\u007f-\u009f\p{Cf}\p{Zl}\p{Zp}]/gu;
/**
 * A field that holds a time, which records on the disk give as text anyone could have written,
 * with its value; found by its name first (a scan that stops at every `"` costs five times more),
 * then taken only where it is a key: after `"`, itself after `{` or `,` (a `"` inside a string is
 * escaped).
 */
const TIME_FIELD = /(acquiredAt|queuedAt|stagedAt|time)"(\s*:\s*)("(?:[^"\\]|\\.)*")/g;

function isKey(text: string, quote: number): boolean {
  if (text[quote] !== '"') return false;
  let i = quote - 1;
  while (i >= 0 && (text[i] === ' ' || text[i] === '\n')) i--;
  return text[i] === '{' || text[i] === ',';
}

/** A JSON string token as it should be given: one that holds a lone surrogate as `printable` shows it. */
function wellFormed(token: string): string {
  if (!LONE_ESCAPE.test(token)) return token;
  const s = JSON.parse(token) as string;
  return /\p{Cs}/u.test(s) ? JSON.stringify(printable(s)) : token;
}

/**
 * A value as JSON for any consumer: JSON.stringify's text (with `indent`), with
 * - no raw control or format character in it (escaped as `\u0085`, `\u202e`: the same value);
 * - no lone surrogate, which strict parsers refuse: a string that holds one (a name whose bytes
 *   are not UTF-8) is given as `printable` shows it, `"\"board/R\\xff\""`, which the command line
 *   takes back as that name;
 * - every time (`acquiredAt`, `queuedAt`, `stagedAt`, `time`) written anew from its parsed value,
 *   ISO 8601 UTC, never as a record on the disk spelled it ('' where it is no time).
 */
export function jsonText(value: unknown, indent?: number): string {
  let text = JSON.stringify(value, null, indent) ?? 'null';
  // JSON.stringify writes a lone surrogate as an escape, and nothing else as `\ud…`.
  if (text.includes('\\ud')) text = text.replace(JSON_STRING, wellFormed);
  return text
    .replace(TIME_FIELD, (match: string, key: string, colon: string, value: string, at: number, whole: string) =>
      isKey(whole, at - 1) ? `${key}"${colon}${JSON.stringify(parsedTime(JSON.parse(value)) ?? '')}` : match,
    )
    .replace(JSON_UNSAFE, escapeChar);
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
