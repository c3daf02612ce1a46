/**
 * The sizes and last uses of the model's builds: measured on request (a walk of their files), put
 * into the records, and measured again, each build alone, once its lock or its files change.
 */
import { usage } from '../usage';
import type { Timing } from '../base/types';
import { keyOf, type AreaRecord, type StateChange } from './records';

/** Builds measured again one by one when fewer than this lack a measure; more, and their folder is walked once. */
const MEASURE_ONE_BY_ONE = 32;
/** Builds whose lock or files changed are measured again after this, together. */
const REMEASURE_MS = 250;

/** What the measures need of the model. */
export interface Measured {
  record(staticDir: string, tag: string): AreaRecord | undefined;
  buildsUnder(staticDir: string, tag: string): AreaRecord[];
  /** Resolves once every listing begun so far has ended. */
  settled(): Promise<void>;
  timing(): Timing;
  disposed(): boolean;
  /** Reports changes of measure. */
  changed(changes: StateChange[]): void;
}

export class Measures {
  private readonly measuring = new Map<string, Promise<void>>();
  /** Measured builds whose lock or files changed since: measured again, each alone (`REMEASURE_MS`). */
  private readonly stale = new Map<string, AreaRecord>();
  private remeasureTimer: NodeJS.Timeout | undefined;

  constructor(private readonly model: Measured) {}

  /**
   * Measures size and last use of the builds at or below an area that have no measure yet (a walk
   * of their files): a few one by one, many by one walk of the area. The records say it, and a
   * change event names each build whose measure changed. Once measured, a build is measured again
   * on its own when its lock or its files change, and nothing else is.
   */
  measure(staticDir: string, tag: string): Promise<void> {
    const key = keyOf(staticDir, tag);
    const running = this.measuring.get(key);
    if (running !== undefined) return running;
    const job = (async () => {
      // After the scan: every folder's count comes before any walk of builds' files.
      await this.model.settled();
      const missing = this.model.buildsUnder(staticDir, tag).filter((r) => r.usage === undefined);
      if (missing.length === 0 || this.model.disposed()) return;
      if (missing.length < MEASURE_ONE_BY_ONE) await this.measureEach(missing);
      // Asynchronously: a build of 100,000 files is walked while the view stays responsive.
      else this.model.changed(this.take(staticDir, await usage(staticDir, { ...this.model.timing(), async: true, ...(tag === '' ? {} : { subpath: tag }) })));
    })().finally(() => this.measuring.delete(key));
    this.measuring.set(key, job);
    return job;
  }

  /** Measures builds one by one, and reports those whose measure changed. */
  private async measureEach(builds: readonly AreaRecord[]): Promise<void> {
    const changes: StateChange[] = [];
    for (const r of builds) {
      const measured = await usage(r.staticDir, { ...this.model.timing(), async: true, subpath: r.tag }).catch(() => []);
      changes.push(...this.take(r.staticDir, measured));
    }
    this.model.changed(changes);
  }

  /** Puts measures into the records: the changes for those that differ from what was known. */
  private take(staticDir: string, measured: readonly { tag: string; bytes: number; lastUsedMs: number }[]): StateChange[] {
    if (this.model.disposed()) return [];
    const changes: StateChange[] = [];
    for (const u of measured) {
      const r = this.model.record(staticDir, u.tag);
      if (r === undefined || r.kind !== 'build' || (r.usage?.bytes === u.bytes && r.usage.lastUsedMs === u.lastUsedMs)) continue;
      r.usage = { bytes: u.bytes, lastUsedMs: u.lastUsedMs };
      changes.push({ staticDir, tag: u.tag, what: 'usage' });
    }
    return changes;
  }

  /**
   * A measured build whose lock changed hands may have been staged into, and one whose files
   * changed has: it is measured again (alone), keeping its last measure until then, so that its
   * row neither loses its size nor moves meanwhile.
   */
  remeasure(r: AreaRecord): void {
    if (r.usage === undefined || this.model.disposed()) return;
    this.stale.set(keyOf(r.staticDir, r.tag), r);
    this.remeasureTimer ??= setTimeout(() => {
      this.remeasureTimer = undefined;
      const due = [...this.stale.values()].filter((b) => this.model.record(b.staticDir, b.tag) === b);
      this.stale.clear();
      void this.measureEach(due).catch(() => undefined);
    }, REMEASURE_MS);
  }

  /** Forgets the builds waiting to be measured again (a reset). */
  clear(): void {
    this.stale.clear();
  }

  dispose(): void {
    clearTimeout(this.remeasureTimer);
  }
}
