/**
 * What a build holds, in two figures (artifacts and bytes), for a tooltip asked for on every
 * hover: from the manifest where staging wrote one, else from the files at the build's top.
 * `ContentsCache` keeps the last answer of each build with the identity of the manifest it came
 * from, and reads a manifest again only once it changed: parsing and checking one of 100,000
 * artifacts takes about half a second, opening and fstat'ing it well under a millisecond.
 */
import * as path from 'path';
import { readRecordUnlessSeen } from './fs/anchored';
import { openBuild, readBuildDir } from './build/browse';
import { fsClockSkew } from './fs/clock';
import { judgeManifest } from './build/manifest';
import { MANIFEST_FILE, isBookkeeping } from './base/protocol';
import { resolveArea } from './fs/tags';
import { keyOf } from './watch/records';

export interface BuildContents {
  artifacts: number;
  bytes: number;
  /** The identity of the manifest counted (see `recordIdentity`); unset when the files were counted. */
  manifest?: string;
  /** The identity of a manifest found unfit to count (damaged, empty, or too costly to parse): the files were counted. */
  unfit?: string;
}

/**
 * A manifest changed less than this long ago (by its change time, in the filesystem's clock) may
 * have been read in the middle of a write in place, whose times are set as it begins: what was
 * read of it is not kept under its identity. Git's index treats files changed within its own
 * timestamp's second alike.
 */
const SETTLING_MS = 2_000;

/**
 * The most of a manifest parsed in one piece here (see `JudgeOptions.maxParse`): a manifest this
 * tool wrote is parsed 256 entries at a time (about 80 KB); one that is not in its layout and is
 * larger is not read for a tooltip.
 */
const MAX_PARSE = 1024 * 1024;

/**
 * The figures of `<staticDir>/<tag>`, undefined when it cannot be read. From its manifest when it
 * is whole, lists something, is at most `maxManifestBytes` and is laid out as this tool writes it
 * (or is small); otherwise (a damaged, empty, too large or missing manifest, or a link or FIFO in
 * its place) from the regular files at the top of the build. `known`, the answer of an earlier
 * call, saves reading the manifest while it is unchanged.
 */
export async function buildContents(
  staticDir: string,
  tag: string,
  maxManifestBytes: number,
  known?: BuildContents,
  settlingMs = SETTLING_MS,
): Promise<BuildContents | undefined> {
  const looked = await fromManifest(staticDir, tag, maxManifestBytes, known, settlingMs).catch(() => undefined);
  if (looked?.counted !== undefined) return looked.counted;
  const entries = await readBuildDir(staticDir, tag).catch(() => undefined);
  if (entries === undefined) return undefined;
  let artifacts = 0;
  let bytes = 0;
  for (const e of entries) {
    if (!e.file || isBookkeeping(e.name)) continue;
    artifacts++;
    bytes += e.size;
  }
  return { artifacts, bytes, ...(looked?.unfit !== undefined ? { unfit: looked.unfit } : {}) };
}

async function fromManifest(
  staticDir: string,
  tag: string,
  maxBytes: number,
  known: BuildContents | undefined,
  settlingMs: number,
): Promise<{ counted?: BuildContents; unfit?: string } | undefined> {
  // Read as the core reads records: from the build it opened (never through a link swapped in for
  // it), never blocking on a FIFO, and the identity from the descriptor that is read.
  const area = await resolveArea(staticDir, tag);
  const build = await openBuild(area);
  try {
    const shown = path.join(area.dir, MANIFEST_FILE);
    const seen = known?.manifest ?? known?.unfit;
    const read = await readRecordUnlessSeen(build.at(MANIFEST_FILE), shown, maxBytes, seen);
    if (read.bytes === undefined) return known?.manifest !== undefined ? { counted: known } : { unfit: read.identity };
    // In whole milliseconds, as Date.now() counts them: a change time has a fraction, and one
    // within the current millisecond is not in the future.
    const settled = Date.now() + (await fsClockSkew(area.realStaticDir)) - Math.floor(read.changedMs) >= settlingMs;
    const judged = await judgeManifest(read.bytes, shown, { maxParse: MAX_PARSE });
    if ('damaged' in judged || judged.entries.length === 0) return settled ? { unfit: read.identity } : {};
    let bytes = 0;
    for (const e of judged.entries) bytes += e.size;
    return { counted: { artifacts: judged.entries.length, bytes, ...(settled ? { manifest: read.identity } : {}) } };
  } finally {
    build.close();
  }
}

/**
 * `buildContents` for many builds, keeping the answers of the `size` builds asked for last. Calls
 * for a build while one is under way share it: a manifest of 64 MiB read eight times at once would
 * hold over a gigabyte.
 */
export class ContentsCache {
  private readonly known = new Map<string, BuildContents>();
  private readonly reading = new Map<string, Promise<BuildContents | undefined>>();

  private readonly size: number;
  private readonly settlingMs: number;

  /** `size`: builds whose answers are kept (default 256); `settlingMs`: see SETTLING_MS (for tests). */
  constructor(
    private readonly maxManifestBytes: number,
    options: { size?: number; settlingMs?: number } = {},
  ) {
    this.size = options.size ?? 256;
    this.settlingMs = options.settlingMs ?? SETTLING_MS;
  }

  get(staticDir: string, tag: string): Promise<BuildContents | undefined> {
    const key = keyOf(staticDir, tag);
    const under = this.reading.get(key);
    if (under !== undefined) return under;
    const p = this.read(key, staticDir, tag).finally(() => this.reading.delete(key));
    this.reading.set(key, p);
    return p;
  }

  private async read(key: string, staticDir: string, tag: string): Promise<BuildContents | undefined> {
    const now = await buildContents(staticDir, tag, this.maxManifestBytes, this.known.get(key), this.settlingMs);
    // Taken out and put back: a Map keeps insertion order, so its first key is the one asked for longest ago.
    this.known.delete(key);
    if (now?.manifest !== undefined || now?.unfit !== undefined) {
      this.known.set(key, now);
      if (this.known.size > this.size) this.known.delete(this.known.keys().next().value as string);
    }
    return now;
  }
}
