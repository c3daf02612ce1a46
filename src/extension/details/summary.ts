/**
 * What the details page says of a build's manifest, as plain data: the bytes it records, its
 * stagings (each staging under one lock carries its fencing token, so the manifest knows the
 * build's history) and the first artifacts by name. Done in slices: a build can list 100,000
 * artifacts, and this runs in the extension host.
 */
import { pause, sortInSlices, type ManifestEntry } from '../../core';

/** One staging: the artifacts recorded under one fencing token (or under none, by older builds). */
export interface Staging {
  fence: number | undefined;
  /** The latest `stagedAt` among them (ISO 8601, so it sorts as text). */
  latest: string;
  count: number;
  bytes: number;
}

export interface ManifestSummary {
  count: number;
  bytes: number;
  /** Oldest first. */
  stagings: Staging[];
  /** The first `rows` artifacts in the order of the user's language. */
  first: ManifestEntry[];
}

/** Entries counted between two looks at the clock. */
const CHECK_EVERY = 1024;

export async function summarize(entries: readonly ManifestEntry[], rows: number): Promise<ManifestSummary> {
  const stagings = new Map<number | undefined, Staging>();
  let bytes = 0;
  for (let i = 0; i < entries.length; i++) {
    if (i % CHECK_EVERY === CHECK_EVERY - 1) {
      const p = pause();
      if (p !== undefined) await p;
    }
    const e = entries[i];
    bytes += e.size;
    let s = stagings.get(e.fence);
    if (s === undefined) stagings.set(e.fence, (s = { fence: e.fence, latest: '', count: 0, bytes: 0 }));
    s.count++;
    s.bytes += e.size;
    if (e.stagedAt > s.latest) s.latest = e.stagedAt;
  }
  const oldestFirst = [...stagings.values()].sort((a, b) => (a.latest < b.latest ? -1 : a.latest > b.latest ? 1 : 0));
  // localeCompare rather than an Intl.Collator: the same order, and V8 compares plain ASCII names
  // without going through ICU, which the collator always does.
  const sorted = await sortInSlices(entries, (a, b) => a.name.localeCompare(b.name));
  return { count: entries.length, bytes, stagings: oldestFirst, first: sorted.slice(0, rows) };
}
