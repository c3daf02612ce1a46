/**
 * A small ext4 filesystem of its own, on a loop-mounted image, for tests that fill a disk. Needs
 * root. Without `inline_data` (unlike the fault checker's, test/faults/disk.ts): every new directory
 * and every record with content needs a block of its own, so a full disk refuses them.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { run } from './helpers';

/** Makes an ext4 image of `size` (as `truncate -s` takes it) in `base`, mounts it, and returns where. */
export async function mountExt4(base: string, size: string): Promise<string> {
  const img = path.join(base, 'disk.img');
  const disk = path.join(base, 'disk');
  fs.mkdirSync(disk);
  for (const [cmd, args] of [
    ['truncate', ['-s', size, img]],
    ['mkfs.ext4', ['-q', '-m', '0', img]],
    ['mount', ['-o', 'loop', img, disk]],
  ] as const) {
    const r = await run(cmd, args);
    assert.equal(r.code, 0, `${cmd}: ${r.stderr}`);
  }
  return disk;
}
