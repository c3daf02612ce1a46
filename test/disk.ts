/**
 * A small ext4 filesystem on a loop image, which a test fills to the last block and frees again.
 * Needs root. ext4 rather than tmpfs: it needs new blocks to grow a directory, so that even a
 * rename or a link can fail with ENOSPC while it is full (see
 * /work/shared/notes/testing-real-conditions.md). By default every new directory and every record
 * with content needs a block of its own, so a full disk refuses them; with `inlineData`, entries
 * that fit in the inode cost no block (the fault checker's log of tens of thousands of small
 * files fits).
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { run } from './helpers';
import { isMounted } from './sshfs';

export interface DiskOptions {
  sizeMiB: number;
  /** Room for this many files (mkfs.ext4 -N); its default otherwise. */
  inodes?: number;
  /** Small files and directories kept in their inodes, costing no block. */
  inlineData?: boolean;
}

export class SmallDisk {
  private fillers = 0;
  /** The filler files in place now (the disk is full while there is one). */
  private filling: string[] = [];

  private constructor(
    readonly image: string,
    readonly dir: string,
  ) {}

  /** Makes an image at `image` and mounts it at `dir` (which must exist). */
  static async make(image: string, dir: string, options: DiskOptions): Promise<SmallDisk> {
    fs.closeSync(fs.openSync(image, 'w'));
    fs.truncateSync(image, options.sizeMiB * 1024 * 1024);
    const features = options.inlineData === true ? ['-O', 'inline_data', '-I', '256'] : [];
    const inodes = options.inodes !== undefined ? ['-N', String(options.inodes)] : [];
    const mkfs = await run('mkfs.ext4', ['-q', '-F', '-m', '0', ...features, ...inodes, image]);
    assert.equal(mkfs.code, 0, `mkfs.ext4: ${mkfs.stderr}`);
    const mount = await run('mount', ['-o', 'loop', image, dir]);
    assert.equal(mount.code, 0, `mount: ${mount.stderr}`);
    return new SmallDisk(image, dir);
  }

  /** A disk made in `base` (its image `disk.img`, mounted at `disk`). */
  static async inside(base: string, options: DiskOptions): Promise<SmallDisk> {
    const dir = path.join(base, 'disk');
    fs.mkdirSync(dir);
    return SmallDisk.make(path.join(base, 'disk.img'), dir, options);
  }

  /** Bytes that an unprivileged writer could still write. */
  freeBytes(): number {
    const s = fs.statfsSync(this.dir);
    return s.bavail * s.bsize;
  }

  get full(): boolean {
    return this.filling.length > 0;
  }

  private filler(): string {
    const p = path.join(this.dir, `filler.${this.fillers++}`);
    this.filling.push(p);
    return p;
  }

  /** All but a little of the free room taken with `fallocate` (no data is written). */
  private async allocateMost(): Promise<void> {
    const room = this.freeBytes() - 256 * 1024;
    if (room <= 0) return;
    const big = this.filler();
    const r = await run('fallocate', ['-l', String(room), big]);
    if (r.code !== 0) fs.rmSync(big, { force: true });
  }

  /**
   * Fills the disk: all but a little with `fallocate`, then the rest a block at a time until the
   * kernel says ENOSPC (or refuses otherwise, which is thrown). Returns whether ENOSPC was seen and what was left free.
   */
  async fill(): Promise<{ enospc: boolean; freeAfter: number }> {
    await this.allocateMost();
    let enospc = false;
    const fd = fs.openSync(this.filler(), 'w');
    try {
      // The filesystem's own block (small images have 1 KiB blocks): a larger write would leave its last blocks free.
      const block = Buffer.alloc(fs.statfsSync(this.dir).bsize, 0x5a);
      for (;;) fs.writeSync(fd, block);
    } catch (err) {
      enospc = (err as NodeJS.ErrnoException).code === 'ENOSPC';
      if (!enospc) throw err;
    } finally {
      fs.closeSync(fd);
    }
    return { enospc, freeAfter: this.freeBytes() };
  }

  /** Fills the disk with files of one block each, then gives back `blocks` of them: room for a small record, none for more. */
  async fillLeaving(blocks: number): Promise<void> {
    await this.allocateMost();
    const { bsize } = fs.statfsSync(this.dir);
    const made: string[] = [];
    for (;;) {
      const p = this.filler();
      try {
        fs.writeFileSync(p, Buffer.alloc(bsize), { flag: 'wx' });
        made.push(p);
      } catch (err) {
        assert.equal((err as NodeJS.ErrnoException).code, 'ENOSPC');
        fs.rmSync(p, { force: true });
        break;
      }
    }
    for (const p of made.slice(-blocks)) fs.rmSync(p);
  }

  /**
   * Takes the free room of `dir`'s own blocks with empty files of the shortest names (an entry of
   * 12 bytes), until a new name would need a block: what is left in each block is too little for
   * any name the tool uses. Returns how many it made.
   */
  fillEntries(dir: string): number {
    for (let n = 0; ; n++) {
      try {
        fs.closeSync(fs.openSync(path.join(dir, `~${n.toString(36)}`), 'wx'));
      } catch (err) {
        assert.equal((err as NodeJS.ErrnoException).code, 'ENOSPC', `filling ${dir}`);
        return n;
      }
    }
  }

  /** Frees what `fill` and `fillLeaving` took. */
  free(): void {
    for (const f of this.filling.splice(0)) fs.rmSync(f, { force: true });
  }

  /** Unmounts it, trying again a few times while the last processes using it let go. */
  async unmount(): Promise<boolean> {
    this.free();
    for (let i = 0; i < 20 && isMounted(this.dir); i++) {
      if ((await run('umount', [this.dir])).code !== 0) await new Promise((r) => setTimeout(r, 250));
    }
    return !isMounted(this.dir);
  }
}
