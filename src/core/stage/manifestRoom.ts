/**
 * The manifest's size limit for one staging: a staging whose manifest would pass it is refused
 * before anything is copied, or as soon as an artifact no source announced takes it past.
 */
import * as path from 'path';
import { MAX_MANIFEST_BYTES, entryBytes, leastEntriesBytes, manifestTooBig } from '../build/manifest';
import { MANIFEST_FILE } from '../base/protocol';
import { asyncIo } from '../fs/io';
import type { IncomingEntry, Manifest, ManifestEntry } from './types';

export class ManifestRoom {
  /**
   * What the manifest would take if it were written now (its limit, MAX_MANIFEST_BYTES, is checked
   * before anything is copied and again before each new artifact is), and the names counted in it.
   */
  private manifestSize = 0;
  private readonly counted = new Set<string>();

  constructor(
    private readonly dir: string,
    private readonly tag: string,
    private readonly fence: number,
  ) {}

  /**
   * Refuses, before anything is read or copied, a staging whose manifest would pass its limit: the
   * manifest there now (its size on disk) and, for the artifacts the sources bring, the least each
   * adds. A manifest near the limit is not even read (a build of 1.7 million artifacts: a minute and
   * gigabytes of memory).
   */
  async check(incoming: Promise<{ artifacts: number; nameBytes: number }>): Promise<void> {
    const file = path.join(this.dir, MANIFEST_FILE);
    const st = await asyncIo.lstatOrNull(file).catch(() => null);
    this.manifestSize = st?.isFile() === true ? st.size : 0;
    const { artifacts, nameBytes } = await incoming;
    const least = this.manifestSize + leastEntriesBytes(artifacts, nameBytes, this.fence);
    if (least > MAX_MANIFEST_BYTES) throw manifestTooBig(this.tag, file, least, MAX_MANIFEST_BYTES, artifacts);
  }

  /**
   * Counts a new artifact into what the manifest would take, before it is copied: one the sources
   * did not announce (an archive's entries) may still pass the limit, and then nothing more is copied.
   */
  count(name: string, e: IncomingEntry, artifacts: Manifest['artifacts']): void {
    if (e.type === 'directory' || name in artifacts || this.counted.has(name)) return;
    this.counted.add(name);
    const standIn: ManifestEntry = {
      name,
      type: e.type === 'symlink' ? 'symlink' : 'file',
      size: e.size ?? 0,
      sha256: '0'.repeat(64),
      source: e.source,
      stagedAt: new Date().toISOString(),
      fence: this.fence,
    };
    if (e.type === 'symlink') standIn.linkTarget = e.linkTarget ?? '';
    this.manifestSize += entryBytes(standIn);
    if (this.manifestSize > MAX_MANIFEST_BYTES) {
      throw manifestTooBig(this.tag, path.join(this.dir, MANIFEST_FILE), this.manifestSize, MAX_MANIFEST_BYTES, this.counted.size);
    }
  }
}
