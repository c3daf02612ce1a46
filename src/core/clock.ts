/**
 * The filesystem's clock. Hosts sharing a static directory over NFS or sshfs disagree about the
 * time; a heartbeat judged by one host's clock against another host's mtime makes live locks look
 * stale. So every party measures how far the filesystem's clock is from its own (the mtime the
 * filesystem gives a file just written, minus local time), writes heartbeats in filesystem time
 * and judges ages in filesystem time.
 */
import * as fs from 'fs';
import * as path from 'path';
import { CLOCK_PROBE, META_DIR } from './protocol';

/**
 * Offsets smaller than this are treated as zero: mtimes on some filesystems (sshfs) have whole-
 * second precision, so a smaller reading is noise, and it is far below any stale threshold.
 */
const DEAD_BAND_MS = 2_000;
/** Clocks drift slowly; re-measure at most this often per static directory. */
const MAX_AGE_MS = 30_000;

const cache = new Map<string, { skewMs: number; measuredAt: number; pending?: Promise<number> }>();

/**
 * Milliseconds to add to local time to get the filesystem's time, a multiple of 1000.
 * Falls back to 0 (trust the local clock) where the static directory cannot be written.
 */
export function fsClockSkew(realStaticDir: string): Promise<number> {
  const now = Date.now();
  const hit = cache.get(realStaticDir);
  if (hit !== undefined) {
    if (hit.pending !== undefined) return hit.pending;
    if (now - hit.measuredAt < MAX_AGE_MS) return Promise.resolve(hit.skewMs);
  }
  const pending = measure(realStaticDir).then(
    (skewMs) => {
      cache.set(realStaticDir, { skewMs, measuredAt: Date.now() });
      return skewMs;
    },
    () => {
      cache.set(realStaticDir, { skewMs: 0, measuredAt: Date.now() });
      return 0;
    },
  );
  cache.set(realStaticDir, { skewMs: hit?.skewMs ?? 0, measuredAt: hit?.measuredAt ?? 0, pending });
  return pending;
}

async function measure(realStaticDir: string): Promise<number> {
  const dir = path.join(realStaticDir, META_DIR);
  await fs.promises.mkdir(dir, { recursive: true });
  const probe = path.join(dir, `${CLOCK_PROBE}.${process.pid}`);
  const before = Date.now();
  // Writing (not utimes) makes the filesystem, i.e. the file server, stamp the time.
  const fh = await fs.promises.open(probe, 'w');
  let mtimeMs: number;
  try {
    await fh.write(String(before));
    await fh.sync().catch(() => undefined);
    mtimeMs = (await fh.stat()).mtimeMs;
  } catch (err) {
    // A write that failed (a full disk) must not leave the probe behind.
    await fh.close().catch(() => undefined);
    await fs.promises.unlink(probe).catch(() => undefined);
    throw err;
  }
  await fh.close();
  const after = Date.now();
  await fs.promises.unlink(probe).catch(() => undefined);
  const raw = mtimeMs - (before + after) / 2;
  return Math.abs(raw) < DEAD_BAND_MS ? 0 : Math.round(raw / 1000) * 1000;
}

/** Forget measured offsets (tests that change the clock under a running process). */
export function resetClockCache(): void {
  cache.clear();
}
