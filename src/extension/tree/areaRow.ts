/** What a folder's row and a build's row share: the area they stand for, and its record. */
import { LOCK_NAME, keyOf, type AreaRecord, type ListEntry } from '../../core';

/** `P`: what a row can be inside (a static directory or a folder), named by the rows themselves. */
export abstract class AreaRow<P> {
  abstract readonly kind: 'build' | 'folder';

  constructor(
    readonly parent: P,
    readonly staticDir: string,
    readonly tag: string,
    /** The model's record, which the model keeps current in place. */
    public record: AreaRecord,
  ) {}

  get id(): string {
    return keyOf(this.staticDir, this.tag);
  }

  get dir(): string {
    return `${this.staticDir}/${this.tag}`;
  }

  /** The last name of its tag: what the row is labelled. */
  get name(): string {
    return this.tag.slice(this.tag.lastIndexOf('/') + 1);
  }

  /** The last judgement of its lock (free where none was made yet). */
  get entry(): ListEntry {
    return this.record.lock ?? { name: this.name, kind: this.kind, staticDir: this.staticDir, tag: this.tag, dir: this.dir, lockPath: `${this.dir}/${LOCK_NAME}`, exists: true, state: 'free' };
  }
}
