/**
 * Work over many items done in slices of a few milliseconds, with the event loop given back
 * between them. The process is often an editor's extension host, where a listing of 100,000 areas
 * held in one piece freezes every other extension for seconds; a command-line tool loses nothing
 * by it either (a slice costs one turn of the loop, tens of microseconds).
 */
/** How long a slice may hold the event loop. */
export const SLICE_MS = 8;

// process.hrtime, not `performance`: Node loads perf_hooks on the first use of `performance`, a
// twentieth of a command's start (as much as `list` of a small static directory costs in all).
const now = (): number => {
  const [s, ns] = process.hrtime();
  return s * 1e3 + ns / 1e6;
};
let sliceStart: number | undefined;
let pausing: Promise<void> | undefined;

/**
 * Undefined while the current slice lasts; once it is over, a promise that resolves after the
 * event loop had its turn (timers and I/O included). `sliceMs`: shorter for work that feeds other
 * threads, whose answers wait for the turn. Shared by all sliced work in the process:
 * ten listings at once then hold the loop for one slice at a time, not for one slice each.
 */
export function pause(sliceMs = SLICE_MS): Promise<void> | undefined {
  if (pausing !== undefined) return pausing;
  const t = now();
  sliceStart ??= t;
  if (t - sliceStart < sliceMs) return undefined;
  pausing = new Promise<void>((resolve) =>
    setImmediate(() => {
      pausing = undefined;
      sliceStart = now();
      resolve();
    }),
  );
  return pausing;
}

/**
 * Runs `fn` on every item, at most `lanes` at a time, pausing between items as `pause` says. The
 * lanes keep the thread pool busy where `fn` waits for asynchronous calls; where its calls are
 * synchronous they simply take turns. The first error stops every lane and is thrown.
 */
export async function eachInSlices<T>(items: readonly T[], lanes: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failed = false;
  const lane = async (): Promise<void> => {
    while (!failed && next < items.length) {
      // Looked at before each item, not only after: when a pause ends, every lane wakes, and
      // those that wake after the slice is spent wait again without taking an item.
      const p = pause();
      if (p !== undefined) {
        await p;
        continue;
      }
      const item = items[next++];
      try {
        await fn(item);
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(lanes, items.length) }, lane));
}

/** Items sorted in runs of this many at once; merged from there. */
const RUN = 512;
/** How many merge steps between two looks at the clock. */
const CHECK_EVERY = 256;

/**
 * A stable sort (a bottom-up merge sort) that pauses between slices: `Array.prototype.sort` of
 * 100,000 names with a collator holds the event loop for a second. Returns a new array.
 */
export async function sortInSlices<T>(items: readonly T[], compare: (a: T, b: T) => number): Promise<T[]> {
  const n = items.length;
  let src: T[] = [];
  for (let i = 0; i < n; i += RUN) {
    const run = items.slice(i, i + RUN).sort(compare);
    for (const x of run) src.push(x);
    const p = pause();
    if (p !== undefined) await p;
  }
  if (n <= RUN) return src;
  let dst: T[] = new Array<T>(n);
  for (let width = RUN; width < n; width *= 2) {
    let steps = 0;
    for (let lo = 0; lo < n; lo += 2 * width) {
      const mid = Math.min(lo + width, n);
      const hi = Math.min(lo + 2 * width, n);
      let i = lo;
      let j = mid;
      let k = lo;
      while (i < mid || j < hi) {
        // Ties take the left run's item first: the sort stays stable.
        dst[k++] = j >= hi || (i < mid && compare(src[i], src[j]) <= 0) ? src[i++] : src[j++];
        if (++steps % CHECK_EVERY === 0) {
          const p = pause();
          if (p !== undefined) await p;
        }
      }
    }
    [src, dst] = [dst, src];
  }
  return src;
}
