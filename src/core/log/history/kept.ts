/**
 * The events a read keeps, in the history's order, as many as its limit: memory follows the
 * limit, not how much history there is.
 */
import { sortInSlices } from '../../base/slices';
import type { HistoryEvent } from './events';

/** An event read, with what orders it: its time, then its host's events as written (segment, generation, line). */
export interface Read {
  e: HistoryEvent;
  t: number;
  /** The segments of one host in one tag directory, numbered in the order they were found. */
  source: number;
  generation: number;
  line: number;
}

/** Oldest first; events of one time keep the order they were written in (one host's). */
const byTime = (a: Read, b: Read): number => a.t - b.t || a.source - b.source || a.generation - b.generation || a.line - b.line;

/**
 * The events an answer keeps: all of them, or only the newest `limit` (by the order above), so
 * that memory follows the limit, not how much history there is. Nothing is spread into a call's
 * arguments: the count of events is set by whoever writes the history.
 */
export class Kept {
  private items: Read[] = [];
  private sources = 0;

  constructor(private readonly limit: number) {}

  /** A number for the segments of one host in one tag directory. */
  source(): number {
    return this.sources++;
  }

  add(r: Read): void {
    this.items.push(r);
    if (this.items.length >= 2 * this.limit + 1_000) this.items = this.newest(this.items.sort(byTime));
  }

  private newest(sorted: Read[]): Read[] {
    return this.limit === Infinity || sorted.length <= this.limit ? sorted : sorted.slice(sorted.length - this.limit);
  }

  async events(): Promise<HistoryEvent[]> {
    return (await this.reads()).map((r) => r.e);
  }

  /** The events kept with their times, in order. */
  async reads(): Promise<Read[]> {
    const sorted = this.newest(await sortInSlices(this.items, byTime));
    this.items = [];
    return sorted;
  }
}
