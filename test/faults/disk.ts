/**
 * A small ext4 filesystem on a loop image, which a test fills to the last block and frees again.
 * ext4 rather than tmpfs: it needs new blocks to grow a directory, so that even a rename or a link
 * can fail with ENOSPC while it is full (see /work/shared/notes/testing-real-conditions.md).
 * Entries that fit in the inode (`inline_data`) cost no block, so the fault checker's log of tens
 * of thousands of small files fits.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { run } from '../helpers';
import { isMounted } from '../sshfs';

export class SmallDisk {
  private fillers = 0;
  /** The filler files in place now (the disk is full while there is one). */
  private filling: string[] = [];

  private constructor(
    readonly image: string,
    readonly dir: string,
  ) {}

  /** Makes an image of `sizeMiB` with room for `inodes` files, and mounts it at `dir` (which must exist). */
  static async make(image: string, dir: string, sizeMiB: number, inodes: number): Promise<SmallDisk> {
    fs.closeSync(fs.openSync(image, 'w'));
    fs.truncateSync(image, sizeMiB * 1024 * 1024);
    const mkfs = await run('mkfs.ext4', ['-q', '-F', '-m', '0', '-O', 'inline_data', '-I', '256', '-N', String(inodes), image]);
    assert.equal(mkfs.code, 0, `mkfs.ext4: ${mkfs.stderr}`);
    const mount = await run('mount', ['-o', 'loop', image, dir]);
    assert.equal(mount.code, 0, `mount: ${mount.stderr}`);
    return new SmallDisk(image, dir);
  }

  /** Bytes that an unprivileged writer could still write. */
  freeBytes(): number {
    const s = fs.statfsSync(this.dir);
    return s.bavail * s.bsize;
  }

  get full(): boolean {
    return this.filling.length > 0;
  }

  /**
   * Fills the disk: all but a little with `fallocate` (no data is written), then the rest a block
   * at a time until the kernel says ENOSPC. Returns whether ENOSPC was seen and what was left free.
   */
  async fill(): Promise<{ enospc: boolean; freeAfter: number }> {
    const big = path.join(this.dir, `filler.${this.fillers++}`);
    this.filling.push(big);
    const room = this.freeBytes() - 256 * 1024;
    if (room > 0) {
      const r = await run('fallocate', ['-l', String(room), big]);
      if (r.code !== 0) fs.rmSync(big, { force: true });
    }
    const rest = path.join(this.dir, `filler.${this.fillers++}`);
    this.filling.push(rest);
    let enospc = false;
    const fd = fs.openSync(rest, 'w');
    try {
      const block = Buffer.alloc(4096, 0x5a);
      for (let i = 0; i < 100_000; i++) fs.writeSync(fd, block);
    } catch (err) {
      enospc = (err as NodeJS.ErrnoException).code === 'ENOSPC';
      if (!enospc) throw err;
    } finally {
      fs.closeSync(fd);
    }
    return { enospc, freeAfter: this.freeBytes() };
  }

  /** Frees what `fill` took. */
  free(): void {
    for (const f of this.filling.splice(0)) fs.rmSync(f, { force: true });
  }

  /** Unmounts it, trying again a few times while the file server's last processes let go of it. */
  async unmount(): Promise<boolean> {
    this.free();
    for (let i = 0; i < 20 && isMounted(this.dir); i++) {
      if ((await run('umount', [this.dir])).code !== 0) await new Promise((r) => setTimeout(r, 250));
    }
    return !isMounted(this.dir);
  }
}
