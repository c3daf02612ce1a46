/**
 * The manifest of a staging area: what was staged, from where, with which hash. Staging writes it
 * whole (a new file committed in one rename, see stage/journal.ts), so a reader never sees half of
 * it; staging, verify, the build views and du read and check it here alone.
 */
import * as path from 'path';
import { readRecordBytes } from '../fs/anchored';
import { StagingError, asStagingError, errnoCode } from '../base/errors';
import { MANIFEST_FILE, MAX_MANIFEST_BYTES } from '../base/protocol';
import { pause, sortInSlices } from '../base/slices';

/** One artifact as the manifest records it. */
export interface ManifestEntry {
  /** Path relative to the area, '/'-separated. */
  name: string;
  type: 'file' | 'symlink';
  size: number;
  /** Hex SHA-256 of the content (of the target string, for a symlink). */
  sha256: string;
  source: string;
  /** ISO 8601. */
  stagedAt: string;
  /** For symlinks. */
  linkTarget?: string;
  /** The fencing token of the lock it was staged under. */
  fence?: number;
}

/** `<area>/.devserver-staging.manifest.json` */
export interface Manifest {
  version: 1;
  artifacts: Record<string, ManifestEntry>;
}

export { MAX_MANIFEST_BYTES } from '../base/protocol';

/**
 * Artifacts by name, in an object without a prototype: an artifact may be named `__proto__`,
 * `constructor` or `toString`, and in a plain object the first would set the prototype instead of
 * being recorded (a manifest listing it would verify as whole without it), the others would be
 * found before they were ever recorded.
 */
export function noArtifacts(): Record<string, ManifestEntry> {
  return Object.create(null) as Record<string, ManifestEntry>;
}

export function emptyManifest(): Manifest {
  return { version: 1, artifacts: noArtifacts() };
}

/**
 * The area's manifest; an empty one where there is none. A manifest that cannot be read or is
 * damaged is an error (EIO, ECORRUPT), never taken as empty: the next commit would write over
 * what it recorded.
 */
export async function readManifest(dir: string): Promise<Manifest> {
  const file = path.join(dir, MANIFEST_FILE);
  const bytes = await readManifestBytes(file, file);
  return bytes === undefined ? emptyManifest() : parseManifest(bytes, file);
}

/**
 * The bytes of the manifest at `at` (a path, or a name under an opened directory), shown as
 * `shown`; undefined when there is none. Never through a link, never blocking on a FIFO put in its
 * place (see anchored/readRecord.ts); anything else that keeps it from being read is an EIO naming it. Left
 * undecoded: the parser decodes a large one a slice at a time.
 */
export async function readManifestBytes(at: string, shown: string, maxBytes = MAX_MANIFEST_BYTES): Promise<Buffer | undefined> {
  try {
    return await readRecordBytes(at, shown, maxBytes);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return undefined;
    throw asStagingError(err, 'read the manifest', shown);
  }
}

/** What `parseManifest` checks an entry against, for the error message. */
const ENTRY_SHAPE = 'an object with name (its key), type ("file" or "symlink"), size, sha256 (64 hex digits), source and stagedAt';

/**
 * Parses and checks a manifest entry by entry: a damaged one (edited by hand, truncated by a full
 * disk elsewhere, written by another tool) fails with ECORRUPT naming the file, the entry and
 * what to do, rather than failing later on a property of `null`.
 */
export async function parseManifest(text: ManifestText, file: string): Promise<Manifest> {
  const judged = await judgeManifest(text, file);
  if ('damaged' in judged) throw judged.damaged;
  return judged.manifest;
}

/** The artifacts of a manifest in the order it lists them (see `parseManifest`). */
export async function parseArtifacts(text: ManifestText, file: string, options: JudgeOptions = {}): Promise<ManifestEntry[]> {
  const judged = await judgeManifest(text, file, options);
  if ('damaged' in judged) throw judged.damaged;
  return judged.entries;
}

/**
 * A manifest's text judged: the manifest when it is whole; otherwise the ECORRUPT that says why,
 * and how many artifacts it lists where it is at least a JSON object with an "artifacts" object
 * (a listing such as `du` can still count them).
 */
export type JudgedManifest = { manifest: Manifest; entries: ManifestEntry[] } | { damaged: StagingError; listed?: number };

/** A manifest as read: its bytes (UTF-8, as the file holds them), or text already decoded. */
export type ManifestText = string | Buffer;

/**
 * `JudgeOptions.maxParse` for what the editor reads when the user asks (the details page, Verify
 * Build): a manifest this tool wrote is parsed in slices whatever its size; one that is not in its
 * layout and larger than this would hold VS Code's extension host for seconds (a crafted one), and is
 * left to the command-line tool, which has no such limit.
 */
export const IN_EDITOR_MAX_PARSE = 4 * 1024 * 1024;

export interface JudgeOptions {
  /**
   * The most text (characters or bytes, as given) parsed in one piece. A manifest that is not in
   * the writer's layout is parsed whole, and a crafted one can hold the thread for as long as its
   * size allows (many megabytes of `[{},{},…]`: seconds); past this it is not judged but refused with
   * ETOOBIG. Readers on every hover set it; commands the user asks for do not. Default: no limit.
   */
  maxParse?: number;
}

/** Entries checked between two looks at the clock. */
const CHECK_EVERY = 256;

/**
 * The one parser and check of a manifest's text (see `parseManifest`); `file` names it in the
 * error. Done in slices (see slices.ts): a build of 100,000 artifacts has a manifest of about
 * 30 MB, which `JSON.parse` and the checks would hold far longer than a slice in one piece. The
 * entries come in a list as well: even `Object.values` of 100,000 artifacts is too long a block.
 */
export async function judgeManifest(text: ManifestText, file: string, options: JudgeOptions = {}): Promise<JudgedManifest> {
  const corrupt = (what: string): StagingError =>
    new StagingError(
      'ECORRUPT',
      `The manifest ${file} is damaged: ${what}. Nothing was changed.`,
      { path: file, detail: what, next: [{ kind: 'repair-manifest', file }, { kind: 'destroy' }] },
    );
  const maxParse = options.maxParse ?? Infinity;
  const sliced = text.length >= SLICED_FROM ? await parseInSlices(text, maxParse) : undefined;
  let raw: unknown = sliced !== undefined ? { version: 1, artifacts: sliced.artifacts } : undefined;
  if (raw === undefined && text.length > maxParse) {
    return {
      damaged: new StagingError(
        'ETOOBIG',
        `The manifest ${file} was not read here: it is not laid out as this tool writes manifests, and parsing it would take more than ${maxParse} bytes at once.`,
        { path: file, reason: 'manifest-size', next: [{ kind: 'verify' }] },
      ),
    };
  }
  if (raw === undefined) {
    try {
      raw = JSON.parse(typeof text === 'string' ? text : text.toString('utf8'));
    } catch (err) {
      return { damaged: corrupt(`it is not JSON (${(err as Error).message})`) };
    }
  }
  if (!isObject(raw)) return { damaged: corrupt('it is not a JSON object') };
  const keys = sliced?.names ?? (isObject(raw.artifacts) ? Object.keys(raw.artifacts) : undefined);
  const listed = keys?.length;
  const damaged = (what: string): JudgedManifest => (listed === undefined ? { damaged: corrupt(what) } : { damaged: corrupt(what), listed });
  if (raw.version !== 1) return damaged(`its version is ${JSON.stringify(raw.version)}, not 1`);
  if (keys === undefined || !isObject(raw.artifacts)) return damaged('"artifacts" is not an object');
  const listedArtifacts = raw.artifacts;
  // The sliced parse already put them in an object without a prototype; JSON.parse did not.
  const artifacts = sliced !== undefined ? (sliced.artifacts as Record<string, ManifestEntry>) : noArtifacts();
  const entries: ManifestEntry[] = [];
  for (let i = 0; i < keys.length; i++) {
    if (i % CHECK_EVERY === CHECK_EVERY - 1) {
      const p = pause();
      if (p !== undefined) await p;
    }
    const key = keys[i];
    const value = listedArtifacts[key];
    const problem = entryProblem(key, value);
    if (problem !== undefined) return damaged(`artifact ${JSON.stringify(key)} ${problem}; each entry must be ${ENTRY_SHAPE}`);
    if (sliced === undefined) artifacts[key] = value as ManifestEntry;
    entries.push(value as ManifestEntry);
  }
  return { manifest: { version: 1, artifacts }, entries };
}

/** Below this many characters (bytes, as read) a manifest is parsed in one piece: it takes well under a slice. */
export const SLICED_FROM = 256 * 1024;

/**
 * The layout `manifestText` writes (`JSON.stringify` with an indent of two): the text before the
 * first entry, what stands between two entries (the first one's closing brace at the entries'
 * indent) and the text after the last.
 */
const HEAD = '{\n  "version": 1,\n  "artifacts": {\n';
const BETWEEN = '\n    },\n';
const TAIL = '\n  }\n}\n';
/** Entries parsed at once: about 80 KB of text, well under a millisecond. */
const PER_PIECE = 256;

/**
 * A manifest in the writer's layout parsed a few hundred entries at a time, pausing between slices; undefined
 * when the text is not in that layout, a piece does not parse or is longer than `maxPiece`, and the
 * caller then parses the text whole (which gives the exact verdict and message for anything odd).
 *
 * Why the pieces give what `JSON.parse` of the whole would: JSON never has a raw line feed inside
 * a string, so `BETWEEN` is only ever found between tokens. The whole text is then, token for
 * token, HEAD, piece, `},`, piece, `},` …, piece, TAIL; a piece that parses as the members of an
 * object (closed by the brace `BETWEEN` held) is the same members in the whole. A piece cut inside
 * a string, or one that is not such members, fails to parse, and the whole is parsed instead.
 * Members are copied in order into an object without a prototype, so a key found twice keeps its
 * first place and its last value, as `JSON.parse` does, and a key `__proto__` stays a key. `names`
 * are the keys in that order.
 *
 * Bytes are cut before they are decoded, each piece on its own: the cuts fall on `BETWEEN`, whose
 * bytes are ASCII, and in UTF-8 an ASCII byte is never part of another character, so every piece
 * decodes to exactly its part of the whole text (a broken sequence before a cut ends at the cut
 * either way, and becomes the same U+FFFD).
 */
export async function parseInSlices(text: ManifestText, maxPiece = Infinity): Promise<{ artifacts: Record<string, unknown>; names: string[] } | undefined> {
  const source = typeof text === 'string' ? ofString(text) : ofBytes(text);
  const { length } = source;
  if (length < HEAD.length + TAIL.length || source.piece(0, HEAD.length) !== HEAD || source.piece(length - TAIL.length, length) !== TAIL) return undefined;
  const end = length - TAIL.length;
  const artifacts = Object.create(null) as Record<string, unknown>;
  const names: string[] = [];
  for (let at = HEAD.length; ; ) {
    const p = pause();
    if (p !== undefined) await p;
    // A piece of up to PER_PIECE entries (the text between two of the BETWEENs, or after the last
    // one): one JSON.parse per entry would cost twice as much as the whole text's.
    let next = at - BETWEEN.length;
    for (let n = 0; n < PER_PIECE; n++) {
      const found = source.find(next + BETWEEN.length);
      if (found === -1) {
        if (n === 0) next = -1;
        break;
      }
      next = found;
    }
    // The last piece runs to the TAIL (a BETWEEN that reaches into it leaves a comma there: the
    // piece then fails to parse).
    const last = next === -1 || next + BETWEEN.length > end;
    // A piece is a few hundred entries; one far larger was made to be parsed in one go.
    if ((last ? end : next) - at > maxPiece) return undefined;
    let members: unknown;
    try {
      members = JSON.parse(last ? `{${source.piece(at, end)}}` : `{${source.piece(at, next)}}}`);
    } catch {
      return undefined;
    }
    if (!isObject(members)) return undefined;
    for (const key of Object.keys(members)) {
      if (!(key in artifacts)) names.push(key);
      artifacts[key] = members[key];
    }
    if (last) return { artifacts, names };
    at = next + BETWEEN.length;
  }
}

/** What the slicer needs of a text, in its own units (characters or bytes: the markers are ASCII, one of each). */
interface Slicing {
  length: number;
  /** Where the next BETWEEN starts at or after `from`; -1 if none. */
  find(from: number): number;
  /** The text from `start` up to `end`, decoded. */
  piece(start: number, end: number): string;
}

function ofString(text: string): Slicing {
  return { length: text.length, find: (from) => text.indexOf(BETWEEN, from), piece: (start, end) => text.slice(start, end) };
}

const BETWEEN_BYTES = Buffer.from(BETWEEN);

function ofBytes(bytes: Buffer): Slicing {
  return { length: bytes.length, find: (from) => bytes.indexOf(BETWEEN_BYTES, from), piece: (start, end) => bytes.toString('utf8', start, end) };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** What is wrong with one entry, or undefined. */
function entryProblem(key: string, e: unknown): string | undefined {
  if (!isObject(e)) return `is ${e === null ? 'null' : Array.isArray(e) ? 'an array' : typeof e}`;
  // The name is joined to the area's path when links are checked: it must stay inside.
  const segments = key.split('/');
  if (key === '' || key.startsWith('/') || /[\u0000-\u001f\u007f\\]/.test(key) || segments.some((s) => s === '' || s === '.' || s === '..')) {
    return 'is not a relative path inside the area';
  }
  if (e.name !== key) return `has the name ${JSON.stringify(e.name)}, not its key`;
  if (e.type !== 'file' && e.type !== 'symlink') return `has the type ${JSON.stringify(e.type)}`;
  if (typeof e.size !== 'number' || !Number.isSafeInteger(e.size) || e.size < 0) return `has the size ${JSON.stringify(e.size)}`;
  if (typeof e.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(e.sha256)) return `has the sha256 ${JSON.stringify(e.sha256)}`;
  if (typeof e.source !== 'string') return 'has no source';
  if (typeof e.stagedAt !== 'string') return 'has no stagedAt';
  if (e.type === 'symlink' && typeof e.linkTarget !== 'string') return 'is a symlink without a linkTarget';
  if (e.linkTarget !== undefined && typeof e.linkTarget !== 'string') return `has the linkTarget ${JSON.stringify(e.linkTarget)}`;
  if (e.fence !== undefined && (typeof e.fence !== 'number' || !Number.isSafeInteger(e.fence) || e.fence < 0)) return `has the fence ${JSON.stringify(e.fence)}`;
  return undefined;
}

/** One entry as `manifestBytes` lays it out, without what separates it from the next. */
function entryText(name: string, entry: ManifestEntry): string {
  // An entry's own lines, indented to its depth: no JSON string holds a raw line feed.
  return `    ${JSON.stringify(name)}: ${JSON.stringify(entry, null, 2).replace(/\n/g, '\n    ')}`;
}

/** What separates two entries in the written layout. */
const ENTRY_SEPARATOR = ',\n';

/** The bytes `entry` adds to the manifest as `manifestBytes` writes it (its text and a separator). */
export function entryBytes(entry: ManifestEntry): number {
  return Buffer.byteLength(entryText(entry.name, entry)) + ENTRY_SEPARATOR.length;
}

/**
 * The least `artifacts` new entries whose names take `nameBytes` in all add to a manifest: each
 * entry's fixed part (an empty name and source, a size of one digit), its name twice (the key and
 * `name`), and its source, which holds at least the name.
 */
export function leastEntriesBytes(artifacts: number, nameBytes: number, fence?: number): number {
  const bare: ManifestEntry = { name: '', type: 'file', size: 0, sha256: '0'.repeat(64), source: '', stagedAt: new Date(0).toISOString() };
  if (fence !== undefined) bare.fence = fence;
  return artifacts * entryBytes(bare) + 3 * nameBytes;
}

/**
 * ETOOBIG for a staging whose manifest would take `bytes`, past `limit`: readers refuse a manifest
 * past it (it is held in memory whole), so it is never written. Says what to do instead.
 */
export function manifestTooBig(tag: string, file: string, bytes: number, limit = MAX_MANIFEST_BYTES, adding?: number): StagingError {
  const mib = (n: number): string => `${(n / 1024 / 1024).toFixed(1)} MiB`;
  const what = adding === undefined ? '' : ` with ${adding} new artifact${adding === 1 ? '' : 's'}`;
  return new StagingError(
    'ETOOBIG',
    `Cannot stage into ${tag}: its manifest ${file} would take ${adding !== undefined ? 'at least ' : ''}${mib(bytes)} (${bytes} bytes)${what}, ` +
      `more than the limit of ${mib(limit)} (${limit} bytes) for the manifest of one build. ` +
      'Nothing was staged. Stage a build this large as several builds: split its artifacts among several tags ' +
      `(such as ${tag}-part1 and ${tag}-part2), each with a manifest under the limit.`,
    { path: file },
  );
}

/** Entries made into one piece of text at a time: a few hundred KB, far from the longest string V8 allows. */
const ENTRIES_PER_CHUNK = 256;

/**
 * The manifest as written: entries sorted by name (UTF-16 code units), one JSON document, exactly
 * as `JSON.stringify(sorted, null, 2)` lays it out (the layout `parseInSlices` cuts), made in
 * slices: a staging that adds to a build of 100,000 artifacts runs in the extension host too, and
 * the sort and the stringify of such a manifest in one piece would stall it visibly. Made as
 * bytes a few hundred entries at a time, never as one string: a manifest near its limit is longer
 * than the longest string V8 can make (2^29 - 24 characters). One that would pass `limit` fails
 * with ETOOBIG (`manifestTooBig`) as soon as it does, and is not written.
 */
export async function manifestBytes(manifest: Manifest, shown: { tag: string; file: string } = { tag: 'the build', file: MANIFEST_FILE }, limit = MAX_MANIFEST_BYTES): Promise<Buffer> {
  const names = await sortInSlices(Object.keys(manifest.artifacts), (a, b) => (a < b ? -1 : a > b ? 1 : 0));
  if (names.length === 0) return Buffer.from(`${JSON.stringify({ version: 1, artifacts: {} }, null, 2)}\n`);
  const chunks: Buffer[] = [Buffer.from(HEAD)];
  let total = HEAD.length + TAIL.length;
  for (let first = 0; first < names.length; first += ENTRIES_PER_CHUNK) {
    const p = pause();
    if (p !== undefined) await p;
    const end = Math.min(names.length, first + ENTRIES_PER_CHUNK);
    let text = '';
    for (let i = first; i < end; i++) text += entryText(names[i], manifest.artifacts[names[i]]) + (i < names.length - 1 ? ENTRY_SEPARATOR : '');
    const chunk = Buffer.from(text);
    total += chunk.length;
    if (total > limit) throw manifestTooBig(shown.tag, shown.file, total, limit);
    chunks.push(chunk);
  }
  chunks.push(Buffer.from(TAIL));
  return Buffer.concat(chunks, total);
}

/** `manifestBytes` as text, for readers of a small manifest (tests, benchmarks); staging writes the bytes. */
export async function manifestText(manifest: Manifest): Promise<string> {
  return (await manifestBytes(manifest)).toString('utf8');
}
