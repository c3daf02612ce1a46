/**
 * How long the event loop is held at once, measured two ways. Wall time: how late a timer due
 * every 5 ms comes (what a user of the process feels, on this machine at its load). Thread CPU:
 * how much of that gap this thread spent running (`process.threadCpuUsage`, Node 23.9 and later),
 * which leaves out the time the thread waited for a CPU that other processes had: on a shared
 * machine under load the wall figure says as much about the others as about us.
 */
import { constants, monitorEventLoopDelay, performance, PerformanceObserver, type PerformanceEntry } from 'perf_hooks';

const INTERVAL_MS = 5;

type ThreadCpu = () => NodeJS.CpuUsage;
const threadCpu = (process as { threadCpuUsage?: ThreadCpu }).threadCpuUsage?.bind(process);
const cpuMs = (): number => {
  const u = threadCpu!();
  return (u.user + u.system) / 1000;
};

export interface Block {
  /** ms since the probe started. */
  atMs: number;
  wallMs: number;
  /** This thread's CPU in the gap; NaN where Node cannot tell. */
  cpuMs: number;
}

/** A garbage collection's pause, as Node reports it (perf_hooks' `gc` entries). */
export interface Pause {
  atMs: number;
  ms: number;
  kind: 'minor' | 'major' | 'incremental' | 'weak callbacks' | 'other';
}

function pauseKind(kind: number | undefined): Pause['kind'] {
  if (kind === constants.NODE_PERFORMANCE_GC_MINOR) return 'minor';
  if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) return 'major';
  if (kind === constants.NODE_PERFORMANCE_GC_INCREMENTAL) return 'incremental';
  if (kind === constants.NODE_PERFORMANCE_GC_WEAKCB) return 'weak callbacks';
  return 'other';
}

export class BlockProbe {
  private readonly histogram = monitorEventLoopDelay({ resolution: 1 });
  private readonly t0 = performance.now();
  private lastWall = performance.now();
  private lastCpu = threadCpu !== undefined ? cpuMs() : NaN;
  private readonly timer: NodeJS.Timeout;
  /** Gaps over 50 ms of wall time, or over 20 ms of this thread's CPU. */
  readonly long: Block[] = [];
  /** The gap with the most CPU of this thread in it. */
  mostCpu: Block = { atMs: 0, wallMs: 0, cpuMs: threadCpu !== undefined ? 0 : NaN };
  /** Garbage collections meanwhile: a block is often one landing inside a slice of work. */
  readonly pauses: Pause[] = [];
  private readonly gc = new PerformanceObserver((list) => this.record(list.getEntries()));

  constructor() {
    this.histogram.enable();
    this.gc.observe({ entryTypes: ['gc'] });
    this.timer = setInterval(() => {
      const wall = performance.now();
      const cpu = threadCpu !== undefined ? cpuMs() : NaN;
      const b: Block = { atMs: this.lastWall - this.t0, wallMs: wall - this.lastWall - INTERVAL_MS, cpuMs: cpu - this.lastCpu };
      if (b.wallMs > 50 || b.cpuMs > 20) this.long.push(b);
      if (b.cpuMs > this.mostCpu.cpuMs) this.mostCpu = b;
      this.lastWall = wall;
      this.lastCpu = cpu;
    }, INTERVAL_MS);
  }

  /** The longest wall-time block so far (perf_hooks' event-loop delay monitor), in ms. */
  get maxWall(): number {
    return this.histogram.max / 1e6;
  }

  stop(): { wallMs: number; cpuMs: number } {
    clearInterval(this.timer);
    this.histogram.disable();
    // Entries are delivered later: those still on their way are taken now.
    this.record(this.gc.takeRecords());
    this.gc.disconnect();
    return { wallMs: this.maxWall, cpuMs: this.mostCpu.cpuMs };
  }

  /** One line: the longest blocks, and when they came. */
  describe(): string {
    const cpu = Number.isNaN(this.mostCpu.cpuMs) ? '' : `; most of this thread's CPU in one block ${this.mostCpu.cpuMs.toFixed(1)} ms (at +${(this.mostCpu.atMs / 1000).toFixed(1)} s, ${this.mostCpu.wallMs.toFixed(0)} ms wall)`;
    if (this.long.length === 0) return `none over 50 ms${cpu}${this.describePauses()}`;
    const worst = [...this.long].sort((a, b) => b.wallMs - a.wallMs).slice(0, 6);
    const one = (b: Block): string => `${b.wallMs.toFixed(0)} ms${Number.isNaN(b.cpuMs) ? '' : ` (CPU ${b.cpuMs.toFixed(0)})`} at +${(b.atMs / 1000).toFixed(1)} s`;
    return `${this.long.length} over 50 ms wall or 20 ms CPU; the longest: ${worst.map(one).join(', ')}${cpu}${this.describePauses()}`;
  }

  private record(entries: readonly PerformanceEntry[]): void {
    for (const e of entries) this.pauses.push({ atMs: e.startTime - this.t0, ms: e.duration, kind: pauseKind((e as { detail?: { kind?: number } }).detail?.kind) });
  }

  /** The longest garbage-collection pauses, by kind. */
  describePauses(): string {
    if (this.pauses.length === 0) return '';
    const worst = [...this.pauses].sort((a, b) => b.ms - a.ms).slice(0, 4);
    const total = this.pauses.reduce((sum, p) => sum + p.ms, 0);
    return `; ${this.pauses.length} garbage collections, ${total.toFixed(0)} ms in all, the longest ${worst.map((p) => `${p.ms.toFixed(1)} ms (${p.kind}) at +${(p.atMs / 1000).toFixed(1)} s`).join(', ')}`;
  }
}

/** Whether this Node can tell a thread's CPU from the process's. */
export const measuresThreadCpu = threadCpu !== undefined;

/**
 * The longest the event loop was held at once while `run` ran, over `times` runs: in wall time,
 * and the most of this thread's CPU in one block (see `BlockProbe`).
 */
export async function longestBlock(run: () => Promise<unknown>, times: number): Promise<{ wallMs: number; cpuMs: number }> {
  const worst = { wallMs: 0, cpuMs: measuresThreadCpu ? 0 : NaN };
  for (let i = 0; i < times; i++) {
    const probe = new BlockProbe();
    // The monitor's first sample comes a resolution after it is enabled: let it start.
    await new Promise((r) => setTimeout(r, 10));
    await run();
    await new Promise((r) => setTimeout(r, 10));
    const b = probe.stop();
    worst.wallMs = Math.max(worst.wallMs, b.wallMs);
    worst.cpuMs = Math.max(worst.cpuMs, b.cpuMs);
  }
  return worst;
}
