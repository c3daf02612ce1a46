/**
 * The system calls of `cycle.c`, in the same order, made through Node's synchronous `fs` with
 * nothing between them: what any Node program pays for this protocol's calls (each call's
 * argument checks, its path turned to bytes, its result or error made into objects) before the
 * core's own JavaScript runs. Kept in step with `cycle.c`.
 */
import * as fs from 'fs';
import * as path from 'path';

const C = fs.constants;
const DIR = C.O_RDONLY | C.O_DIRECTORY;
const record = Buffer.alloc(375, 'x');
const acquired = Buffer.alloc(166, 'x');
const released = Buffer.alloc(164, 'x');
const info = Buffer.alloc(512);

function openIfThere(p: string, flags: number): number | undefined {
  try {
    return fs.openSync(p, flags);
  } catch {
    return undefined;
  }
}

function mountId(fd: number): void {
  const m = openIfThere(`/proc/self/fdinfo/${fd}`, C.O_RDONLY);
  if (m === undefined) return;
  fs.readSync(m, info, 0, info.length, 0);
  fs.closeSync(m);
}

function cycle(area: string, segment: number, n: number): void {
  const a = fs.openSync(area, DIR | C.O_NOFOLLOW);
  fs.fstatSync(a);
  fs.lstatSync(path.join(area, '..', '.devserver-staging', 'queue'), { throwIfNoEntry: false });
  const ts = openIfThere(`/proc/self/fd/${a}/staged.timestamp`, C.O_RDONLY | C.O_NONBLOCK | C.O_NOFOLLOW);
  if (ts !== undefined) fs.closeSync(ts);
  const fence = `/proc/self/fd/${a}/.devserver-staging.fence`;
  fs.lstatSync(fence);
  fs.readdirSync(fence);
  process.getuid?.();
  const fresh = `/proc/self/fd/${a}/devserver.lock.new.host.1.${n}`;
  fs.mkdirSync(fresh, 0o777);
  const lock = fs.openSync(fresh, DIR | C.O_NOFOLLOW);
  const rec = fs.openSync(`/proc/self/fd/${lock}/owner.json`, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o644);
  fs.writeSync(rec, record);
  fs.closeSync(rec);
  fs.mkdirSync(`/proc/self/fd/${lock}/work.token${n}`, 0o755);
  fs.renameSync(fresh, `/proc/self/fd/${a}/devserver.lock`);
  fs.fstatSync(lock);
  fs.readdirSync(`/proc/self/fd/${a}/.`);
  fs.lstatSync(fence);
  fs.readdirSync(fence);
  const carrier = `/proc/self/fd/${a}/devserver.lock/work.token${n}/fence.${n}`;
  fs.renameSync(`${fence}/${n}`, carrier);
  fs.renameSync(carrier, `${fence}/${n + 1}`);
  fs.fstatSync(segment);
  fs.readlinkSync(`/proc/self/fd/${segment}`);
  fs.writeSync(segment, acquired);
  fs.lstatSync(`/proc/self/fd/${a}/devserver.lock`);
  fs.lstatSync(`/proc/self/fd/${a}/devserver.lock/work.token${n}/commit.json`, { throwIfNoEntry: false });
  fs.renameSync(`/proc/self/fd/${lock}/owner.json`, `/proc/self/fd/${lock}/work.token${n}/owner.json`);
  const aside = `/proc/self/fd/${a}/devserver.lock.trash.host.1.${n}`;
  fs.renameSync(`/proc/self/fd/${lock}/work.token${n}`, aside);
  fs.lstatSync(`/proc/self/fd/${a}/devserver.lock`);
  fs.closeSync(lock);
  fs.rmdirSync(`/proc/self/fd/${a}/devserver.lock`);
  fs.lstatSync(aside);
  const w = fs.openSync(aside, DIR | C.O_NOFOLLOW);
  fs.fstatSync(w);
  fs.readdirSync(`/proc/self/fd/${w}/.`);
  mountId(a);
  mountId(w);
  fs.lstatSync(`/proc/self/fd/${w}/owner.json`);
  fs.unlinkSync(`/proc/self/fd/${w}/owner.json`);
  fs.closeSync(w);
  fs.rmdirSync(aside);
  fs.fstatSync(segment);
  fs.writeSync(segment, released);
  fs.closeSync(a);
}

/** A replayer in `staticDir` (made as `cycle.c` makes its area): each call runs `n` cycles and says microseconds per cycle. */
export function nodeReplayer(staticDir: string): (n: number) => number {
  const area = path.join(staticDir, 'floor');
  fs.mkdirSync(path.join(area, '.devserver-staging.fence'), { recursive: true });
  fs.closeSync(fs.openSync(path.join(area, '.devserver-staging.fence', '1'), 'wx'));
  const segment = fs.openSync(path.join(staticDir, 'history.jsonl'), C.O_WRONLY | C.O_CREAT | C.O_APPEND, 0o644);
  let next = 1;
  return (n) => {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) cycle(area, segment, next++);
    return Number(process.hrtime.bigint() - t0) / 1000 / n;
  };
}
