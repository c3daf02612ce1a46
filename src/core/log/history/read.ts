/**
 * Reading the history of one area or of all: the tag directories walked through descriptors, each
 * host's segments newest first, as many as the query needs.
 */
import * as fs from 'fs';
import { type Dir, notARecord, openBelow, openDir } from '../../fs/anchored';
import { errnoCode } from '../../base/errors';
import { HISTORY_DIR, META_DIR, historyDirOf, historySegmentName, parseHistorySegmentName } from '../../base/protocol';
import { parseTag, resolveStaticDir } from '../../fs/tags';
import { readNames } from './append';
import type { HistoryEvent, HistoryKind, HistoryOptions } from './events';
import { Kept } from './kept';
import { type Want, readSegment, warnRead } from './readSegment';
import { flushHistory } from './record';
import { defaultWarn, inWords } from './report';

/**
 * A glance (`lastHeld`, which a tooltip asks on every hover) reads the end of at most this many
 * segments of the tag, the newest by mtime: a tag's history holds one or two segments per host, and
 * however many hosts or bytes a co-user plants there, a glance reads no more than 1 MiB.
 */
const GLANCE_SEGMENTS = 16;

export interface HistoryQuery extends HistoryOptions {
  /** One area's events; without it, every area's. */
  tag?: string;
  /** Only events at or after this instant, in milliseconds since the epoch (`Date.now() - 2 * 86_400_000`: the last two days). */
  sinceMs?: number;
  /** Only the newest `limit` events (still oldest first). Cheap: only the ends of the segments are read. */
  limit?: number;
  /** Only events at or before this instant: lines dated far ahead (a co-user's) then take no place among the newest. */
  untilMs?: number;
}

/**
 * How far past this host's clock an honest record may be dated (the file server's clock, which
 * records use, and this host's differ): a question about what just happened asks for nothing later.
 */
export const AHEAD_MS = 3_600_000;

/** Events a host appends a little out of time order (each process stamps its own); older generations are read while within this of `sinceMs`. */
const ORDER_SLACK_MS = 60_000;

/**
 * The history of one area (`tag`) or of all, oldest first (by time; events of one host at the
 * same instant in the order they were written). Reads never follow a link and never wait on a
 * FIFO: such an entry in place of a segment or directory is skipped and reported to `warn`.
 * Events this process recorded are written before it reads.
 */
export async function history(staticDir: string, query: HistoryQuery = {}): Promise<HistoryEvent[]> {
  return collect(staticDir, query);
}

export async function collect(staticDir: string, query: HistoryQuery, kinds?: ReadonlySet<HistoryKind>, glance = false): Promise<HistoryEvent[]> {
  const limit = query.limit === undefined ? Infinity : Math.max(0, Math.floor(query.limit));
  const kept = new Kept(limit);
  await visitHistory(
    staticDir,
    (sync) => {
      const tag = query.tag === undefined ? undefined : parseTag(query.tag).join('/');
      if (limit === 0) return undefined;
      return {
        ...(tag !== undefined ? { tag } : {}),
        sinceMs: query.sinceMs ?? -Infinity,
        ...(query.untilMs !== undefined ? { untilMs: query.untilMs } : {}),
        limit,
        ...(kinds !== undefined ? { kinds } : {}),
        warn: query.warn ?? defaultWarn,
        sync: sync && !glance,
        glance,
      };
    },
    (dir, want) => readTagDir(dir, want, kept),
  );
  return kept.events();
}

/**
 * Opens the history of `staticDir` and visits the directory of `want.tag`, or of every tag, each
 * opened without following a link. `wantOf` (told whether the filesystem allows synchronous calls)
 * says what is wanted, or undefined for nothing. Events this process recorded are written first.
 */
export async function visitHistory(staticDir: string, wantOf: (sync: boolean) => Want | undefined, visit: (dir: Dir, want: Want) => Promise<void>): Promise<void> {
  const sd = await resolveStaticDir(staticDir);
  const want = wantOf(sd.io.sync);
  if (want === undefined) return;
  await flushHistory();
  const top = await openDir(sd.staticDir, true, want.sync);
  const opened: Dir[] = [top];
  try {
    const hist = await openChain(opened, [META_DIR, HISTORY_DIR], want);
    if (hist === undefined) return;
    if (want.tag !== undefined) {
      const dir = await openChain(opened, historyDirOf(want.tag), want);
      if (dir !== undefined) await visit(dir, want);
    } else {
      await eachTagDir(hist, want, (dir) => visit(dir, want));
    }
  } finally {
    for (const d of opened) d.close();
  }
}

/** Visits every tag directory below the opened history directory, each opened (never through a link) and closed after its visit. */
async function eachTagDir(hist: Dir, want: Want, visit: (dir: Dir, name: string) => Promise<void>): Promise<void> {
  for (const fan of await listNames(hist, want)) {
    const fanDir = await openQuietly(hist, fan, want);
    if (fanDir === undefined) continue;
    try {
      for (const name of await listNames(fanDir, want)) {
        const dir = await openQuietly(fanDir, name, want);
        if (dir === undefined) continue;
        try {
          await visit(dir, name);
        } finally {
          dir.close();
        }
      }
    } finally {
      fanDir.close();
    }
  }
}

/** The names in an opened directory; none when it cannot be read (reported, unless it has gone). */
function listNames(dir: Dir, want: Want): Promise<string[]> {
  return readNames(dir, want.sync).catch((err: unknown) => {
    if (errnoCode(err) !== 'ENOENT') warnRead(want, inWords(err, dir.shown));
    return [];
  });
}

/** Opens each name below the last opened directory; undefined when one is missing or not a directory (reported). */
async function openChain(opened: Dir[], names: readonly string[], want: Want): Promise<Dir | undefined> {
  for (const name of names) {
    const next = await openQuietly(opened.at(-1)!, name, want);
    if (next === undefined) return undefined;
    opened.push(next);
  }
  return opened.at(-1);
}

/** `openBelow`, with a missing entry as undefined and a link or file in a directory's place skipped and reported. */
async function openQuietly(parent: Dir, name: string, want: Want): Promise<Dir | undefined> {
  try {
    return await openBelow(parent, name, want.sync);
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT') return undefined;
    const shown = `${parent.shown}/${name}`;
    warnRead(want, code === 'ELOOP' ? notARecord(shown, 'a symbolic link') : code === 'ENOTDIR' ? notARecord(shown, 'not a directory') : inWords(err, shown));
    return undefined;
  }
}

/** The events of one tag directory that `want` asks for, into `kept`: per host, newest generation first, as many as needed. */
export async function readTagDir(dir: Dir, want: Want, kept: Kept): Promise<void> {
  const byHost = new Map<string, number[]>();
  for (const name of await listNames(dir, want)) {
    const seg = parseHistorySegmentName(name);
    if (seg === undefined) continue;
    const gens = byHost.get(seg.host);
    if (gens === undefined) byHost.set(seg.host, [seg.generation]);
    else gens.push(seg.generation);
  }
  const hosts = want.glance ? await newestHosts(dir, byHost) : byHost;
  for (const [host, gens] of hosts) {
    const source = kept.source();
    let got = 0;
    for (const gen of gens.sort((a, b) => b - a).slice(0, want.glance ? 1 : undefined)) {
      const { events, times, oldestMs } = await readSegment(dir, historySegmentName(host, gen), want, want.limit - got);
      for (let line = 0; line < events.length; line++) kept.add({ e: events[line], t: times[line], source, generation: gen, line });
      got += events.length;
      if (got >= want.limit || oldestMs < want.sinceMs - ORDER_SLACK_MS) break;
    }
  }
}

/** Hosts whose segments a glance compares by their mtimes: the first ones listed, where a co-user planted thousands. */
const GLANCE_CANDIDATES = 1_024;

/** The hosts whose newest segment was written last, at most `GLANCE_SEGMENTS` of them (by mtime; a link or FIFO is read as such later). */
async function newestHosts(dir: Dir, byHost: Map<string, number[]>): Promise<[string, number[]][]> {
  if (byHost.size <= GLANCE_SEGMENTS) return [...byHost];
  const candidates = [...byHost].slice(0, GLANCE_CANDIDATES);
  const dated = await Promise.all(
    candidates.map(async ([host, gens]) => {
      const newest = gens.reduce((a, b) => Math.max(a, b));
      const st = await fs.promises.lstat(dir.at(historySegmentName(host, newest))).catch(() => undefined);
      return { entry: [host, gens] as [string, number[]], mtimeMs: st?.mtimeMs ?? -Infinity };
    }),
  );
  return dated
    .sort((a, b) => b.mtimeMs - a.mtimeMs)
    .slice(0, GLANCE_SEGMENTS)
    .map((d) => d.entry);
}
