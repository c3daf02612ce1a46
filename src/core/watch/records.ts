/**
 * The picture of a static directory that `LockStates` keeps, one record per area: plain data that
 * the extension's tree and status bar render and `devserver-stage watch` prints.
 */
import type { ListEntry } from '../base/types';

/** An area by its static directory and tag; the tag '' is the static directory itself. */
export interface AreaRef {
  staticDir: string;
  tag: string;
}

/**
 * `root`: a configured static directory. `folder`: a directory that groups builds (a board).
 * `build`: a directory that was staged or locked; what is inside it is its artifacts.
 */
export type AreaKind = 'root' | 'folder' | 'build';

/** A file or directory inside a build, as the tree shows it. */
export interface Artifact {
  name: string;
  /** Absolute path. */
  path: string;
  /** Relative to the build, '/'-separated. */
  rel: string;
  size: number;
  directory: boolean;
}

/** How much a build takes and when it was last used (measured on request: it costs a walk). */
export interface BuildUsage {
  bytes: number;
  /** In the filesystem's clock, ms since the epoch. */
  lastUsedMs: number;
}

export interface AreaRecord extends AreaRef {
  kind: AreaKind;
  /** The last judgement of its lock (a root has none of its own). */
  lock: ListEntry | undefined;
  /** When `lock` was judged (Date.now()). */
  judgedAt: number;
  /** Roots and folders, once listed: the tags of the areas directly inside, in natural order. */
  children?: string[];
  /** Builds, once listed: the files and artifact folders at its top, bookkeeping left out. */
  artifacts?: Artifact[];
  usage?: BuildUsage;
  /** Set by a verification that found the build damaged; cleared by one that finds it whole. */
  damaged?: string;
}

/** A change the model reports: of an area's lock, its contents, or its measure. */
export interface StateChange extends AreaRef {
  /**
   * `state`: the area's own lock (or marks) changed. `children`: what is inside it came or went.
   * `usage`: a build's measured size or last use changed (only builds someone had measured).
   */
  what: 'state' | 'children' | 'usage';
}

/** What the status bar and a folder's row count. */
export interface Counts {
  builds: number;
  held: number;
  stale: number;
  legacy: number;
  mine: number;
}

/**
 * An area's key in memory, wherever areas are kept by key: the model's records, the tree's rows,
 * this window's locks, open detail pages. (On disk an area is named by `areaKey`, see protocol.ts.)
 */
/**
 * Which builds are someone's own (a window's leases and stagings), for the counts: `version`
 * grows whenever the answer may change, so the model keeps its counts until it does.
 */
export interface Owner {
  has(r: AreaRecord): boolean;
  /** Areas that are its own though the model may not show them as locked yet. */
  refs(): Iterable<AreaRef>;
  readonly version: number;
}

export const keyOf = (staticDir: string, tag: string): string => `${staticDir}\0${tag}`;

export const parentTag = (tag: string): string => {
  const i = tag.lastIndexOf('/');
  return i < 0 ? '' : tag.slice(0, i);
};

/** Whether `tag` is `ancestor` or lies below it ('' is above every tag). */
export const isAtOrBelow = (tag: string, ancestor: string): boolean => ancestor === '' || tag === ancestor || tag.startsWith(`${ancestor}/`);

/** What a tree item shows of a lock; anything else (heartbeat age) may change silently. */
export function stateKey(e: ListEntry | undefined): string {
  if (e === undefined) return '';
  // A reservation's end and owner are on its row: a moved end or another owner is a change.
  return [e.kind, e.state, e.holder?.token ?? '', e.holder?.clientId ?? '', e.legacy?.pidAndHash ?? '', e.exists, e.reservation?.until ?? '', e.reservation?.mine ?? ''].join('\0');
}
