/**
 * Progress on stderr. Of a staging: on a terminal, one line redrawn in place; elsewhere (CI logs,
 * pipes), plain lines: finished artifacts at most a line a second (a staging of 100,000 small files
 * would otherwise put 100,000 lines into a log), and a line every few seconds for a long one, so a
 * log neither floods nor falls silent. Of a verification: the line on a terminal only.
 */
import type { StageProgress } from '../core/stage/types';
import type { VerifyProgress } from '../core/verify';
import { printable } from '../core/base/format';
import { formatBytes, formatCount, formatRate } from './units';

/** Where progress goes: whole lines through `write`, the line redrawn in place through `draw` (see `Output`). */
export interface ProgressOutput {
  write(text: string): unknown;
  draw(text: string): unknown;
  isTTY?: boolean;
  columns?: number | undefined;
}

export interface ProgressViewOptions {
  /** Whether to redraw one line; default: whether the output is a terminal. */
  tty?: boolean;
  /** Without a terminal: the longest silence while an artifact is being written. Default 5 s. */
  intervalMs?: number;
  /** Without a terminal: the shortest time between two lines of finished artifacts. Default 1 s. */
  finishedEveryMs?: number;
  now?: () => number;
}

/** The rate is measured over this much recent time, so it follows a download that speeds up or stalls. */
const RATE_WINDOW_MS = 5_000;
/** Redraws of the terminal line at most this often. */
const REDRAW_MS = 100;

export class StageProgressView {
  private readonly tty: boolean;
  private readonly intervalMs: number;
  private readonly finishedEveryMs: number;
  private readonly now: () => number;
  private readonly samples: { t: number; bytes: number }[] = [];
  private done = 0;
  /** The artifact seen since the last one finished: names a finish reported without a name. */
  private current: string | undefined;
  private lastLineAt: number;
  private lastDrawAt = Number.NEGATIVE_INFINITY;
  private drawn = false;
  /** Without a terminal: finishes not yet written (the latest named one and how many in all), and the total after them. */
  private pending: { name: string | undefined; size: number; count: number; artifacts: number; bytes: number } | undefined;

  constructor(
    private readonly out: ProgressOutput,
    options: ProgressViewOptions = {},
  ) {
    this.tty = options.tty ?? out.isTTY === true;
    this.intervalMs = options.intervalMs ?? 5_000;
    this.finishedEveryMs = options.finishedEveryMs ?? 1_000;
    this.now = options.now ?? Date.now;
    this.lastLineAt = this.now();
  }

  update(p: StageProgress): void {
    const t = this.now();
    this.samples.push({ t, bytes: p.bytes });
    while (this.samples.length > 2 && t - this.samples[1].t > RATE_WINDOW_MS) this.samples.shift();
    if (p.artifact !== '') this.current = p.artifact;
    const finished = p.artifacts - this.done;
    if (this.tty) {
      if (finished > 0) this.done = p.artifacts;
      // A finish is always drawn, so the count on screen is never behind.
      if (finished > 0 || t - this.lastDrawAt >= REDRAW_MS) this.draw(p, t);
      return;
    }
    if (finished > 0) {
      this.done = p.artifacts;
      const name = p.artifact !== '' ? p.artifact : this.current;
      // The size only when this report is about the finished artifact itself, not an earlier look at it.
      const size = p.artifact !== '' ? p.artifactBytes : 0;
      const before = this.pending;
      this.pending = {
        name: name ?? before?.name,
        size: name !== undefined ? size : (before?.size ?? 0),
        count: (before?.count ?? 0) + finished,
        artifacts: p.artifacts,
        bytes: p.bytes,
      };
      this.current = undefined;
    }
    // Held-back finishes go out within a second, also while a long artifact is being written.
    if (this.pending !== undefined && t - this.lastLineAt >= this.finishedEveryMs) this.flush(t);
    else if (finished === 0 && p.artifact !== '' && t - this.lastLineAt >= this.intervalMs) this.line(`${printable(p.artifact)}: ${this.amount(p)}, ${this.rate()}`, t);
  }

  /**
   * Removes the terminal line, before other output or at the end; without a terminal, writes the
   * finishes held back, so a log's last progress line has the final count.
   */
  clear(): void {
    if (this.tty && this.drawn) this.out.draw('\r\x1b[K');
    this.drawn = false;
    this.flush(this.now());
  }

  private flush(t: number): void {
    const f = this.pending;
    if (f === undefined) return;
    this.pending = undefined;
    const what = f.name === undefined ? '' : `${printable(f.name)}${f.size > 0 ? ` (${formatBytes(f.size)})` : ''}${f.count > 1 ? ` and ${formatCount(f.count - 1)} more` : ''}; `;
    this.line(`done: ${what}${formatCount(f.artifacts)} artifact${f.artifacts === 1 ? '' : 's'}, ${formatBytes(f.bytes)} so far`, t);
  }

  private line(text: string, t: number): void {
    this.out.write(`${text}\n`);
    this.lastLineAt = t;
  }

  private amount(p: StageProgress): string {
    if (p.artifactTotal === undefined || p.artifactTotal <= 0) return formatBytes(p.artifactBytes);
    const pct = Math.min(100, Math.floor((p.artifactBytes * 100) / p.artifactTotal));
    return `${formatBytes(p.artifactBytes)} of ${formatBytes(p.artifactTotal)} (${pct}%)`;
  }

  private rate(): string {
    const first = this.samples[0];
    const last = this.samples[this.samples.length - 1];
    return first === undefined || last === undefined ? '-' : formatRate(last.bytes - first.bytes, last.t - first.t);
  }

  private draw(p: StageProgress, t: number): void {
    this.lastDrawAt = t;
    const overall =
      p.totalBytes !== undefined && p.totalBytes > 0 ? `, all ${Math.min(100, Math.floor((p.bytes * 100) / p.totalBytes))}%` : ` (${formatBytes(p.bytes)} in all)`;
    const tail = p.artifact !== '' ? `  ${this.amount(p)}${overall}  ${this.rate()}` : `${formatBytes(p.bytes)}  ${this.rate()}`;
    const head = `[${p.artifacts} done] `;
    const width = lineWidth(this.out);
    const name = fitName(printable(p.artifact), width - head.length - tail.length);
    this.out.draw(`\r${`${head}${name}${tail}`.slice(0, width)}\x1b[K`);
    this.drawn = true;
  }
}

/** How wide a redrawn line may be: below the terminal's width, since a wrapped line cannot be redrawn with \r. */
function lineWidth(out: ProgressOutput): number {
  const columns = out.columns !== undefined && out.columns > 0 ? out.columns : 80; // 0 where the size is unknown
  return Math.max(20, columns - 1);
}

/** `name` cut from the left to `room` characters, the end (the file's own name) kept. */
function fitName(name: string, room: number): string {
  if (name.length <= room) return name;
  return room > 1 ? `…${name.slice(name.length - room + 1)}` : '';
}

/**
 * Progress of a verification on a terminal: one line, redrawn in place (the core sends at most ten
 * reports a second). Nothing where the output is not a terminal: a verification's result is its
 * summary, and a log gains nothing from a count going up.
 */
export class VerifyProgressView {
  private drawn = false;

  constructor(private readonly out: ProgressOutput) {}

  update(p: VerifyProgress): void {
    if (this.out.isTTY !== true) return;
    const pct = p.totalBytes > 0 ? Math.min(100, Math.floor((p.bytes * 100) / p.totalBytes)) : 100;
    const head = `[${formatCount(p.files)}/${formatCount(p.totalFiles)} files] ${formatBytes(p.bytes)} of ${formatBytes(p.totalBytes)} (${pct}%)  `;
    const width = lineWidth(this.out);
    this.out.draw(`\r${`${head}${fitName(printable(p.current ?? ''), width - head.length)}`.slice(0, width)}\x1b[K`);
    this.drawn = true;
  }

  /** Removes the line, before other output or at the end. */
  clear(): void {
    if (this.drawn) this.out.draw('\r\x1b[K');
    this.drawn = false;
  }
}
