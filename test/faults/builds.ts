/**
 * A build as found on the server during or after a fault run: each artifact with the staging its
 * first line names, the manifest's word on each, an independent check of manifest against files,
 * and what `devserver-stage verify` says. While operations run, a build is read only when it is
 * free and whole by the protocol's own account (no lock, nothing a cut-off holder left beside it),
 * and kept only if nothing in it moved while it was read.
 */
import * as fs from 'fs';
import * as path from 'path';
import { MANIFEST, artifactsOnDisk, checkArea } from '../attack';
import { parseHeader, type BuildFound, type FileFound, type ManifestSays } from './check';

function firstLine(p: string): string {
  const fd = fs.openSync(p, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  try {
    const buf = Buffer.alloc(256);
    const n = fs.readSync(fd, buf, 0, buf.length, 0);
    return buf.subarray(0, n).toString('latin1').split('\n')[0];
  } finally {
    fs.closeSync(fd);
  }
}

export type Verify = (tag: string) => Promise<{ ok: boolean; problems: string[] }>;

/**
 * Every entry below the area with its inode and size, in order; undefined while a lock, or what a
 * cut-off holder left (`devserver.lock.*`), is there: the build is not whole by the protocol then.
 * Everything the protocol changes in an area it changes by renames, which change this.
 */
export function quietState(serverArea: string): string | undefined {
  const lines: string[] = [];
  const walk = (dir: string, rel: string): boolean => {
    let names: string[];
    try {
      names = fs.readdirSync(dir).sort();
    } catch {
      return false;
    }
    for (const name of names) {
      if (rel === '' && name.startsWith('devserver.lock')) return false;
      const p = path.join(dir, name);
      const st = fs.lstatSync(p, { throwIfNoEntry: false });
      if (st === undefined) return false;
      lines.push(`${rel}${name} ${st.ino} ${st.size}`);
      if (st.isDirectory() && !walk(p, `${rel}${name}/`)) return false;
    }
    return true;
  };
  return walk(serverArea, '') ? lines.join('\n') : undefined;
}

export async function inspectBuild(serverArea: string, tag: string, verify?: Verify): Promise<BuildFound> {
  const files: FileFound[] = [];
  for (const [name, st] of artifactsOnDisk(serverArea)) {
    const header = st.isFile() ? parseHeader(firstLine(path.join(serverArea, name))) : undefined;
    files.push({ name, ...(header !== undefined ? { op: header.op, namedAs: header.name } : {}) });
  }
  let manifest: BuildFound['manifest'];
  const manifestPath = path.join(serverArea, MANIFEST);
  if (fs.existsSync(manifestPath)) {
    try {
      const raw = JSON.parse(fs.readFileSync(manifestPath, 'utf8')) as { artifacts?: Record<string, { source?: string; fence?: number }> };
      manifest = {};
      for (const [name, e] of Object.entries(raw.artifacts ?? {})) manifest[name] = { source: String(e.source), ...(e.fence !== undefined ? { fence: e.fence } : {}) } satisfies ManifestSays;
    } catch (err) {
      manifest = `${manifestPath}: ${(err as Error).message}`;
    }
  }
  const manifestProblems = manifest === undefined ? [] : checkArea(serverArea);
  const verified = manifest !== undefined && verify !== undefined ? await verify(tag) : undefined;
  return { tag, files, ...(manifest !== undefined ? { manifest } : {}), manifestProblems, ...(verified !== undefined ? { verify: verified } : {}) };
}
