/**
 * One staging call's change to the area, prepared in the holder's work directory and committed at
 * the end. Nothing reaches the area before the commit: artifacts are written as parts in the work
 * directory (`devserver.lock/work.<token>/`, named through the lock), and the commit moves each one
 * into place by a rename recorded beforehand (see ../commit.ts). So:
 * - a failure or cancel before the commit leaves the area untouched (the parts go with the lock);
 * - a failure during the commit is undone by inode, and what was replaced comes back;
 * - a holder that loses its lock can change nothing any more: its work directory's name leads
 *   nowhere once the lock is moved away, and the next holder undoes a commit it left half done.
 */
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { createRecord, openBelow, type Dir } from '../anchored';
import { COMMIT_FILE, undoCommit, type CommitStep } from '../commit';
import { StagingError, asStagingError, errnoCode } from '../errors';
import { asyncIo, type Io } from '../io';
import { MANIFEST_FILE, TIMESTAMP_FILE } from './types';

/** An artifact waiting in the work directory for the commit. */
interface Pending {
  part: string;
  /** Whether something is at its place in the area now, which the commit sets aside. */
  replaces: boolean;
}

export class Journal {
  /** Artifacts to place, by name in the area. */
  private readonly pending = new Map<string, Pending>();
  /** Directories the artifacts need, by name in the area ('/'-separated). */
  private readonly dirs = new Set<string>();
  /** Directories of the area the commit opened, by name in the area. */
  private readonly opened = new Map<string, Dir>();
  private serial = 0;

  /**
   * @param area the area, opened (anchored.ts): places in it are reached without following links
   * @param workDir the holder's work directory, named through the lock (the fence)
   * @param shown the area's path, for messages
   */
  /** The area's filesystem calls: synchronous on local filesystems, where a commit of thousands of renames would otherwise wait on the thread pool for each (io.ts). */
  private readonly fs: Io;

  constructor(
    private readonly area: Dir,
    private readonly workDir: string,
    private readonly shown: string,
    io: Io = asyncIo,
  ) {
    this.fs = io;
  }

  private get sync(): boolean {
    return this.fs.sync;
  }

  /** A fresh path in the work directory for a part (or a download to unpack). */
  newPart(kind = ''): string {
    return `${this.workDir}/${kind}part.${crypto.randomBytes(8).toString('hex')}`;
  }

  /** A directory the staged artifacts need: made at commit if the area does not have it. */
  needDir(rel: string): void {
    if (rel === '' || rel === '.') return;
    const segs = rel.split('/');
    for (let i = 1; i <= segs.length; i++) this.dirs.add(segs.slice(0, i).join('/'));
  }

  /** Whether an artifact of that name is waiting to be placed (an earlier entry of this call). */
  has(name: string): boolean {
    return this.pending.has(name);
  }

  /** The part waiting to be placed as `name`, if any. */
  partOf(name: string): string | undefined {
    return this.pending.get(name)?.part;
  }

  isDir(name: string): boolean {
    return this.dirs.has(name);
  }

  /** A part not needed after all (its artifact was already there). */
  async drop(part: string): Promise<void> {
    await fs.promises.unlink(part).catch(() => undefined);
  }

  /** `part` is to go to `name`; `replaces`: something is there now. A later part for the same name wins. */
  async place(name: string, part: string, replaces: boolean): Promise<void> {
    const earlier = this.pending.get(name);
    if (earlier !== undefined) await this.drop(earlier.part);
    this.pending.set(name, { part, replaces: replaces || (earlier?.replaces ?? false) });
  }

  /**
   * Moves everything into the area: directories first (shallowest first), then artifacts, then
   * `manifestText` as the manifest and a fresh `staged.timestamp`. `check` runs once everything is in
   * place and before the commit point; if it throws, the commit is undone.
   */
  async commit(manifestText: string, check: () => Promise<void>): Promise<void> {
    try {
      await this.commitSteps(manifestText, check);
    } finally {
      this.closeOpened();
    }
  }

  private async commitSteps(manifestText: string, check: () => Promise<void>): Promise<void> {
    const steps: CommitStep[] = [];
    const inWork = async (from: string): Promise<number> => (await this.fs.lstat(`${this.workDir}/${from}`)).ino;
    const aside = (): string => `aside.${this.serial++}`;
    // Directories the area lacks: made in the work directory, moved in whole.
    for (const rel of [...this.dirs].sort((a, b) => a.split('/').length - b.split('/').length || a.localeCompare(b))) {
      if (await this.exists(rel)) continue;
      const from = `dir.${this.serial++}`;
      await this.fs.mkdir(`${this.workDir}/${from}`);
      steps.push({ to: rel, from, ino: await inWork(from) });
    }
    for (const [name, p] of this.pending) {
      const from = path.posix.basename(p.part);
      const step: CommitStep = { to: name, from, ino: await inWork(from) };
      if (p.replaces && (await this.exists(name))) step.aside = aside();
      steps.push(step);
    }
    for (const [to, data] of [
      [MANIFEST_FILE, manifestText],
      [TIMESTAMP_FILE, ''],
    ] as const) {
      const from = `${to}.new`;
      await createRecord(`${this.workDir}/${from}`, data, 0o644);
      const step: CommitStep = { to, from, ino: await inWork(from) };
      if (await this.exists(to)) step.aside = aside();
      steps.push(step);
    }
    // Written down before the first rename: whoever finds it undoes what was done of it.
    await createRecord(`${this.workDir}/${COMMIT_FILE}`, `${JSON.stringify({ version: 1, steps })}\n`, 0o644);
    let done = 0;
    try {
      for (const step of steps) {
        await this.run(step);
        done++;
      }
      await check();
      // The commit point: from here on the change stands. It fails if the lock was taken away.
      await fs.promises.unlink(`${this.workDir}/${COMMIT_FILE}`);
    } catch (err) {
      await undoCommit(this.area, this.workDir, steps.slice(0, done + 1));
      await fs.promises.unlink(`${this.workDir}/${COMMIT_FILE}`).catch(() => undefined);
      if (errnoCode(err) === 'ENOENT' && !(await this.workDirExists())) {
        throw new StagingError('ECOMPROMISED', `Lost the lock on ${this.shown} while committing; nothing of this staging was kept.`, { path: this.shown, cause: err });
      }
      throw err;
    }
    this.pending.clear();
  }

  private async run(step: CommitStep): Promise<void> {
    const where = await this.parentOf(step.to);
    if (where === undefined) {
      throw new StagingError('EUNSAFE', `Cannot place ${step.to} in ${this.shown}: a directory on its way is missing or is a symbolic link.`, {
        path: path.join(this.shown, step.to),
      });
    }
    const { dir, name } = where;
    try {
      if (step.aside !== undefined) await this.fs.rename(dir.at(name), `${this.workDir}/${step.aside}`);
      await this.fs.rename(`${this.workDir}/${step.from}`, dir.at(name));
    } catch (err) {
      throw asStagingError(err, `place ${step.to} in`, this.shown);
    }
  }

  private async exists(rel: string): Promise<boolean> {
    const where = await this.parentOf(rel);
    if (where === undefined) return false;
    return (await this.fs.lstat(where.dir.at(where.name)).catch(() => null)) !== null;
  }

  /**
   * The opened directory holding `rel` in the area, each level opened once per commit without
   * following links (a build of thousands of files has a few dozen directories); undefined when
   * a level is missing or not a directory.
   */
  private async parentOf(rel: string): Promise<{ dir: Dir; name: string } | undefined> {
    const segs = rel.split('/');
    const name = segs.pop()!;
    if (name === '' || name === '.' || name === '..') return undefined;
    let dir = this.area;
    let key = '';
    for (const seg of segs) {
      if (seg === '' || seg === '.' || seg === '..') return undefined;
      key = key === '' ? seg : `${key}/${seg}`;
      let next = this.opened.get(key);
      if (next === undefined) {
        try {
          next = await openBelow(dir, seg, this.sync);
        } catch {
          return undefined;
        }
        this.opened.set(key, next);
      }
      dir = next;
    }
    return { dir, name };
  }

  /** Lets go of the directories the commit opened. */
  private closeOpened(): void {
    for (const d of this.opened.values()) d.close();
    this.opened.clear();
  }

  private async workDirExists(): Promise<boolean> {
    return fs.promises.lstat(this.workDir).then(
      () => true,
      () => false,
    );
  }
}
