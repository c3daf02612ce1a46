/**
 * One staging call's change to the area, prepared in the holder's work directory and committed at
 * the end. Nothing reaches the area before the commit: artifacts are written into the work
 * directory (`devserver.lock/work.<token>/`, named through the lock), and the commit moves them
 * into place by renames recorded beforehand (see ../commit.ts). So:
 * - a failure or cancel before the commit leaves the area untouched (the work goes with the lock);
 * - a failure during the commit is undone by inode, and what was replaced comes back;
 * - a holder that loses its lock can change nothing any more: its work directory's name leads
 *   nowhere once the lock is moved away, and the next holder undoes a commit it left half done.
 *
 * A directory the area does not have is made in the work directory (`dir.<n>`), and what goes
 * into it is written there at its own name: the commit moves the whole directory into the area in
 * one rename. A new build of thousands of files in a few dozen directories commits in a handful
 * of renames. Only artifacts for directories the area has already are written as parts
 * (`part.<n>`) and moved one by one.
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
  /** Its path: in a new directory (`inTree`), or a part of its own. */
  part: string;
  /** Whether something is at its place in the area now, which the commit sets aside. */
  replaces: boolean;
  /** Written at its name inside a new directory: it moves with the directory. */
  inTree: boolean;
}

export class Journal {
  /** Artifacts to place, by name in the area. */
  private readonly pending = new Map<string, Pending>();
  /** Directories the artifacts need, by name in the area ('/'-separated). */
  private readonly dirs = new Set<string>();
  /** Directories the area lacks, made in the work directory: name in the area -> path below the work directory. */
  private readonly tree = new Map<string, string>();
  /** The topmost of them (their parent is in the area), each moved in by one rename at the commit. */
  private readonly roots = new Map<string, string>();
  /**
   * The group and other write bits of the work directory (the area's, see lock.ts): directories
   * made in it get them until the commit, so that whoever may remove this lock (a takeover after
   * this holder died) may remove what is inside too. Their own modes (the umask's) come back at
   * the commit: path below the work directory -> mode.
   */
  private readonly shareBits: number;
  private readonly ownModes = new Map<string, number>();
  /** Directories of the area the commit opened, by name in the area. */
  private readonly opened = new Map<string, Dir>();
  private serial = 0;
  /** Parts are named with it: a co-user cannot tell the names in advance. */
  private readonly prefix = crypto.randomBytes(6).toString('hex');

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
    this.shareBits = area.mode & 0o022;
  }

  private get sync(): boolean {
    return this.fs.sync;
  }

  /** A fresh path in the work directory for a part (or a download to unpack). */
  newPart(kind = ''): string {
    return `${this.workDir}/${kind}part.${this.prefix}.${this.serial++}`;
  }

  /** A directory the staged artifacts need: made at commit if the area does not have it. */
  needDir(rel: string): void {
    if (rel === '' || rel === '.') return;
    const segs = rel.split('/');
    for (let i = 1; i <= segs.length; i++) this.dirs.add(segs.slice(0, i).join('/'));
  }

  /**
   * The directory `rel`, which the area does not have, made now in the work directory (inside its
   * parent's, when that is new too). What goes into it is written there (`target`).
   */
  async makeDir(rel: string): Promise<void> {
    if (this.tree.has(rel)) return;
    const parent = path.posix.dirname(rel);
    const inParent = this.tree.get(parent);
    const at = inParent !== undefined ? `${inParent}/${path.posix.basename(rel)}` : `dir.${this.prefix}.${this.serial++}`;
    try {
      await this.fs.mkdir(`${this.workDir}/${at}`);
      if (this.shareBits !== 0) {
        const own = await this.chmodDir(`${this.workDir}/${at}`, (mode) => mode | this.shareBits);
        if ((own | this.shareBits) !== own) this.ownModes.set(at, own);
      }
    } catch (err) {
      throw asStagingError(err, `prepare ${rel} for`, this.shown);
    }
    this.tree.set(rel, at);
    if (inParent === undefined) this.roots.set(rel, at);
    this.needDir(rel);
  }

  /** Whether `rel` is a directory this call makes (nothing in it can be in the area yet). */
  inTree(rel: string): boolean {
    return this.tree.has(rel);
  }

  /**
   * Where to write the artifact `name`: at its own name in its new directory, the first time; else
   * (its directory is in the area, or an earlier entry of this call took the name) a fresh part.
   */
  target(name: string): string {
    const dir = this.tree.get(path.posix.dirname(name));
    if (dir === undefined || this.pending.has(name)) return this.newPart();
    return `${this.workDir}/${dir}/${path.posix.basename(name)}`;
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

  /**
   * `part` (from `target`) is to go to `name`; `replaces`: something is there now. A later part
   * for the same name wins: over an earlier one in a new directory, it takes that one's place now.
   */
  async place(name: string, part: string, replaces: boolean): Promise<void> {
    const earlier = this.pending.get(name);
    if (earlier?.inTree === true) {
      try {
        await this.fs.rename(part, earlier.part);
      } catch (err) {
        throw asStagingError(err, `prepare ${name} for`, this.shown);
      }
      return;
    }
    if (earlier !== undefined) await this.drop(earlier.part);
    const dir = this.tree.get(path.posix.dirname(name));
    const inTree = dir !== undefined && part === `${this.workDir}/${dir}/${path.posix.basename(name)}`;
    this.pending.set(name, { part, replaces: replaces || (earlier?.replaces ?? false), inTree });
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
    // Directories the area lacks, shallowest first: each new one moves in whole with all that was
    // written into it. One the area had when it was looked at, but lost since, is made anew.
    for (const rel of [...this.dirs].sort((a, b) => a.split('/').length - b.split('/').length || a.localeCompare(b))) {
      const root = this.roots.get(rel);
      if (root === undefined && this.tree.has(rel)) continue; // inside a new one: moves with it
      if (await this.exists(rel)) {
        if (root === undefined) continue;
        throw new StagingError('ECONFLICT', `Cannot place ${rel} in ${this.shown}: something of that name appeared there while this staging held the lock; look at what it is, then stage again.`, {
          path: path.join(this.shown, rel),
        });
      }
      let from = root;
      if (from === undefined) {
        from = `dir.${this.prefix}.${this.serial++}`;
        await this.fs.mkdir(`${this.workDir}/${from}`);
      }
      steps.push({ to: rel, from, ino: await inWork(from) });
    }
    for (const [name, p] of this.pending) {
      if (p.inTree) continue;
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
    // New directories get the modes the umask gave them back, now that nothing more goes into them.
    for (const [at, mode] of this.ownModes) await this.chmodDir(`${this.workDir}/${at}`, () => mode);
    this.ownModes.clear();
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

  /**
   * Changes the mode of the directory `p` (in the work directory) to `to(its mode)`, through a
   * descriptor opened without following a link; returns the mode it had.
   */
  private async chmodDir(p: string, to: (mode: number) => number): Promise<number> {
    const flags = fs.constants.O_RDONLY | fs.constants.O_DIRECTORY | fs.constants.O_NOFOLLOW;
    if (this.sync) {
      const fd = fs.openSync(p, flags);
      try {
        const mode = fs.fstatSync(fd).mode & 0o7777;
        if (to(mode) !== mode) fs.fchmodSync(fd, to(mode));
        return mode;
      } finally {
        fs.closeSync(fd);
      }
    }
    const fh = await fs.promises.open(p, flags);
    try {
      const mode = (await fh.stat()).mode & 0o7777;
      if (to(mode) !== mode) await fh.chmod(to(mode));
      return mode;
    } finally {
      await fh.close();
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
