/**
 * The manifest of a staging area: what was staged, from where, with which hash. Written whole
 * (temporary file, then rename), so a reader never sees half of it.
 */
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { MANIFEST_FILE, PART_PREFIX, type Manifest, type ManifestEntry } from './types';

export function emptyManifest(): Manifest {
  return { version: 1, artifacts: {} };
}

/** The area's manifest; an empty one where there is none or it cannot be parsed. */
export async function readManifest(dir: string): Promise<Manifest> {
  let text: string;
  try {
    text = await fs.promises.readFile(path.join(dir, MANIFEST_FILE), 'utf8');
  } catch {
    return emptyManifest();
  }
  try {
    const raw = JSON.parse(text) as Partial<Manifest>;
    if (raw.version === 1 && typeof raw.artifacts === 'object' && raw.artifacts !== null) {
      return { version: 1, artifacts: { ...raw.artifacts } as Record<string, ManifestEntry> };
    }
  } catch {
    /* unreadable: start afresh; entries are re-hashed where needed */
  }
  return emptyManifest();
}

export async function writeManifest(dir: string, manifest: Manifest): Promise<void> {
  const sorted: Manifest = { version: 1, artifacts: {} };
  for (const name of Object.keys(manifest.artifacts).sort()) sorted.artifacts[name] = manifest.artifacts[name]!;
  const part = path.join(dir, `${PART_PREFIX}manifest.${crypto.randomBytes(6).toString('hex')}`);
  try {
    await fs.promises.writeFile(part, `${JSON.stringify(sorted, null, 2)}\n`, { flag: 'wx' });
    await fs.promises.rename(part, path.join(dir, MANIFEST_FILE));
  } catch (err) {
    await fs.promises.unlink(part).catch(() => undefined);
    throw err;
  }
}
