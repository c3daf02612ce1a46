/**
 * Measuring on a shared, noisy machine: candidates and baselines run in alternating rounds (so a
 * burst of load hits both), and we report medians and p95 rather than means.
 */
import { performance } from 'perf_hooks';

export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  // Nearest-rank: the smallest sample with at least p% of samples at or below it.
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

export const median = (s: readonly number[]): number => percentile(s, 50);
export const p95 = (s: readonly number[]): number => percentile(s, 95);

export interface Candidate {
  name: string;
  /** One operation; its duration is one sample. */
  run(): Promise<unknown>;
}

export interface InterleaveOptions {
  /** Untimed operations of each candidate before measuring (JIT, caches, directory entries). */
  warmup: number;
  /** Timed operations of each candidate per round. */
  perRound: number;
  /** Rounds at most; each runs every candidate once, in an order rotated per round. */
  rounds: number;
  /** Stop starting new rounds after this long (all candidates keep equal round counts). */
  budgetMs: number;
}

/** Samples in milliseconds per candidate name. */
export async function interleave(candidates: readonly Candidate[], o: InterleaveOptions): Promise<Map<string, number[]>> {
  const samples = new Map<string, number[]>(candidates.map((c) => [c.name, []]));
  for (const c of candidates) for (let i = 0; i < o.warmup; i++) await c.run();
  const start = performance.now();
  for (let round = 0; round < o.rounds && performance.now() - start < o.budgetMs; round++) {
    for (let k = 0; k < candidates.length; k++) {
      // Rotate who goes first, so no candidate always runs right after the same other one.
      const c = candidates[(round + k) % candidates.length];
      const out = samples.get(c.name)!;
      for (let i = 0; i < o.perRound; i++) {
        const t0 = performance.now();
        await c.run();
        out.push(performance.now() - t0);
      }
    }
  }
  return samples;
}

export interface Row {
  name: string;
  /** Unit of median, p95 and baseline: 'µs' or 'ms' (samples are in ms). */
  unit: 'µs' | 'ms';
  median: number;
  p95: number;
  baseline?: string;
  baselineMedian?: number;
  /** The aim as text, and whether it was met; undefined for context-only rows. */
  aim?: string;
  met?: boolean;
  /** Overrides the ratio column (rows that are counts rather than times). */
  ratioText?: string;
  medianText?: string;
  p95Text?: string;
  baselineText?: string;
}

function fmt(ms: number, unit: 'µs' | 'ms'): string {
  if (!Number.isFinite(ms)) return '-';
  const v = unit === 'µs' ? ms * 1000 : ms;
  return v >= 100 ? v.toFixed(0) : v.toFixed(1);
}

export function ratioOf(row: Row): number | undefined {
  return row.baselineMedian === undefined ? undefined : row.median / row.baselineMedian;
}

export function formatTable(rows: readonly Row[]): string {
  const header = ['name', 'median', 'p95', 'baseline (median)', 'ratio', 'aim', 'met?'];
  const body = rows.map((r) => {
    const ratio = ratioOf(r);
    return [
      r.name,
      r.medianText ?? `${fmt(r.median, r.unit)} ${r.unit}`,
      r.p95Text ?? `${fmt(r.p95, r.unit)} ${r.unit}`,
      r.baselineText ?? (r.baselineMedian === undefined ? '-' : `${r.baseline}: ${fmt(r.baselineMedian, r.unit)} ${r.unit}`),
      r.ratioText ?? (ratio === undefined ? '-' : `${ratio.toFixed(2)}×`),
      r.aim ?? '(context)',
      r.met === undefined ? '-' : r.met ? 'yes' : 'NO',
    ];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells: readonly string[]): string => cells.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...body.map(line)].join('\n');
}

/**
 * A row for a whole run timed against a baseline doing the same work: the figure is the speed
 * relative to the baseline (its median time over ours), in seconds, with the aim a minimum speed.
 */
/** A row of speed relative to a baseline (its time over ours); with `minSpeed`, that is the aim. */
export function speedRow(name: string, ours: readonly number[], baseline: string, theirs: readonly number[], minSpeed?: number): Row {
  const mOurs = median(ours);
  const mTheirs = median(theirs);
  const speed = mTheirs / mOurs;
  const s = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;
  return {
    name,
    unit: 'ms',
    median: mOurs,
    p95: Math.max(...ours),
    baseline,
    baselineMedian: mTheirs,
    ratioText: `${speed.toFixed(2)}× speed`,
    medianText: s(mOurs),
    p95Text: s(Math.max(...ours)),
    baselineText: `${baseline}: ${s(mTheirs)}`,
    ...(minSpeed !== undefined ? { aim: `≥ ${minSpeed.toFixed(2)}× speed`, met: speed >= minSpeed } : {}),
  };
}
