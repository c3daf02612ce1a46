/**
 * The model's scan of the folders below each static directory: which are listed on their own
 * (each real directory once, whatever links lead to it, up to `MAX_SCANNED_FOLDERS`), which are
 * left unlisted as a directory listed already under another tag, and when the scan has ended.
 */
import * as fs from 'fs';
import { keyOf, type AreaRef } from './records';
import { MAX_SCANNED_FOLDERS, ScannedDirs, checkScanRoot, dirIdentity } from './scope';

/** What the scan needs of the model. */
export interface Scanned {
  /** Whether an area is known. */
  known(staticDir: string, tag: string): boolean;
  /** Lists a folder (its children). */
  list(staticDir: string, tag: string): Promise<unknown>;
  /** A folder was found to be a directory listed already. */
  listedAs(ref: AreaRef): void;
  /** Whether nothing was forgotten since the scan of `generation` began (no reset, no dispose). */
  current(generation: number): boolean;
  warn(message: string): void;
}

export class FolderScan {
  /** Per static directory, the real directories its scan listed (each once, whatever links lead to it). */
  private readonly scanned = new Map<string, ScannedDirs>();
  /** Folders the scan did not list because their directory was listed as another tag: that tag. */
  private readonly duplicates = new Map<string, string>();
  /** Folders the scan found and is looking at (their identity) before listing them. */
  readonly scanning = new Set<Promise<void>>();

  constructor(private readonly model: Scanned) {}

  /** A static directory's own real directory, first of what its scan lists; refused when it holds everything. */
  async claimRoot(staticDir: string): Promise<void> {
    const real = await fs.promises.realpath(staticDir).catch(() => staticDir);
    checkScanRoot(staticDir, real);
    const id = await dirIdentity(staticDir);
    if (id !== undefined) this.scannedOf(staticDir).claim(id, '', () => true);
  }

  private scannedOf(staticDir: string): ScannedDirs {
    let s = this.scanned.get(staticDir);
    if (s === undefined) this.scanned.set(staticDir, (s = new ScannedDirs()));
    return s;
  }

  /** Begins to look at a folder a listing found, to list it on its own (`scanning` holds it meanwhile). */
  start(staticDir: string, tag: string, dir: string, generation: number): void {
    const job = this.scanFolder(staticDir, tag, dir, generation).catch(() => undefined);
    this.scanning.add(job);
    void job.then(() => this.scanning.delete(job));
  }

  /** Lists a folder the scan found, unless its real directory was listed already (or the scan is full). */
  private async scanFolder(staticDir: string, tag: string, dir: string, generation: number): Promise<void> {
    const id = await dirIdentity(dir);
    if (id === undefined || !this.model.current(generation)) return;
    const scanned = this.scannedOf(staticDir);
    const wasStopped = scanned.stopped;
    const claimed = scanned.claim(id, tag, (t) => t === '' || this.model.known(staticDir, t));
    if (claimed === true) {
      this.duplicates.delete(keyOf(staticDir, tag));
      await this.model.list(staticDir, tag);
      return;
    }
    if (claimed === false) {
      this.duplicates.set(keyOf(staticDir, tag), scanned.tagOf(id)!);
      // Its row says so now, instead of counting for ever.
      this.model.listedAs({ staticDir, tag });
      return;
    }
    if (!wasStopped) this.model.warn(`Stopped listing the folders of ${staticDir} on their own after ${MAX_SCANNED_FOLDERS}: is it really a static directory of builds? The others are listed when they are expanded.`);
  }

  /** For a folder left unlisted as a directory listed already: the tag it was listed as. */
  sameAs(key: string): string | undefined {
    return this.duplicates.get(key);
  }

  /** Forgets what the scan said of an area. */
  forget(key: string): void {
    this.duplicates.delete(key);
  }

  /** Forgets everything (a reset). */
  clear(): void {
    this.scanned.clear();
    this.duplicates.clear();
  }
}
