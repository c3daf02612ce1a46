/**
 * Takes the lock of `<staticDir>/<tag>`, then does what a staging's commit does, by hand, and is
 * killed half-way: it writes the commit record for two steps (a new artifact, and a replacement
 * of `keep.txt`), makes the first step and the set-aside of the second, and kills itself with
 * SIGKILL. The next holder must find the area as it was.
 *   node dies-mid-commit.js STATIC_DIR TAG
 */
import * as fs from 'fs';
import { acquire } from '../../src/core/lock/lock';
import { COMMIT_FILE } from '../../src/core/lock/commit';

async function main(): Promise<void> {
  const [staticDir, tag] = process.argv.slice(2) as [string, string];
  const lease = await acquire(staticDir, tag, { createOnce: false });
  const w = lease.workDir;
  fs.writeFileSync(`${w}/part.new`, 'new artifact\n');
  fs.writeFileSync(`${w}/part.keep`, 'replacement of keep.txt\n');
  const steps = [
    { to: 'new.txt', from: 'part.new', ino: fs.lstatSync(`${w}/part.new`).ino },
    { to: 'keep.txt', from: 'part.keep', ino: fs.lstatSync(`${w}/part.keep`).ino, aside: 'aside.0' },
  ];
  fs.writeFileSync(`${w}/${COMMIT_FILE}`, JSON.stringify({ version: 1, steps }));
  fs.renameSync(`${w}/part.new`, lease.area.at('new.txt'));
  fs.renameSync(lease.area.at('keep.txt'), `${w}/aside.0`);
  process.kill(process.pid, 'SIGKILL');
}

void main();
