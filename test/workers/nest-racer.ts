/**
 * One of two processes taking nested areas (`b/n1` and `b/n1/sub`) over and over.
 * argv[2]: JSON { staticDir, tag, count, marker }. Sends { type: 'ready' }, waits for 'go', then
 * tries `count` times to take the lock (without waiting). Each time it holds it, it creates
 * `marker` with O_EXCL (EEXIST means the other is inside too), yields, and removes it.
 * Sends { type: 'done', entered, refused, overlaps, errors } and exits.
 */
import * as fs from 'fs';
import { acquire } from '../../src/core/lock/lock';
import { isStagingError } from '../../src/core/base/errors';

interface Args {
  staticDir: string;
  tag: string;
  count: number;
  marker: string;
}

const args = JSON.parse(process.argv[2] ?? '{}') as Args;

async function run(): Promise<void> {
  let entered = 0;
  let refused = 0;
  let overlaps = 0;
  const errors: string[] = [];
  for (let i = 0; i < args.count; i++) {
    let lease;
    try {
      lease = await acquire(args.staticDir, args.tag, { createOnce: false });
    } catch (err) {
      if (isStagingError(err, 'ELOCKED')) refused++;
      else errors.push(String(err));
      continue;
    }
    entered++;
    let fd: number | undefined;
    try {
      fd = fs.openSync(args.marker, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') overlaps++;
      else errors.push(String(err));
    }
    await new Promise((r) => setImmediate(r));
    if (fd !== undefined) {
      fs.closeSync(fd);
      fs.unlinkSync(args.marker);
    }
    await lease.release().catch((err: unknown) => errors.push(String(err)));
  }
  process.send?.({ type: 'done', entered, refused, overlaps, errors });
}

process.on('message', (m: { type?: string }) => {
  if (m.type === 'go') void run().then(() => process.disconnect());
});
process.send?.({ type: 'ready' });
