/**
 * The "Staging Areas" view: static directories at the root, folders of builds below them, builds
 * with their lock states, and the artifacts inside a build. It renders the model's records; the
 * filter and the order of builds are the model's rules (model/view.ts). Nodes are kept by
 * identity so that a change refreshes just its own row, and `getParent` walks up for `reveal`.
 */
import * as fs from 'fs';
import * as vscode from 'vscode';
import { ContentsCache, keyOf, lastHeld, parentTag, type AreaRecord, type Artifact, type Counts, type LockStates, type StateChange } from '../../core';
import type { Configuration, Settings } from '../config';
import { errorMessage } from '../errors';
import type { Mine } from '../model/mine';
import { NO_FILTER, countsOf, isActive, matches, sortBuilds, sortFolders, type BuildFilter } from '../model/view';
import { ArtifactNode } from './artifactNode';
import { BuildNode, type Ownership } from './buildNode';
import type { Expansion } from './expansion';
import { FolderNode } from './folderNode';
import { MoreNode } from './moreNode';
import { StaticDirNode } from './staticDirNode';

export type Node = StaticDirNode | FolderNode | BuildNode | ArtifactNode | MoreNode;

/** Builds shown in one folder before a "Show more" row. */
export const PAGE = 1_000;
/** Nodes that stand for an area of the static directory (a root, a folder or a build). */
export type AreaNode = StaticDirNode | FolderNode | BuildNode;
/** The rows that stand for a directory inside a static directory: a folder or a build. */
export type RowNode = FolderNode | BuildNode;

export class StagingTreeProvider implements vscode.TreeDataProvider<Node>, vscode.Disposable {
  private readonly _onDidChangeTreeData = new vscode.EventEmitter<Node | Node[] | undefined>();
  readonly onDidChangeTreeData = this._onDidChangeTreeData.event;
  private readonly _onDidChangeFilter = new vscode.EventEmitter<BuildFilter>();
  readonly onDidChangeFilter = this._onDidChangeFilter.event;
  private readonly roots = new Map<string, StaticDirNode>();
  private readonly areas = new Map<string, FolderNode | BuildNode>();
  private readonly subscriptions: vscode.Disposable[];
  private filter: BuildFilter = NO_FILTER;
  /** How many builds each folder shows, where more than a page were asked for. */
  private readonly limits = new Map<string, number>();
  /**
   * Each folder's builds as its rows show them (filtered and in order, before paging), by the
   * folder's key: a folder of 5,000 is sorted once, not each time VS Code asks for its rows.
   * Dropped by `onStatesChanged` (builds came or went, a measure changed their order, a state
   * changed what the filter lets through), the filter, the settings, and this window's locks.
   */
  private readonly rowCache = new Map<string, AreaRecord[]>();
  /** Each build row's item, made again only once its build, its owner or the settings changed. */
  private readonly items = new WeakMap<BuildNode, vscode.TreeItem>();
  /** What each folder's row says now, by its key: its row is redrawn only when that changes. */
  private readonly folderWords = new Map<string, string>();
  /** The tooltips' figures of the builds hovered last, read again only when a manifest changed. */
  private readonly contents = new ContentsCache(TOOLTIP_MANIFEST_BYTES);

  constructor(
    private readonly config: Pick<Configuration, 'current' | 'onDidChange'>,
    private readonly states: LockStates,
    private readonly mine: Mine,
    private readonly expansion?: Expansion,
  ) {
    this.subscriptions = [
      // New roots, order or columns: everything shown again.
      config.onDidChange(() => this.refresh()),
      states.onDidChange((changes) => this.onStatesChanged(changes)),
      // A folder listed for the first time: its row and those above it count more builds now.
      states.onDidList((ref) => this.refreshRows(this.foldersAtOrAbove(ref.staticDir, ref.tag))),
      // Which locks and stagings are this window's changes those rows, and the counts above them.
      mine.onDidChange((ref) => {
        const node = this.find(ref.staticDir, ref.tag);
        if (node instanceof BuildNode) this.items.delete(node);
        const folder = this.find(ref.staticDir, parentTag(ref.tag));
        // With a filter, yours may come or go from a folder's rows.
        if (isActive(this.filter) && folder !== undefined) this.dropRows(folder);
        this.refreshRows([node]);
        this.refreshFolders(this.foldersAtOrAbove(ref.staticDir, parentTag(ref.tag)), isActive(this.filter) && folder !== undefined ? [folder] : []);
      }),
    ];
  }

  private get settings(): Settings {
    return this.config.current;
  }

  get currentFilter(): BuildFilter {
    return this.filter;
  }

  setFilter(filter: BuildFilter): void {
    this.filter = filter;
    this.limits.clear();
    this.rowCache.clear();
    this.folderWords.clear();
    this._onDidChangeTreeData.fire(undefined);
    this._onDidChangeFilter.fire(filter);
  }

  /** Shows everything again from the records (the model re-reads the disk on its own). */
  refresh(): void {
    this.roots.clear();
    this.areas.clear();
    this.rowCache.clear();
    this.folderWords.clear();
    this._onDidChangeTreeData.fire(undefined);
  }

  ownership(staticDir: string, tag: string): Ownership {
    const ref = { staticDir, tag };
    return { mine: this.mine.has(this.states.record(staticDir, tag) ?? ref), staging: this.mine.staging(ref), inLine: this.mine.inLine(ref) };
  }

  getTreeItem(node: Node): vscode.TreeItem {
    if (node instanceof BuildNode) {
      let item = this.items.get(node);
      if (item === undefined) {
        item = node.toTreeItem(this.states.record(node.staticDir, node.tag) ?? node.record, this.ownership(node.staticDir, node.tag), this.settings.showUsage);
        this.items.set(node, item);
      }
      // Filled in on hover (resolveTreeItem), with ages as of then: never one kept from before.
      item.tooltip = undefined;
      return item;
    }
    if (node instanceof FolderNode) {
      const item = node.toTreeItem(...this.folderCounts(node), this.expansion?.isExpanded(node.staticDir, node.tag) === true, this.states.sameAs(node.staticDir, node.tag));
      this.folderWords.set(node.id, String(item.description));
      return item;
    }
    return node.toTreeItem();
  }

  /** What a folder's row counts: every build below it, those the filter lets through, and whether it is still being counted. */
  private folderCounts(node: FolderNode): [Counts, Counts | undefined, boolean] {
    const isMine = (r: AreaRecord): boolean => this.mine.has(r);
    const counts = this.states.counts(node.staticDir, node.tag, this.mine);
    const matching = isActive(this.filter) ? countsOf(this.matching(node.staticDir, node.tag), isMine) : undefined;
    return [counts, matching, !this.states.isListed(node.staticDir, node.tag)];
  }

  async resolveTreeItem(item: vscode.TreeItem, node: Node): Promise<vscode.TreeItem> {
    if (node instanceof BuildNode) {
      // Judged again on hover: the listing's heartbeat age is as old as the listing.
      const judgedAt = Date.now();
      const [info, contents, last] = await Promise.all([
        this.states.judge(node.staticDir, node.tag).catch(() => undefined),
        this.contents.get(node.staticDir, node.tag),
        lastHeld(node.staticDir, node.tag).catch(() => undefined),
      ]);
      const r = this.states.record(node.staticDir, node.tag) ?? node.record;
      // Whether it is yours, from the same judgement the tooltip shows.
      const own = info === undefined ? this.ownership(node.staticDir, node.tag) : { ...this.ownership(node.staticDir, node.tag), mine: this.mine.has({ staticDir: node.staticDir, tag: node.tag, lock: info, judgedAt }) };
      item.tooltip = BuildNode.tooltip(r, own, contents, info, last);
    }
    return item;
  }

  getParent(node: Node): Node | undefined {
    return node.parent;
  }

  async getChildren(node?: Node): Promise<Node[]> {
    if (node === undefined) return Promise.all(this.settings.staticDirs.map((d) => this.rootNode(d)));
    if (node instanceof MoreNode) return [];
    if (node instanceof ArtifactNode) {
      if (!node.artifact.directory) return [];
      const inside = await this.states.artifactDir(node.build.staticDir, node.build.tag, node.artifact.rel);
      return this.paged(node, inside, (a) => new ArtifactNode(node, node.build, a));
    }
    if (node instanceof BuildNode) {
      const artifacts = await this.states.artifacts(node.staticDir, node.tag);
      return this.paged(node, artifacts, (a) => new ArtifactNode(node, node, a));
    }
    if (node instanceof StaticDirNode && node.problem !== undefined) return [];
    const staticDir = node.staticDir;
    const tag = node instanceof StaticDirNode ? '' : node.tag;
    let records: AreaRecord[];
    try {
      records = await this.states.children(staticDir, tag);
    } catch (err) {
      if (node instanceof StaticDirNode) {
        // Shown on the root item itself, never as a notification from here.
        node.problem = errorMessage(err);
        this._onDidChangeTreeData.fire(node);
      }
      return [];
    }
    const active = isActive(this.filter);
    const folders = sortFolders(records.filter((r) => r.kind === 'folder')).filter((r) => !active || this.matching(staticDir, r.tag).length > 0);
    const builds = this.buildRows(staticDir, tag, records);
    const limit = this.limits.get(keyOf(staticDir, tag)) ?? PAGE;
    const shown = builds.length > limit ? builds.slice(0, limit) : builds;
    const rows: Node[] = [...folders.map((r) => this.areaNode(node, r)), ...shown.map((r) => this.areaNode(node, r))];
    if (shown.length < builds.length) rows.push(new MoreNode(node, builds.length - shown.length, PAGE));
    return rows;
  }

  /** The builds a folder shows, filtered and in order, before paging (kept in `rowCache`). */
  private buildRows(staticDir: string, tag: string, records: readonly AreaRecord[]): AreaRecord[] {
    const key = keyOf(staticDir, tag);
    const kept = this.rowCache.get(key);
    if (kept !== undefined) return kept;
    let builds = records.filter((r) => r.kind === 'build');
    if (isActive(this.filter)) builds = builds.filter((r) => matches(r, this.filter, this.mine.has(r)));
    if (this.settings.order !== 'version' || this.settings.showUsage) {
      // Size and last use cost a walk: measured once, and shown when they come.
      if (builds.some((r) => r.usage === undefined)) void this.states.measure(staticDir, tag).catch(() => undefined);
    }
    const rows = sortBuilds(builds, this.settings.order);
    this.rowCache.set(key, rows);
    return rows;
  }

  /** Makes sure a build is on a page its folder shows, so that it can be revealed. */
  async pageIn(staticDir: string, tag: string): Promise<void> {
    const folder = parentTag(tag);
    const rows = this.buildRows(staticDir, folder, await this.states.children(staticDir, folder));
    const at = rows.findIndex((r) => r.tag === tag);
    const key = keyOf(staticDir, folder);
    if (at >= (this.limits.get(key) ?? PAGE)) {
      this.limits.set(key, (Math.floor(at / PAGE) + 1) * PAGE);
      const node = this.find(staticDir, folder);
      if (node !== undefined) this._onDidChangeTreeData.fire(node);
    }
  }

  /** A build's or artifact folder's files a page at a time, as a folder's builds are shown. */
  private paged(parent: BuildNode | ArtifactNode, artifacts: readonly Artifact[], row: (a: Artifact) => ArtifactNode): Node[] {
    const limit = this.limits.get(parent.id) ?? PAGE;
    const rows: Node[] = artifacts.slice(0, limit).map(row);
    if (artifacts.length > limit) rows.push(new MoreNode(parent, artifacts.length - limit, PAGE));
    return rows;
  }

  /** Shows the next page of a folder's builds, or of a build's files. */
  showMore(more: MoreNode): void {
    const parent = more.parent;
    // A row's id is the key its page is kept under (a folder's: keyOf(staticDir, tag)).
    this.limits.set(parent.id, (this.limits.get(parent.id) ?? PAGE) + more.page);
    this._onDidChangeTreeData.fire(parent);
  }

  /** The builds at or below an area that pass the filter. */
  matching(staticDir: string, tag: string): AreaRecord[] {
    return this.states.buildsUnder(staticDir, tag).filter((r) => matches(r, this.filter, this.mine.has(r)));
  }

  /** Whether the filter hides a build. */
  hides(staticDir: string, tag: string): boolean {
    const r = this.states.record(staticDir, tag);
    return r !== undefined && isActive(this.filter) && !matches(r, this.filter, this.mine.has(r));
  }

  /** Every build in every static directory that passes the filter. */
  matchingAll(): AreaRecord[] {
    return this.settings.staticDirs.flatMap((d) => this.matching(d, ''));
  }

  /** The node shown for an area, if the tree has shown it. */
  find(staticDir: string, tag: string): AreaNode | undefined {
    return tag === '' ? this.roots.get(staticDir) : this.areas.get(keyOf(staticDir, tag));
  }

  /**
   * The node for a known area, made (with its parents) if the tree has not shown it yet, so
   * that `reveal` can walk down to it.
   */
  nodeFor(staticDir: string, tag: string): AreaNode | undefined {
    if (tag === '') {
      if (!this.settings.staticDirs.includes(staticDir)) return undefined;
      let root = this.roots.get(staticDir);
      if (root === undefined) {
        root = new StaticDirNode(staticDir);
        this.roots.set(staticDir, root);
      }
      return root;
    }
    const shown = this.areas.get(keyOf(staticDir, tag));
    if (shown !== undefined) return shown;
    const r = this.states.record(staticDir, tag);
    const parent = this.nodeFor(staticDir, parentTag(tag));
    if (r === undefined || parent === undefined || parent instanceof BuildNode) return undefined;
    return this.areaNode(parent, r);
  }

  private areaNode(parent: StaticDirNode | FolderNode, r: AreaRecord): FolderNode | BuildNode {
    const key = keyOf(r.staticDir, r.tag);
    const known = this.areas.get(key);
    if (known !== undefined && known.kind === r.kind && known.parent === parent) {
      // The same row for an area made anew (removed and staged again): drawn from the new record.
      if (known.record !== r && known instanceof BuildNode) this.items.delete(known);
      known.record = r;
      return known;
    }
    const node = r.kind === 'build' ? new BuildNode(parent, r.staticDir, r.tag, r) : new FolderNode(parent, r.staticDir, r.tag, r);
    this.areas.set(key, node);
    return node;
  }

  private async rootNode(dir: string): Promise<StaticDirNode> {
    const node = this.nodeFor(dir, '') as StaticDirNode;
    node.problem = await fs.promises.stat(dir).then(
      (st) => (st.isDirectory() ? undefined : vscode.l10n.t('not a directory')),
      (err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? vscode.l10n.t('does not exist') : vscode.l10n.t('cannot be read ({0})', err.code ?? String(err))),
    );
    return node;
  }

  /** The rows of the folders at or above an area that the tree has shown. */
  private foldersAtOrAbove(staticDir: string, tag: string): FolderNode[] {
    const out: FolderNode[] = [];
    for (let t = tag; t !== ''; t = parentTag(t)) {
      const n = this.find(staticDir, t);
      if (n instanceof FolderNode) out.push(n);
    }
    return out;
  }

  /**
   * Redraws what the changes touch, in two events: first the changed builds' own rows, then the
   * folders whose rows below changed (builds came or went, or moved in the order) or whose counts
   * did. VS Code shows the first at once, and takes a folder's refresh for a refresh of every row
   * below it too (a page of 1,000): were they one event, a lock taken in a big expanded folder
   * would wait for all of that.
   */
  private onStatesChanged(changes: StateChange[]): void {
    const rows: (Node | undefined)[] = [];
    /** Folders whose rows below changed: their children are fetched again. */
    const listed: AreaNode[] = [];
    /** Folders whose counts may have changed: redrawn where their words did. */
    const counted: FolderNode[] = [];
    const filtered = isActive(this.filter);
    const ordered = this.settings.order !== 'version';
    for (const c of changes) {
      const node = this.find(c.staticDir, c.tag);
      const parent = this.find(c.staticDir, parentTag(c.tag));
      if (c.what === 'children') {
        this.forgetBelow(c.staticDir, c.tag);
        this.rowCache.delete(keyOf(c.staticDir, c.tag));
        if (node !== undefined) listed.push(node);
        counted.push(...this.foldersAtOrAbove(c.staticDir, parentTag(c.tag)));
        continue;
      }
      if (node instanceof BuildNode) this.items.delete(node);
      rows.push(node);
      // A measure moves a build in an order by size or last use; a state, in or out of a filter.
      if ((c.what === 'usage' && ordered) || (c.what === 'state' && filtered)) {
        this.rowCache.delete(keyOf(c.staticDir, parentTag(c.tag)));
        if (parent !== undefined) listed.push(parent);
      }
      if (c.what === 'state') counted.push(...this.foldersAtOrAbove(c.staticDir, parentTag(c.tag)));
    }
    this.refreshRows(rows.filter((n) => n === undefined || !listed.includes(n.parent as AreaNode)));
    this.refreshFolders(counted, listed);
  }

  private refreshRows(nodes: readonly (Node | undefined)[]): void {
    const unique = [...new Set(nodes.filter((n): n is Node => n !== undefined))];
    if (unique.length > 0) this._onDidChangeTreeData.fire(unique);
  }

  /**
   * Redraws folders: those in `listed` with every row below them, those in `counted` only where
   * what the row says changed (a folder's refresh fetches its page of rows again).
   */
  private refreshFolders(counted: readonly FolderNode[], listed: readonly AreaNode[] = []): void {
    const nodes = new Set<Node>(listed);
    for (const f of counted) {
      if (nodes.has(f) || !this.folderWords.has(f.id)) continue;
      const [c, matching, counting] = this.folderCounts(f);
      if (counting || FolderNode.description(c, matching) !== this.folderWords.get(f.id)) nodes.add(f);
    }
    this.refreshRows([...nodes]);
  }

  /** Forgets a folder's rows as kept, so that they are filtered and sorted again. */
  private dropRows(node: AreaNode): void {
    this.rowCache.delete(keyOf(node.staticDir, node instanceof StaticDirNode ? '' : node.tag));
  }

  /** Drops nodes of areas that no longer exist below `tag`; the rest keep their identity. */
  private forgetBelow(staticDir: string, tag: string): void {
    const prefix = keyOf(staticDir, tag === '' ? '' : `${tag}/`);
    for (const [k, n] of this.areas) {
      const r = this.states.record(staticDir, n.tag);
      if (k.startsWith(prefix) && (r === undefined || r.kind !== n.kind)) {
        this.areas.delete(k);
        this.rowCache.delete(k);
        this.folderWords.delete(k);
      }
    }
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
    this._onDidChangeTreeData.dispose();
    this._onDidChangeFilter.dispose();
  }
}

/** The directory a node stands for (for an artifact, its file). */
export const dirOf = (n: Node): string => (n instanceof MoreNode ? n.parent.dir : n.dir);

/**
 * A manifest larger than this is not read for a tooltip: reading it costs the extension host CPU
 * at its first hover and at the first after each change (in slices: one not laid out as this tool
 * writes them, which would be parsed whole, is not read past 1 MiB; see core/contents.ts). 64 MiB
 * is about 200,000 artifacts, a little over a second; a build with more (or a manifest planted that
 * large by a co-user) is counted from the files at its top.
 */
const TOOLTIP_MANIFEST_BYTES = 64 * 1024 * 1024;
