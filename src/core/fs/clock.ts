/**
 * The filesystem's clock. Hosts sharing a static directory over NFS or sshfs disagree about the
 * time; a heartbeat judged by one host's clock against another host's mtime makes live locks look
 * stale. So every party measures how far the filesystem's clock is from its own (the mtime the
 * filesystem gives a file just written, minus local time), writes heartbeats in filesystem time
 * and judges ages in filesystem time.
 */
import * as fs from 'fs';
import { type Dir, openDir, readRecord, refuseUnlessOneLink } from './anchored';
import { StagingError } from '../base/errors';
import { randomHex } from '../base/crypto';
import { isLocalFilesystem } from './io';
import { openMeta } from './meta';
import { isHolderAlive, isOnThisMachine, isPidAlive, parseHolder, processStartOf, thisMachine } from '../base/holder';
import { probesAllowed } from '../base/probes';
import { CLOCK_PROBE } from '../base/protocol';

const C = fs.constants;

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
 * Falls back to 0 (trust the local clock) where the static directory cannot be written, or
 * while this process may not write probes (probes.ts): then a measurement made before is used.
 */
export function fsClockSkew(realStaticDir: string): Promise<number> {
  // Not measured, and nothing kept: measured once probes are allowed.
  if (!probesAllowed()) return Promise.resolve(cache.get(realStaticDir)?.skewMs ?? 0);
  const now = Date.now();
  const hit = cache.get(realStaticDir);
  if (hit !== undefined) {
    if (hit.pending !== undefined) return hit.pending;
    if (now - hit.measuredAt < MAX_AGE_MS) return Promise.resolve(hit.skewMs);
  }
  const pending = measureUnlessLocal(realStaticDir).then(
    (skewMs) => {
      cache.set(realStaticDir, { skewMs, measuredAt: Date.now() });
      return skewMs;
    },
    (err: unknown) => {
      // A probe refused (a hard link made to it) is worth a word; any other failure only means no measurement.
      if (err instanceof StagingError) process.emitWarning(`Did not measure the filesystem's clock: ${err.message}`, { type: 'DevserverStagingWarning', code: 'DEVSERVER_STAGING_CLOCK' });
      cache.set(realStaticDir, { skewMs: 0, measuredAt: Date.now() });
      return 0;
    },
  );
  cache.set(realStaticDir, { skewMs: hit?.skewMs ?? 0, measuredAt: hit?.measuredAt ?? 0, pending });
  return pending;
}

/**
 * The offset `fsClockSkew` would answer without measuring (a fresh one is known), or undefined:
 * for callers on a local filesystem that do their work synchronously.
 */
export function knownClockSkew(realStaticDir: string): number | undefined {
  const hit = cache.get(realStaticDir);
  if (hit === undefined || hit.pending !== undefined || Date.now() - hit.measuredAt >= MAX_AGE_MS) return undefined;
  return hit.skewMs;
}

/**
 * On a filesystem of this machine's kernel the mtimes are stamped by this kernel's clock, the one
 * `Date.now()` reads: the offset is 0 by construction, and measuring it would cost a file written,
 * synced and removed (milliseconds on a journalled disk) for every command. That holds when the
 * directory is exported to other hosts too: their offset is to this clock, measured on their side.
 * `DEVSERVER_STAGING_CLOCK_PROBE=1` measures anyway (the probe's own tests).
 */
async function measureUnlessLocal(realStaticDir: string): Promise<number> {
  if (process.env.DEVSERVER_STAGING_CLOCK_PROBE !== '1' && (await isLocalFilesystem(realStaticDir))) return 0;
  return measure(realStaticDir);
}

/** A probe older than this is junk whoever left it (a killed process on another host sharing the directory). */
const PROBE_JUNK_MS = 10 * 60_000;
/**
 * A probe whose writer cannot be told (an older client's, or one killed before it wrote) is junk
 * once its pid is not running here and it is this old. Not at once: over NFS it may be another
 * host's probe in use this very moment.
 */
const PROBE_GRACE_MS = 5_000;
/** Probes looked at per measurement: names planted by the thousand must not make every command slow. */
const SWEEP_MAX = 256;
const PROBE_NAME = new RegExp(`^${CLOCK_PROBE}\\.(\\d+)(?:\\.[0-9a-f]+)?$`);

/**
 * Writes a probe in `<static>/.devserver-staging/` and reads the mtime the filesystem gave it.
 * Everything happens below descriptors: the probe is created with O_EXCL | O_NOFOLLOW under a
 * name nobody can guess, so links planted in the directory are never followed; if the directory
 * itself is a link or not a directory, nothing is written and the caller falls back to 0.
 */
async function measure(realStaticDir: string): Promise<number> {
  const top = await openDir(realStaticDir);
  let meta: Dir;
  try {
    meta = await openMeta(top);
  } finally {
    top.close();
  }
  try {
    const name = `${CLOCK_PROBE}.${process.pid}.${randomHex(6)}`;
    const probe = meta.at(name);
    const before = Date.now();
    // Writing (not utimes) makes the filesystem, i.e. the file server, stamp the time.
    const fh = await fs.promises.open(probe, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o644);
    let mtimeMs: number;
    try {
      // Linked elsewhere since it was made: that other name is not ours to write.
      refuseUnlessOneLink(await fh.stat(), `${meta.shown}/${name}`);
      // Who wrote it, so that the sweep can tell a dead writer on this machine at once.
      await fh.write(probeRecord(before));
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
    // Our probe's mtime is the filesystem's "now": other probes' ages are judged on that clock.
    await sweepProbes(meta, mtimeMs);
    const raw = mtimeMs - (before + after) / 2;
    return Math.abs(raw) < DEAD_BAND_MS ? 0 : Math.round(raw / 1000) * 1000;
  } finally {
    meta.close();
  }
}

function probeRecord(nowMs: number): string {
  const m = thisMachine();
  const start = processStartOf(process.pid);
  return JSON.stringify({ pid: process.pid, hostname: m.hostname, bootId: m.bootId, pidNamespace: m.pidNamespace, processStart: start, time: nowMs });
}

/** Removes probes left by killed processes (best effort: anything odd is left alone). */
async function sweepProbes(meta: Dir, fsNowMs: number): Promise<void> {
  let names: string[];
  try {
    names = await fs.promises.readdir(meta.at('.'));
  } catch {
    return;
  }
  let seen = 0;
  for (const name of names) {
    const m = PROBE_NAME.exec(name);
    if (m === null) continue;
    if (++seen > SWEEP_MAX) break;
    const st = await fs.promises.lstat(meta.at(name)).catch(() => undefined);
    // A directory of that name is not a probe of ours; leave it.
    if (st === undefined || st.isDirectory()) continue;
    const ageMs = fsNowMs - st.mtimeMs;
    let junk = ageMs > PROBE_JUNK_MS;
    if (!junk) {
      // Never follows a link nor blocks on a FIFO; anything but a small file tells nothing.
      const writer = st.isFile() ? parseHolder(await readRecord(meta.at(name), name, 1024).catch(() => '')) : undefined;
      if (writer !== undefined && writer.pid === Number(m[1])) {
        junk = isOnThisMachine(writer) && !isHolderAlive(writer);
      } else {
        junk = ageMs > PROBE_GRACE_MS && !isPidAlive(Number(m[1]));
      }
    }
    // unlink removes the entry itself, a link included, never what a link points to.
    if (junk) await fs.promises.unlink(meta.at(name)).catch(() => undefined);
  }
}

/** Forget measured offsets (tests that change the clock under a running process). */
export function resetClockCache(): void {
  cache.clear();
}
