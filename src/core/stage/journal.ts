/**
 * The undo journal of one staging call: everything it did to the area, so that a failure can put
 * the area back as it was, and a commit can let go of what it no longer needs.
 */
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { PART_PREFIX } from './types';

export class Journal {
  /** Temporary files of this call, removed at the end whatever happens. */
  private readonly parts = new Set<string>();
  /** Artifacts this call put where nothing was: removed on rollback. */
  private readonly placed: string[] = [];
  /** Originals this call replaced, renamed aside: put back on rollback, deleted on commit. */
  private readonly asides: { final: string; aside: string }[] = [];
  /** Directories this call made: removed on rollback (when empty). */
  private readonly madeDirs: string[] = [];

  constructor(private readonly dir: string) {}

  /** A fresh temporary path in the area, removed when the call ends unless it is placed. */
  newPart(kind = ''): string {
    const p = path.join(this.dir, `${PART_PREFIX}${kind}${crypto.randomBytes(8).toString('hex')}`);
    this.parts.add(p);
    return p;
  }

  madeDir(dir: string): void {
    this.madeDirs.push(dir);
  }

  /** A part not needed after all (its artifact was already there). */
  async drop(part: string): Promise<void> {
    await fs.promises.unlink(part).catch(() => undefined);
    this.parts.delete(part);
  }

  /** Puts `part` where nothing was. */
  async add(part: string, final: string): Promise<void> {
    await fs.promises.rename(part, final);
    this.parts.delete(part);
    this.placed.push(final);
  }

  /** Puts `part` in the place of `final`, which is renamed aside until commit or rollback. */
  async replace(part: string, final: string): Promise<void> {
    const aside = this.newPart('replaced.');
    await fs.promises.rename(final, aside);
    this.asides.push({ final, aside });
    this.parts.delete(aside); // kept until commit or rollback, not removed as a part
    await fs.promises.rename(part, final);
    this.parts.delete(part);
  }

  /** The call is kept: what was replaced and what is left of temporary files go. */
  async commit(): Promise<void> {
    for (const { aside } of this.asides) await fs.promises.rm(aside, { force: true, recursive: true }).catch(() => undefined);
    this.asides.length = 0;
    await this.removeParts();
  }

  /** Undoes everything this call did to the area. Never throws: it is on the failure path already. */
  async rollback(): Promise<void> {
    await this.removeParts();
    for (const final of this.placed.reverse()) await fs.promises.rm(final, { force: true }).catch(() => undefined);
    for (const { final, aside } of this.asides.reverse()) {
      await fs.promises.rm(final, { force: true }).catch(() => undefined);
      await fs.promises.rename(aside, final).catch(() => undefined);
    }
    for (const dir of this.madeDirs.reverse()) await fs.promises.rmdir(dir).catch(() => undefined);
  }

  private async removeParts(): Promise<void> {
    await Promise.all([...this.parts].map((p) => fs.promises.rm(p, { force: true, recursive: true }).catch(() => undefined)));
    this.parts.clear();
  }
}
