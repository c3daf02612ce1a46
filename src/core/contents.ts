/**
 * What a build holds, in two figures (artifacts and bytes), for a tooltip asked for on every
 * hover: from the manifest where staging wrote one, else from the files at the build's top.
 * `ContentsCache` keeps the last figures of each build with the identity of the manifest they came
 * from, and reads a manifest again only once it changed: parsing and checking one of 100,000
 * artifacts takes about half a second, opening and fstat'ing it well under a millisecond.
 */
import * as path from 'path';
import { readRecordUnlessSeen } from './anchored';
import { openBuild, readBuildDir } from './browse';
import { judgeManifest } from './manifest';
import { MANIFEST_FILE, isBookkeeping } from './protocol';
import { resolveArea } from './tags';

export interface BuildContents {
  artifacts: number;
  bytes: number;
  /** The identity of the manifest counted (see `recordIdentity`); unset when the files were counted. */
  manifest?: string;
}

/**
 * The figures of `<staticDir>/<tag>`, undefined when it cannot be read. From its manifest when it
 * is whole, lists something and is at most `maxManifestBytes`; otherwise (a damaged, empty, too
 * large or missing manifest, or a link or FIFO in its place) from the regular files at the top of
 * the build. `known`, the figures of an earlier call, is given back as it is while the manifest it
 * was counted from is unchanged.
 */
export async function buildContents(staticDir: string, tag: string, maxManifestBytes: number, known?: BuildContents): Promise<BuildContents | undefined> {
  const counted = await fromManifest(staticDir, tag, maxManifestBytes, known).catch(() => undefined);
  if (counted !== undefined) return counted;
  const entries = await readBuildDir(staticDir, tag).catch(() => undefined);
  if (entries === undefined) return undefined;
  let artifacts = 0;
  let bytes = 0;
  for (const e of entries) {
    if (!e.file || isBookkeeping(e.name)) continue;
    artifacts++;
    bytes += e.size;
  }
  return { artifacts, bytes };
}

async function fromManifest(staticDir: string, tag: string, maxBytes: number, known: BuildContents | undefined): Promise<BuildContents | undefined> {
  // Read as the core reads records: from the build it opened (never through a link swapped in for
  // it), never blocking on a FIFO, and the identity from the descriptor that is read.
  const area = await resolveArea(staticDir, tag);
  const build = await openBuild(area);
  try {
    const shown = path.join(area.dir, MANIFEST_FILE);
    const read = await readRecordUnlessSeen(build.at(MANIFEST_FILE), shown, maxBytes, known?.manifest);
    if (read.bytes === undefined) return known;
    const judged = await judgeManifest(read.bytes, shown);
    if ('damaged' in judged || judged.entries.length === 0) return undefined;
    let bytes = 0;
    for (const e of judged.entries) bytes += e.size;
    return { artifacts: judged.entries.length, bytes, manifest: read.identity };
  } finally {
    build.close();
  }
}

/** `buildContents` for many builds, keeping the figures of the `size` builds asked for last. */
export class ContentsCache {
  private readonly known = new Map<string, BuildContents>();

  constructor(
    private readonly maxManifestBytes: number,
    private readonly size = 256,
  ) {}

  async get(staticDir: string, tag: string): Promise<BuildContents | undefined> {
    const key = `${staticDir}\0${tag}`;
    const now = await buildContents(staticDir, tag, this.maxManifestBytes, this.known.get(key));
    // Taken out and put back: a Map keeps insertion order, so its first key is the one asked for longest ago.
    this.known.delete(key);
    if (now?.manifest !== undefined) {
      this.known.set(key, now);
      if (this.known.size > this.size) this.known.delete(this.known.keys().next().value as string);
    }
    return now;
  }
}
