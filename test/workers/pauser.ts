/**
 * One operation of the protocol in its own process, for the tests that stop a process at each of
 * its steps (DEVSERVER_STAGING_PAUSE_AT, see src/core/base/steps.ts) and let others act meanwhile.
 * argv[2]: JSON { staticDir, tag, op, staleMs, refreshMs, source? }, op one of:
 * - cycle: acquire (waiting up to a few seconds), make the critical section's marker
 *   `<staticDir>/inside` (mkdir: the kernel's O_EXCL), remove it, release;
 * - force-release: force-release the lock on the tag;
 * - destroy: destroy the area (force: false);
 * - stage-add: stage `source` into the existing area, replacing what is there.
 * Prints one JSON line: { ok: true, fence? } or { ok: false, code, message }.
 */
import * as fs from 'fs';
import * as path from 'path';
import { acquire } from '../../src/core/lock/lock';
import { destroy, forceRelease } from '../../src/core/remove';
import { stage } from '../../src/core/stage/stage';

interface Args {
  staticDir: string;
  tag: string;
  op: 'cycle' | 'force-release' | 'destroy' | 'stage-add';
  staleMs: number;
  refreshMs: number;
  source?: string;
}

async function main(): Promise<void> {
  const args = JSON.parse(process.argv[2] ?? '{}') as Args;
  const timing = { staleMs: args.staleMs, refreshMs: args.refreshMs };
  let out: Record<string, unknown> = { ok: true };
  try {
    if (args.op === 'cycle') {
      const lease = await acquire(args.staticDir, args.tag, { ...timing, createOnce: false, waitMs: 500 });
      const marker = path.join(args.staticDir, 'inside');
      let clash = false;
      try {
        fs.mkdirSync(marker);
      } catch {
        clash = true;
      }
      if (!clash) fs.rmdirSync(marker);
      out = { ok: true, fence: lease.fence, clash };
      await lease.release();
    } else if (args.op === 'force-release') {
      await forceRelease(args.staticDir, args.tag, timing);
    } else if (args.op === 'destroy') {
      await destroy(args.staticDir, args.tag, timing);
    } else {
      await stage(args.staticDir, args.tag, [args.source!], { ...timing, add: true, overwrite: true });
    }
  } catch (err) {
    const e = err as { code?: string; message?: string };
    out = { ...out, ok: false, code: e.code, message: e.message };
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

void main();
