/**
 * A build as found on the server at the end of a fault run: each artifact with the staging its
 * first line names, the manifest's word on each, an independent check of manifest against files,
 * and what `devserver-stage verify` says.
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

export async function inspectBuild(serverArea: string, tag: string, verify: Verify): Promise<BuildFound> {
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
  return { tag, files, ...(manifest !== undefined ? { manifest } : {}), manifestProblems, verify: manifest === undefined ? { ok: true, problems: [] } : await verify(tag) };
}
