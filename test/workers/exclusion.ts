/**
 * One of several processes taking the same lock over and over, on one machine or through
 * different clients of a network filesystem.
 * argv[2]: JSON { staticDir, tag, id, count, marker, order?, staleMs?, refreshMs?, holdMs?, race? }.
 * `race`: never wait in line; try again at once on ELOCKED, as callers that do not wait do.
 * Sends { type: 'ready' }, waits for 'go', then acquires (with `staleMs` and `refreshMs` where
 * given) and releases `count` times. Inside each critical section it creates `marker` with O_EXCL
 * (EEXIST means another process is inside too), checks that the lock's owner record is its own,
 * appends its id and fencing token to `order` where given (`<id> <token>`), stays inside `holdMs`
 * where given (else just yields), and removes the marker. Finally sends
 * { type: 'done', acquired, overlaps, foreign, lost, errors, ms, tokens } and exits.
 */
import * as fs from 'fs';
import * as path from 'path';
import { acquire } from '../../src/core/lock/lock';
import { LOCK_NAME, OWNER_FILE } from '../../src/core/base/protocol';

interface Args {
  staticDir: string;
  tag: string;
  id: number;
  count: number;
  marker: string;
  order?: string;
  staleMs?: number;
  refreshMs?: number;
  holdMs?: number;
  race?: boolean;
}

const args = JSON.parse(process.argv[2] ?? '{}') as Args;
const ownerPath = path.join(args.staticDir, args.tag, LOCK_NAME, OWNER_FILE);
// Only what was given: otherwise the core's defaults apply.
const timing = {
  ...(args.staleMs !== undefined ? { staleMs: args.staleMs } : {}),
  ...(args.refreshMs !== undefined ? { refreshMs: args.refreshMs } : {}),
};

const send = (m: unknown): void => {
  process.send?.(m);
};

async function run(): Promise<void> {
  const t0 = Date.now();
  let acquired = 0;
  let overlaps = 0;
  let foreign = 0;
  let lost = 0;
  const errors: string[] = [];
  const tokens: number[] = [];
  for (let i = 0; i < args.count; i++) {
    let lease;
    try {
      if (args.race === true) {
        for (;;) {
          try {
            lease = await acquire(args.staticDir, args.tag, { createOnce: false, ...timing });
            break;
          } catch (err) {
            if ((err as { code?: string }).code !== 'ELOCKED') throw err;
            await new Promise((r) => setImmediate(r));
          }
        }
      } else {
        lease = await acquire(args.staticDir, args.tag, { createOnce: false, waitMs: 120_000, ...timing });
      }
    } catch (err) {
      const e = err as { code?: string; message?: string };
      errors.push(`acquire ${i}: ${e.code}: ${e.message}`);
      continue;
    }
    lease.on('lost', () => lost++);
    acquired++;
    tokens.push(lease.fence);
    let fd: number | undefined;
    try {
      fd = fs.openSync(args.marker, 'wx');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') overlaps++;
      else errors.push(`marker ${i}: ${(err as Error).message}`);
    }
    try {
      const owner = JSON.parse(fs.readFileSync(ownerPath, 'utf8')) as { token?: string };
      if (owner.token !== lease.holder.token) foreign++;
    } catch {
      foreign++;
    }
    if (args.order !== undefined) fs.appendFileSync(args.order, `${args.id} ${lease.fence}\n`);
    if (fd !== undefined) fs.writeSync(fd, `${process.pid}\n`);
    if (args.holdMs !== undefined) {
      // Stay inside a little, so that the others' attempts meet a held lock.
      await new Promise((r) => setTimeout(r, args.holdMs));
    } else {
      // Give every other process a chance to run while we are inside.
      await new Promise((r) => setImmediate(r));
    }
    if (fd !== undefined) {
      fs.closeSync(fd);
      fs.unlinkSync(args.marker);
    }
    try {
      await lease.release();
    } catch (err) {
      const e = err as { code?: string; message?: string };
      errors.push(`release ${i}: ${e.code}: ${e.message}`);
    }
  }
  send({ type: 'done', id: args.id, acquired, overlaps, foreign, lost, errors, ms: Date.now() - t0, tokens });
  process.disconnect?.();
}

process.on('message', (m) => {
  if (m === 'go') void run();
});
send({ type: 'ready', id: args.id, pid: process.pid });
