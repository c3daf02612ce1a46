/**
 * A judge in its own process, so that its clock can be skewed (libfaketime), steered over IPC.
 * argv[2]: JSON { staticDir, tag, staleMs, refreshMs }.
 * 'judge' → { type: 'judged', state, heartbeatAgeMs, naiveAgeMs, skewMs, nowMs }, where
 * naiveAgeMs is what a judge without clock correction would compute: its own Date.now() minus
 * the lock directory's mtime.
 */
import * as fs from 'fs';
import * as path from 'path';
import { fsClockSkew } from '../../src/core/fs/clock';
import { inspect } from '../../src/core/lock/inspect';
import { LOCK_NAME } from '../../src/core/base/protocol';
import { resolveStaticDir } from '../../src/core/fs/tags';

interface Args {
  staticDir: string;
  tag: string;
  staleMs: number;
  refreshMs: number;
}

const args = JSON.parse(process.argv[2] ?? '{}') as Args;
const lockPath = path.join(args.staticDir, args.tag, LOCK_NAME);

const send = (m: unknown): void => {
  process.send?.(m);
};

async function judge(): Promise<void> {
  try {
    const info = await inspect(args.staticDir, args.tag, { staleMs: args.staleMs, refreshMs: args.refreshMs });
    const mtimeMs = fs.lstatSync(lockPath, { throwIfNoEntry: false })?.mtimeMs;
    const skewMs = await fsClockSkew((await resolveStaticDir(args.staticDir)).realStaticDir);
    send({
      type: 'judged',
      state: info.state,
      heartbeatAgeMs: info.heartbeatAgeMs,
      naiveAgeMs: mtimeMs === undefined ? undefined : Date.now() - mtimeMs,
      skewMs,
      nowMs: Date.now(),
    });
  } catch (err) {
    const e = err as { code?: string; message?: string };
    send({ type: 'error', code: e.code, message: e.message });
  }
}

process.on('message', (m) => {
  if (m === 'judge') void judge();
  else if (m === 'exit') process.disconnect?.();
});
send({ type: 'ready', pid: process.pid, nowMs: Date.now() });
