/**
 * Whether an artifact may be opened as text, decided from its first bytes: read without following
 * a link out of the static directory, without waiting on a FIFO, and only from a regular file.
 */
import * as fs from 'fs';
import { openFileBelow, relativeInside } from '../../core';

/** Bytes looked at: a NUL among them means binary, as git and VS Code decide it. */
export const SNIFF_BYTES = 8 * 1024;
/** Larger than this is never opened as text: the editor would load all of it. */
export const MAX_TEXT_BYTES = 50 * 1024 * 1024;

export type Sniffed =
  | { kind: 'text'; path: string; size: number }
  | { kind: 'binary'; path: string; size: number; why: 'nul' | 'large' }
  | { kind: 'refused'; why: 'outside' | 'not-a-file' | 'unreadable'; detail?: string };

type Refused = Extract<Sniffed, { kind: 'refused' }>;

/**
 * Opens an artifact for reading as this file checks it: inside the static directory once links
 * are resolved, never a link put in its place since, never waiting on a FIFO, a regular file.
 * The caller reads through the handle and closes it.
 */
async function openArtifactFile(file: string, staticDir: string): Promise<{ handle: fs.promises.FileHandle; real: string; st: fs.Stats } | Refused> {
  let real: string;
  let realStaticDir: string;
  try {
    [real, realStaticDir] = await Promise.all([fs.promises.realpath(file), fs.promises.realpath(staticDir)]);
  } catch (err) {
    return { kind: 'refused', why: 'unreadable', detail: (err as NodeJS.ErrnoException).code ?? String(err) };
  }
  const rel = relativeInside(realStaticDir, real);
  if (rel === undefined) return { kind: 'refused', why: 'outside' };
  let handle: fs.promises.FileHandle;
  try {
    // Level by level from the static directory: a directory on the way, or the file, exchanged
    // for a link since realpath looked is refused, never followed.
    handle = await openFileBelow(realStaticDir, rel);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ELOOP' ? { kind: 'refused', why: 'outside' } : { kind: 'refused', why: 'unreadable', detail: code ?? String(err) };
  }
  try {
    const st = await handle.stat();
    if (st.isFile()) return { handle, real, st };
    await handle.close();
    return { kind: 'refused', why: 'not-a-file' };
  } catch (err) {
    await handle.close().catch(() => undefined);
    return { kind: 'refused', why: 'unreadable', detail: (err as NodeJS.ErrnoException).code ?? String(err) };
  }
}

/**
 * `path` is the real path to open (a link inside the static directory resolved), so that the
 * editor opens what was looked at, not what a link points to later.
 */
export async function sniff(file: string, staticDir: string): Promise<Sniffed> {
  const opened = await openArtifactFile(file, staticDir);
  if ('kind' in opened) return opened;
  const { handle, real, st } = opened;
  try {
    if (st.size > MAX_TEXT_BYTES) return { kind: 'binary', path: real, size: st.size, why: 'large' };
    const buf = Buffer.alloc(Math.min(SNIFF_BYTES, st.size));
    const { bytesRead } = await handle.read(buf, 0, buf.length, 0);
    return buf.subarray(0, bytesRead).includes(0) ? { kind: 'binary', path: real, size: st.size, why: 'nul' } : { kind: 'text', path: real, size: st.size };
  } catch (err) {
    return { kind: 'refused', why: 'unreadable', detail: (err as NodeJS.ErrnoException).code ?? String(err) };
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/**
 * An artifact's bytes for the read-only editor, checked as `sniff` checks them; at most
 * `MAX_TEXT_BYTES`. What cannot be read so is a refusal, with why.
 */
export async function readArtifact(file: string, staticDir: string): Promise<{ bytes: Uint8Array; st: fs.Stats } | Refused> {
  const opened = await openArtifactFile(file, staticDir);
  if ('kind' in opened) return opened;
  const { handle, st } = opened;
  try {
    if (st.size > MAX_TEXT_BYTES) return { kind: 'refused', why: 'unreadable', detail: `larger than ${MAX_TEXT_BYTES} bytes` };
    // As large as it was when opened: a file that grows meanwhile is read no further.
    const bytes = Buffer.alloc(st.size);
    let got = 0;
    for (let n = -1; got < bytes.length && n !== 0; got += n) ({ bytesRead: n } = await handle.read(bytes, got, bytes.length - got, got));
    return { bytes: bytes.subarray(0, got), st };
  } catch (err) {
    return { kind: 'refused', why: 'unreadable', detail: (err as NodeJS.ErrnoException).code ?? String(err) };
  } finally {
    await handle.close().catch(() => undefined);
  }
}
