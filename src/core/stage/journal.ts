/**
 * One staging call's change to the area, prepared in the holder's work directory and committed at
 * the end. Nothing reaches the area before the commit: artifacts are written into the work
 * directory (`devserver.lock/work.<token>/`, named through the lock), and the commit moves them
 * into place by renames recorded beforehand (see ../commit.ts). So:
 * - a failure or cancel before the commit leaves the area untouched (the work goes with the lock);
 * - a failure during the commit is undone by name, and what was replaced comes back; an undo that
 *   cannot finish (a full disk) keeps its record and all it set aside for the next holder
 *   (EUNFINISHED), who finishes it;
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
import { createRecord, openBelow, type Dir } from '../fs/anchored';
import { COMMIT_FILE, COMMIT_PART, commitText, keptWords, undoCommit, type CommitStep, type WorkPlace } from '../lock/commit';
import { StagingError, asStagingError, errnoCode } from '../base/errors';
import { LOCK_NAME } from '../base/protocol';
import { callsFor } from '../fs/calls';
import { asyncIo, type Io } from '../fs/io';
import { step } from '../base/steps';
import { MANIFEST_FILE, TIMESTAMP_FILE } from './types';
import { AreaPlaces } from './areaPlaces';
import { NewDirs, type TreeDir } from './newDirs';

/** Where an artifact is written: a part of its own, or its place in a new directory. */
export interface Target {
  /** Its path: valid until `done()` (it may name its directory by a descriptor). */
  readonly path: string;
  /** The artifact is written (or given up): its directory may be closed. */
  done(): void;
}

/** A target as the journal hands it out: where it is, for `place`. */
interface Held extends Target {
  part?: string;
  tree?: { dir: TreeDir; base: string };
}

/** An artifact waiting in the work directory for the commit. */
interface Pending {
  /** A part: its name in the work directory, moved into place at the commit. */
  part?: string;
  /** Its inode, where known: the commit moves it only if it is still that file. */
  ino?: number;
  /** Or written at its name in a new directory: it moves with the directory. */
  tree?: { dir: TreeDir; base: string };
  /** Whether something is at its place in the area now, which the commit sets aside. */
  replaces: boolean;
}

/** A step as the commit plans it: what it moves must still be the entry this staging wrote (this client's inode, never written down). */
interface PlannedStep extends CommitStep {
  ino: number;
}

export class Journal {
  /** Artifacts to place, by name in the area. */
  private readonly pending = new Map<string, Pending>();
  /** Directories the artifacts need, by name in the area ('/'-separated). */
  private readonly dirs = new Set<string>();
  /** Directories the area lacks, made in the work directory, by name in the area. */
  private readonly tree = new Map<string, TreeDir>();
  /** Their descriptors (newDirs.ts). */
  private readonly newDirs: NewDirs;
  /**
   * The group and other write bits of the work directory (the area's, see lock/attempt.ts): directories
   * made in it get them until the commit, so that whoever may remove this lock (a takeover after
   * this holder died) may remove what is inside too. Their own modes come back at the commit.
   */
  private readonly shareBits: number;
  /** The area's directories the commit opened (areaPlaces.ts). */
  private readonly places: AreaPlaces;
  /**
   * The work directory, opened once through the lock without following links: everything is
   * written into it (and into the directories made in it) through descriptors, so nothing renamed
   * or linked in the lock meanwhile can send a write elsewhere. The commit's renames still name it
   * through the lock: once the lock is moved away they fail (the fence).
   */
  private work: Dir | undefined;
  private serial = 0;
  /** Parts and new directories are named with it: a co-user cannot tell the names in advance. */
  private readonly prefix = crypto.randomBytes(6).toString('hex');
  /** The area's filesystem calls: synchronous on local filesystems, where a commit of thousands of renames would otherwise wait on the thread pool for each (io.ts). */
  private readonly fs: Io;

  /**
   * @param area the area, opened (anchored/dir.ts): places in it are reached without following links
   * @param workDir the holder's work directory, named through the lock (the fence)
   * @param shown the area's path, for messages
   */
  constructor(
    private readonly area: Dir,
    private readonly workDir: string,
    private readonly shown: string,
    io: Io = asyncIo,
  ) {
    this.fs = io;
    this.shareBits = area.mode & 0o022;
    this.newDirs = new NewDirs(() => this.workOpen(), shown, io.sync);
    this.places = new AreaPlaces(area, io);
  }

  private get sync(): boolean {
    return this.fs.sync;
  }

  /** Opens the work directory (see `work`). */
  async begin(): Promise<void> {
    if (this.work !== undefined) return;
    try {
      const lock = await openBelow(this.area, LOCK_NAME, this.sync);
      try {
        this.work = await openBelow(lock, path.posix.basename(this.workDir), this.sync);
      } finally {
        lock.close();
      }
    } catch (err) {
      throw await this.lostOr(err, 'open the work directory of');
    }
  }

  /** The work directory's identity, named through the lock: what a copying worker checks before each file (copyWorker.ts). */
  get fence(): { path: string; ino: number } {
    return { path: this.workDir, ino: this.workOpen().ino };
  }

  /** ECOMPROMISED unless the lock still holds this work directory (the check before a write; the fence is the commit's renames). */
  async checkFence(): Promise<void> {
    const st = await this.fs.lstatOrNull(this.workDir).catch(() => null);
    if (st === null || st.ino !== this.workOpen().ino) throw this.lost();
  }

  private workOpen(): Dir {
    if (this.work === undefined) throw new StagingError('EIO', `Internal error: the work directory of ${this.shown} is not open.`);
    return this.work;
  }

  private lost(cause?: unknown): StagingError {
    return new StagingError('ECOMPROMISED', `Lost the lock on ${this.shown} while staging; nothing of this staging was kept.`, { path: this.shown, cause });
  }

  /** ECOMPROMISED for a failure because the lock is gone, else the failure. */
  private async lostOr(err: unknown, doing: string): Promise<StagingError> {
    if (errnoCode(err) === 'ENOENT' && !(await this.workDirExists())) return this.lost(err);
    return asStagingError(err, doing, this.shown);
  }

  /** A fresh path in the work directory for a part (or a download to unpack). */
  newPart(kind = ''): string {
    return this.workOpen().at(this.newPartName(kind));
  }

  private newPartName(kind = ''): string {
    return `${kind}part.${this.prefix}.${this.serial++}`;
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
    const parent = this.tree.get(path.posix.dirname(rel));
    const base = parent === undefined ? `dir.${this.prefix}.${this.serial++}` : path.posix.basename(rel);
    const into = parent === undefined ? this.workOpen() : await this.newDirs.use(parent);
    try {
      await this.fs.mkdir(into.at(base));
      const dir = await openBelow(into, base, this.sync);
      const t: TreeDir = { rel, at: parent === undefined ? base : `${parent.at}/${base}`, base, parent, ino: dir.ino, dir, users: 0 };
      const own = dir.mode & 0o7777;
      if ((own | this.shareBits) !== own) {
        t.ownMode = own;
        await this.chmod(dir, own | this.shareBits);
      }
      this.tree.set(rel, t);
      this.newDirs.unuse(t, false);
    } catch (err) {
      throw await this.lostOr(err, `prepare ${rel} for`);
    } finally {
      if (parent !== undefined) this.newDirs.unuse(parent);
    }
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
  async target(name: string): Promise<Target> {
    const t = this.tree.get(path.posix.dirname(name));
    if (t === undefined || this.pending.has(name)) {
      const part = this.newPartName();
      const held: Held = { path: this.workOpen().at(part), done: () => undefined, part };
      return held;
    }
    const base = path.posix.basename(name);
    const dir = await this.newDirs.use(t);
    let done = false;
    const held: Held = {
      path: dir.at(base),
      done: () => {
        if (!done) this.newDirs.unuse(t);
        done = true;
      },
      tree: { dir: t, base },
    };
    return held;
  }

  /** Whether an artifact of that name is waiting to be placed (an earlier entry of this call). */
  has(name: string): boolean {
    return this.pending.has(name);
  }

  /** Where the artifact waiting to be placed as `name` is, if any (to copy it again). */
  async partOf(name: string): Promise<Target | undefined> {
    const p = this.pending.get(name);
    if (p === undefined) return undefined;
    if (p.part !== undefined) return { path: this.workOpen().at(p.part), done: () => undefined };
    const t = p.tree!.dir;
    const dir = await this.newDirs.use(t);
    let done = false;
    return {
      path: dir.at(p.tree!.base),
      done: () => {
        if (!done) this.newDirs.unuse(t);
        done = true;
      },
    };
  }

  isDir(name: string): boolean {
    return this.dirs.has(name);
  }

  /** A part not needed after all (its artifact was already there). */
  async drop(target: Target): Promise<void> {
    await fs.promises.unlink(target.path).catch(() => undefined);
  }

  /**
   * `target` (from `target`, still held) is to go to `name`; `replaces`: something is there now.
   * A later one for the same name wins: over an earlier one in a new directory, it takes that
   * one's place now.
   */
  async place(name: string, target: Target, replaces: boolean, ino?: number): Promise<void> {
    const { part, tree } = target as Held;
    const earlier = this.pending.get(name);
    if (earlier?.tree !== undefined) {
      const over = await this.partOf(name);
      try {
        await this.fs.rename(target.path, over!.path);
      } catch (err) {
        throw await this.lostOr(err, `prepare ${name} for`);
      } finally {
        over!.done();
      }
      return;
    }
    if (earlier?.part !== undefined) await fs.promises.unlink(this.workOpen().at(earlier.part)).catch(() => undefined);
    const next: Pending = { replaces: replaces || (earlier?.replaces ?? false) };
    if (tree !== undefined) next.tree = tree;
    else next.part = part!;
    if (ino !== undefined) next.ino = ino;
    this.pending.set(name, next);
  }

  private async chmod(dir: Dir, mode: number): Promise<void> {
    await callsFor(this.sync).fchmod(dir.fd, mode);
  }

  /** Lets go of every descriptor: after the commit or the rollback, once nothing writes any more. */
  close(): void {
    for (const t of this.tree.values()) {
      t.dir?.close();
      t.dir = undefined;
    }
    this.newDirs.clear();
    this.work?.close();
    this.work = undefined;
  }

  /**
   * Moves everything into the area: directories first (shallowest first), then artifacts, then
   * `manifestText` as the manifest and a fresh `staged.timestamp` holding `token` (the lock's fencing
   * token: the area's record of the last one handed out, see fence.ts). `check` runs once everything
   * is in place and before the commit point; if it throws, the commit is undone.
   */
  async commit(manifestText: string | Buffer, check: () => Promise<void>, token = 0): Promise<void> {
    try {
      await this.commitSteps(manifestText, check, token);
    } catch (err) {
      throw err instanceof StagingError ? err : await this.lostOr(err, 'commit to');
    } finally {
      this.places.close();
    }
  }

  private async commitSteps(manifestText: string | Buffer, check: () => Promise<void>, token: number): Promise<void> {
    const steps: PlannedStep[] = [];
    const inWork = async (from: string): Promise<number> => (await this.fs.lstat(`${this.workDir}/${from}`)).ino;
    const aside = (): string => `aside.${this.serial++}`;
    // Directories the area lacks, shallowest first: each new one moves in whole with all that was
    // written into it. One the area had when it was looked at, but lost since, is made anew.
    for (const rel of [...this.dirs].sort((a, b) => a.split('/').length - b.split('/').length || a.localeCompare(b))) {
      const t = this.tree.get(rel);
      if (t?.parent !== undefined) continue; // inside a new one: moves with it
      if (await this.places.exists(rel)) {
        if (t === undefined) continue;
        throw new StagingError('ECONFLICT', `Cannot place ${rel} in ${this.shown}: something of that name appeared there while this staging held the lock; look at what it is, then stage again.`, {
          path: path.join(this.shown, rel),
        });
      }
      if (t !== undefined) {
        // Moved by its name through the lock: it must still be the directory that was written into.
        if ((await inWork(t.at)) !== t.ino) throw this.replacedInWork(rel);
        steps.push({ to: rel, from: t.at, ino: t.ino });
        continue;
      }
      const from = `dir.${this.prefix}.${this.serial++}`;
      await this.fs.mkdir(`${this.workDir}/${from}`);
      steps.push({ to: rel, from, ino: await inWork(from) });
    }
    for (const [name, p] of this.pending) {
      if (p.part === undefined) continue;
      const from = p.part;
      const planned: PlannedStep = { to: name, from, ino: await inWork(from) };
      if (p.ino !== undefined && planned.ino !== p.ino) throw this.replacedInWork(name);
      if (p.replaces && (await this.places.exists(name))) planned.aside = aside();
      steps.push(planned);
    }
    for (const [to, data] of [
      [MANIFEST_FILE, manifestText],
      [TIMESTAMP_FILE, token > 0 ? `${token}\n` : ''],
    ] as const) {
      const from = `${to}.new`;
      await createRecord(this.workOpen().at(from), data, 0o644);
      const planned: PlannedStep = { to, from, ino: await inWork(from) };
      if (planned.ino !== (await this.fs.lstat(this.workOpen().at(from))).ino) throw this.replacedInWork(to);
      if (await this.places.exists(to)) planned.aside = aside();
      steps.push(planned);
    }
    // New directories get the modes the umask gave them back, now that nothing more goes into them.
    for (const t of this.tree.values()) {
      if (t.ownMode === undefined) continue;
      const dir = await this.newDirs.use(t);
      try {
        await this.chmod(dir, t.ownMode);
      } finally {
        this.newDirs.unuse(t);
      }
    }
    // Written down before the first rename: whoever finds it undoes what was done of it. Written
    // under another name and renamed, so that a record at its name is always whole.
    await createRecord(this.workOpen().at(COMMIT_PART), commitText(steps), 0o644);
    await this.fs.rename(`${this.workDir}/${COMMIT_PART}`, `${this.workDir}/${COMMIT_FILE}`);
    step('commit.recorded');
    try {
      for (const planned of steps) await this.run(planned);
      await check();
      step('commit.checked');
      // The commit point: from here on the change stands. It fails if the lock was taken away.
      await fs.promises.unlink(`${this.workDir}/${COMMIT_FILE}`);
      step('commit.committed');
    } catch (err) {
      // Every step, whether it ran or not: by name, one that did not run has nothing to undo.
      const undone = await undoCommit(this.area, this.workPlace(), steps);
      if (undone.complete) {
        await fs.promises.unlink(`${this.workDir}/${COMMIT_FILE}`).catch(() => undefined);
        step('commit.undo.cleared');
      }
      // A step's failure comes named (EIO, "Could not place …"): what the filesystem said is its cause.
      if (!(await this.workDirExists())) {
        throw new StagingError('ECOMPROMISED', `Lost the lock on ${this.shown} while committing; nothing of this staging was kept.`, { path: this.shown, cause: err });
      }
      if (!undone.complete) {
        // Its record and all it set aside stay in the work directory: the release keeps that for the next holder (lockfs.ts).
        const why = err instanceof Error ? err.message.replace(/\.$/, '') : String(err);
        throw new StagingError('EUNFINISHED', `Staging into ${this.shown} failed (${why}) and could not be undone yet: ${undone.reason}. ${keptWords(this.workPlace().shown, true)}`, {
          path: this.shown,
          cause: undone.error.cause ?? err,
        });
      }
      throw err;
    }
    this.pending.clear();
  }

  /** The work directory as the undo reaches it: named through the lock, so once the lock is taken away it changes nothing. */
  private workPlace(): WorkPlace {
    return { at: (name) => `${this.workDir}/${name}`, shown: path.join(this.shown, LOCK_NAME, path.posix.basename(this.workDir)) };
  }

  /**
   * What the commit would move by its name through the lock is not what this staging wrote
   * through the work directory's descriptor: something was renamed or linked in the lock.
   */
  private replacedInWork(name: string): StagingError {
    return new StagingError(
      'EUNSAFE',
      `Cannot place ${name} in ${this.shown}: what the lock's work directory holds under its name is not what this staging wrote there (something was renamed or linked inside the lock); nothing of this staging was kept.`,
      { path: path.join(this.shown, name) },
    );
  }

  private async run(planned: PlannedStep): Promise<void> {
    const where = await this.places.parentOf(planned.to);
    if (where === undefined) {
      throw new StagingError('EUNSAFE', `Cannot place ${planned.to} in ${this.shown}: a directory on its way is missing or is a symbolic link.`, {
        path: path.join(this.shown, planned.to),
      });
    }
    const { dir, name } = where;
    try {
      if (planned.aside !== undefined) {
        step('commit.aside');
        await this.fs.rename(dir.at(name), `${this.workDir}/${planned.aside}`);
        step('commit.asideDone');
      }
      step('commit.place');
      await this.fs.rename(`${this.workDir}/${planned.from}`, dir.at(name));
      step('commit.placed');
    } catch (err) {
      throw asStagingError(err, `place ${planned.to} in`, this.shown);
    }
    // Renamed by name: something exchanged for it in the lock since it was checked would be in the
    // area now. Then it goes back out where it came from (so the undo, by name, sees this step as
    // not done), and the commit is undone.
    const placed = await this.fs.lstatOrNull(dir.at(name)).catch(() => null);
    if (placed !== null && placed.ino !== planned.ino) {
      await this.fs.rename(dir.at(name), `${this.workDir}/${planned.from}`).catch(() => undefined);
      throw this.replacedInWork(planned.to);
    }
  }

  private async workDirExists(): Promise<boolean> {
    return fs.promises.lstat(this.workDir).then(
      () => true,
      () => false,
    );
  }
}
