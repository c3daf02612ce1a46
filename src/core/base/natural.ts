/**
 * Sorting many names in natural order (`naturalOrder`: R9 before R10) without holding the event
 * loop. The collator costs about a microsecond a comparison, a second for 100,000 names. Names of
 * printable ASCII, which build tags almost always are, get a key instead whose plain string order
 * is the collator's; the result is then checked with the collator, one comparison a name, and
 * sorted with the collator itself wherever a key and the collator disagree.
 */
import { naturalOrder } from './format';
import { pause, sortInSlices } from './slices';

/** Lower than every character of a key's first part: ends it, so that "a" sorts before "ab". */
const END = '\u0001';
/** Key characters start above END. */
const BASE = 0x20;

/**
 * The collator's order of printable ASCII, one weight per character that is not a digit (a letter
 * and its capital share one), and the weight of a number. Asked of the collator itself, so that
 * another ICU version's order is followed rather than assumed.
 */
const WEIGHTS: { ofChar: Map<string, string>; number: string } = (() => {
  const singles: string[] = [];
  for (let c = 0x20; c < 0x7f; c++) {
    const ch = String.fromCharCode(c);
    if ((ch >= '1' && ch <= '9') || (ch >= 'A' && ch <= 'Z')) continue;
    singles.push(ch);
  }
  singles.sort(naturalOrder.compare);
  const ofChar = new Map<string, string>();
  let weight = BASE;
  singles.forEach((ch, i) => {
    if (i > 0 && naturalOrder.compare(singles[i - 1], ch) !== 0) weight++;
    ofChar.set(ch, String.fromCharCode(weight));
    if (ch >= 'a' && ch <= 'z') ofChar.set(ch.toUpperCase(), String.fromCharCode(weight));
  });
  return { ofChar, number: ofChar.get('0')! };
})();

/**
 * A key whose code-unit order is the collator's order of names, for a name of printable ASCII;
 * undefined for any other name. First each character's weight, with a run of digits as its number
 * (the count of its digits without leading zeros, then those digits), so that R9 sorts before R10
 * and R01 with R1; then, for names equal so far, the case of each letter, small first.
 */
export function naturalKey(name: string): string | undefined {
  let primary = '';
  let cases = '';
  for (let i = 0; i < name.length; ) {
    const c = name.charCodeAt(i);
    if (c >= 0x30 && c <= 0x39) {
      let j = i;
      while (j < name.length && name.charCodeAt(j) === 0x30) j++;
      const start = j;
      while (j < name.length && name.charCodeAt(j) >= 0x30 && name.charCodeAt(j) <= 0x39) j++;
      // Runs of zeros only ("0", "00") are the number zero: no significant digits.
      const digits = name.slice(start, j);
      primary += WEIGHTS.number + String.fromCharCode(BASE + digits.length) + digits;
      i = j;
      continue;
    }
    const w = WEIGHTS.ofChar.get(name[i]);
    if (w === undefined) return undefined;
    primary += w;
    if (c >= 0x41 && c <= 0x5a) cases += 'b';
    else if (c >= 0x61 && c <= 0x7a) cases += 'a';
    i++;
  }
  return primary + END + cases;
}

/**
 * `items` sorted by `nameOf` in natural order, stable, pausing between slices (see slices.ts).
 * Returns a new array.
 */
export async function sortNatural<T>(items: readonly T[], nameOf: (item: T) => string): Promise<T[]> {
  const keyed: { key: string; item: T }[] = [];
  let plain = true;
  for (const item of items) {
    const key = naturalKey(nameOf(item));
    if (key === undefined) {
      plain = false;
      break;
    }
    keyed.push({ key, item });
    if (keyed.length % 1024 === 0) {
      const p = pause();
      if (p !== undefined) await p;
    }
  }
  const byCollator = (a: T, b: T): number => naturalOrder.compare(nameOf(a), nameOf(b));
  if (!plain) return sortInSlices(items, byCollator);
  const sorted = (await sortInSlices(keyed, (a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))).map((k) => k.item);
  // The keys are built to agree with the collator; its word is checked, not assumed.
  for (let i = 1; i < sorted.length; i++) {
    if (byCollator(sorted[i - 1], sorted[i]) > 0) return sortInSlices(sorted, byCollator);
    if (i % 512 === 0) {
      const p = pause();
      if (p !== undefined) await p;
    }
  }
  return sorted;
}
