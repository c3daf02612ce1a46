/**
 * Progress of one staging call: bytes of the artifacts in flight and finished, reported to the
 * caller at most every 100 ms while bytes flow, and once for every finished artifact.
 */
import type { StageOptions, StageProgress } from './types';

const PROGRESS_MS = 100;

export class Progress {
  private last = 0;
  /**
   * Artifacts in progress (several local files are copied at once): bytes done and total. For a
   * local file, done is the lesser of bytes copied and bytes hashed: it is not done until both are.
   */
  private readonly active = new Map<string, { bytes: number; total?: number }>();
  /** The artifact reported last: the one progress events name. */
  private current = '';
  /** Sizes of the artifacts finished so far. */
  private doneBytes = 0;
  /** Artifacts finished so far. */
  private artifacts = 0;
  /** Bytes of all the sources, where known before they are read. */
  totalBytes: number | undefined;
  /** Bytes received from servers, and the sizes they declared; undefined until a download begins. */
  private downloaded: { bytes: number; total: number | undefined; declared: Set<string> } | undefined;

  constructor(private readonly onProgress: StageOptions['onProgress']) {}

  /** `name` is in progress: `bytes` done so far (of `total`, where known). */
  update(name: string, bytes: number, total?: number): void {
    this.active.set(name, total === undefined ? { bytes } : { bytes, total });
    this.current = name;
    this.report(false);
  }

  /** `n` more bytes done of `name` (of `total`, where known). */
  add(name: string, n: number, total?: number): void {
    const a = this.active.get(name) ?? { bytes: 0 };
    a.bytes += n;
    if (total !== undefined) a.total = total;
    this.active.set(name, a);
    this.current = name;
    this.report(false);
  }

  /** `n` more bytes received for the download of `source`, which declared `total` bytes (Content-Length). */
  download(source: string, n: number, total?: number): void {
    const d = (this.downloaded ??= { bytes: 0, total: undefined, declared: new Set() });
    d.bytes += n;
    if (total !== undefined && !d.declared.has(source)) {
      d.declared.add(source);
      d.total = (d.total ?? 0) + total;
    }
    this.report(false);
  }

  /** One event per finished artifact, naming it, whatever the throttle says. */
  finished(name: string, size: number, done: NonNullable<StageProgress['done']>): void {
    this.artifacts++;
    this.active.set(name, { bytes: size, total: size });
    this.current = name;
    this.report(true, done);
    this.active.delete(name);
    this.doneBytes += size;
  }

  private report(force: boolean, done?: StageProgress['done']): void {
    const cb = this.onProgress;
    if (cb === undefined) return;
    const now = Date.now();
    if (!force && now - this.last < PROGRESS_MS) return;
    this.last = now;
    let inFlight = 0;
    for (const a of this.active.values()) inFlight += a.bytes;
    const shown = this.active.get(this.current);
    const p: StageProgress = { artifact: shown === undefined ? '' : this.current, artifactBytes: shown?.bytes ?? 0, bytes: this.doneBytes + inFlight, artifacts: this.artifacts };
    if (shown?.total !== undefined) p.artifactTotal = shown.total;
    if (this.totalBytes !== undefined) p.totalBytes = Math.max(this.totalBytes, p.bytes);
    if (this.downloaded !== undefined) {
      p.downloadBytes = this.downloaded.bytes;
      if (this.downloaded.total !== undefined) p.downloadTotal = Math.max(this.downloaded.total, this.downloaded.bytes);
    }
    if (done !== undefined) p.done = done;
    try {
      cb(p);
    } catch {
      /* a progress listener must not break staging */
    }
  }
}
