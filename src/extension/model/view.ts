/**
 * How the builds of a folder are shown: which pass the filter and in what order. Plain functions
 * of the records, so that the tree only renders and the unit tests check the rules.
 */
import { naturalOrder, type AreaRecord, type Counts } from '../../core';

/** The states a filter can ask for. `mine`: held or being staged by this window. */
export const FILTER_STATES = ['held', 'stale', 'legacy', 'mine', 'free', 'damaged'] as const;
export type FilterState = (typeof FILTER_STATES)[number];

export interface BuildFilter {
  /** Words that must all appear in the tag, in any case. Empty: any tag. */
  text: string;
  /** Any of these states. Empty: any state. */
  states: readonly FilterState[];
}

export const NO_FILTER: BuildFilter = Object.freeze({ text: '', states: [] });

export const isActive = (f: BuildFilter): boolean => f.text.trim() !== '' || f.states.length > 0;

/** The states a build is in for filtering: exactly one lock state, plus `damaged`. */
export function statesOf(r: AreaRecord, mine: boolean): FilterState[] {
  const out: FilterState[] = [];
  if (mine) out.push('mine');
  else out.push(r.lock?.state ?? 'free');
  if (r.damaged !== undefined) out.push('damaged');
  return out;
}

/** Whether a build passes the filter. */
export function matches(r: AreaRecord, f: BuildFilter, mine: boolean): boolean {
  const words = f.text.toLowerCase().split(/\s+/).filter((w) => w !== '');
  const tag = r.tag.toLowerCase();
  if (!words.every((w) => tag.includes(w))) return false;
  if (f.states.length === 0) return true;
  const has = statesOf(r, mine);
  return f.states.some((s) => has.includes(s));
}

/** Builds counted by state, as a folder's row says them: this window's as yours, not as held. */
export function countsOf(builds: readonly AreaRecord[], isMine: (r: AreaRecord) => boolean): Counts {
  const c: Counts = { builds: 0, held: 0, stale: 0, legacy: 0, mine: 0 };
  for (const r of builds) {
    c.builds++;
    const state = r.lock?.state ?? 'free';
    if (isMine(r)) c.mine++;
    else if (state !== 'free') c[state]++;
  }
  return c;
}

/**
 * `version`: newest first by the numbers in the name (R120-15662.1 before R120-15662.0, R9 after
 * R10), which is what someone looking for a build wants first. `lastUse`: most recently used first.
 * `size`: largest first. Builds not measured yet go last, by version.
 */
export const BUILD_ORDERS = ['version', 'lastUse', 'size'] as const;
export type BuildOrder = (typeof BUILD_ORDERS)[number];

export function sortBuilds(builds: readonly AreaRecord[], order: BuildOrder): AreaRecord[] {
  const byVersion = (a: AreaRecord, b: AreaRecord): number => naturalOrder.compare(nameOf(b), nameOf(a));
  if (order === 'version') {
    // Listings come in natural order already: one pass to check is far cheaper than a sort of
    // thousands with a collator.
    const ascending = builds.every((r, i) => i === 0 || naturalOrder.compare(nameOf(builds[i - 1]), nameOf(r)) <= 0);
    return ascending ? [...builds].reverse() : [...builds].sort(byVersion);
  }
  const value = (r: AreaRecord): number | undefined => (order === 'size' ? r.usage?.bytes : r.usage?.lastUsedMs);
  return [...builds].sort((a, b) => {
    const va = value(a);
    const vb = value(b);
    if (va === undefined || vb === undefined) return va === vb ? byVersion(a, b) : va === undefined ? 1 : -1;
    return vb - va || byVersion(a, b);
  });
}

/** Folders read top to bottom in name order. */
export function sortFolders(folders: readonly AreaRecord[]): AreaRecord[] {
  return [...folders].sort((a, b) => naturalOrder.compare(nameOf(a), nameOf(b)));
}

const nameOf = (r: AreaRecord): string => r.tag.slice(r.tag.lastIndexOf('/') + 1);
