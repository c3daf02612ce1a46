/**
 * One stage() call that kills itself (SIGKILL) right after the `after`-th rename of its commit:
 * a commit cut off part-way, with whole directories, files and set-asides among what it moved.
 * Renames in or out of the holder's work directory are the commit's, but for the token's and the
 * release's; each one made is printed on stderr before the next.
 *   node stage-dies.js '{ "staticDir", "tag", "sources", "options"?, "after" }'
 * With more renames allowed than the commit makes, it finishes and prints `renames N` on stdout.
 */
import { stage } from '../../src/core/stage/stage';
import type { StageOptions } from '../../src/core/stage/types';

interface Args {
  staticDir: string;
  tag: string;
  sources: string[];
  options?: StageOptions;
  after: number;
}

// The module object itself (not an import's copy of it): the core reaches renameSync through it.
const fsm = require('fs') as typeof import('fs');

async function main(): Promise<void> {
  const { staticDir, tag, sources, options, after } = JSON.parse(process.argv[2] ?? '{}') as Args;
  let renames = 0;
  const renameSync = fsm.renameSync;
  const rename = fsm.promises.rename;
  const counted = (from: string, to: string): void => {
    const both = `${from} ${to}`;
    // The fencing token's renames (the counter in and out of the work directory) and the release's
    // (the record into it, the work directory out of the lock) are not the commit's.
    if (!both.includes('/work.') || both.includes('.devserver-staging.fence') || both.includes('/owner.json') || to.includes('devserver.lock.trash.')) return;
    renames++;
    process.stderr.write(`rename ${renames}: ${from} -> ${to}\n`);
    if (renames >= after) process.kill(process.pid, 'SIGKILL');
  };
  fsm.renameSync = (from, to) => {
    renameSync(from, to);
    counted(String(from), String(to));
  };
  fsm.promises.rename = async (from, to) => {
    await rename(from, to);
    counted(String(from), String(to));
  };
  await stage(staticDir, tag, sources, options ?? {});
  console.log(`renames ${renames}`);
}

void main();
