/**
 * The extension measured inside a real VS Code: loaded by the extension host in place of a test
 * suite (bench/vscode/run.mjs starts it). Prints figures; asserts no timing. See bench/README.md.
 *
 * Environment:
 *   DEVSERVER_STAGING_BENCH_PARTS        comma-separated, of activation,latency,cpu,scale,scan,big,usage (default all)
 *   DEVSERVER_STAGING_BENCH_USAGE_BUILDS builds of the usage part's folder (default 5000), with
 *   DEVSERVER_STAGING_BENCH_USAGE_EVENTS events of history in all (default 100000)
 *   DEVSERVER_STAGING_BENCH_BIG_FOLDERS  folders of the big part (default 3)
 *   DEVSERVER_STAGING_BENCH_BIG_BUILDS   builds in each of them (default 5000)
 *   DEVSERVER_STAGING_BENCH_CYCLES       lock cycles of the big part's memory figure (default 1000)
 *   DEVSERVER_STAGING_BENCH_SCALE_BUILDS builds in the one big folder of the scale part (default 10000)
 *   DEVSERVER_STAGING_BENCH_SCAN_BUILDS  builds in the static directory of the scan part (default 100000)
 *   DEVSERVER_STAGING_BENCH_SCAN_FOLDERS folders they are spread over (default 10)
 *   DEVSERVER_STAGING_BENCH_EVENTS       lock and release events each for the latency (default 60)
 *   DEVSERVER_STAGING_BENCH_CPU_SECONDS  seconds of CPU measured in each state (default 60)
 *   DEVSERVER_STAGING_BENCH_OUT          a file to write the figures to, as JSON
 *   DEVSERVER_STAGING_BENCH_PROFILE      a directory to write the extension host's CPU profile of the
 *                                        scan to (scan.cpuprofile); its figures are then not to be quoted
 */
import { spawn, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as inspector from 'inspector';
import * as os from 'os';
import * as path from 'path';
import { monitorEventLoopDelay, performance } from 'perf_hooks';
import * as v8 from 'v8';
import * as vm from 'vm';
import * as vscode from 'vscode';
import type { DevserverStagingApi } from '../../src/extension/extension';
import type { Node } from '../../src/extension/tree/provider';
import { BlockProbe } from '../blocks';
import { median, p95 } from '../stats';
import { usagePart } from './usage';

const T0 = Date.now();
const EXTENSION_ID = 'devserver-staging.devserver-staging';
/** Lines the headless runner relays out of VS Code (see test/integration/index.ts). */
const MARK = '::test:: ';

const env = process.env;
const PARTS = new Set((env['DEVSERVER_STAGING_BENCH_PARTS'] ?? 'activation,latency,cpu,scale,scan,big,usage').split(',').map((s) => s.trim()));
const EVENTS = Number(env['DEVSERVER_STAGING_BENCH_EVENTS'] ?? 60);
const CPU_MS = Number(env['DEVSERVER_STAGING_BENCH_CPU_SECONDS'] ?? 60) * 1000;

const LATENCY_BOARD = 'latency-board';
const LATENCY_BUILDS = 5;
const CPU_BOARDS = 4;
const CPU_BUILDS_PER_BOARD = 25;
const CPU_WORKERS = 4;
const CPU_ROUNDS = 2;
const SCALE_BUILDS = Number(env['DEVSERVER_STAGING_BENCH_SCALE_BUILDS'] ?? 10_000);
const SCALE_ROUNDS = 5;
const SCAN_BUILDS = Number(env['DEVSERVER_STAGING_BENCH_SCAN_BUILDS'] ?? 100_000);
const SCAN_FOLDERS = Number(env['DEVSERVER_STAGING_BENCH_SCAN_FOLDERS'] ?? 10);
const BIG_FOLDERS = Number(env['DEVSERVER_STAGING_BENCH_BIG_FOLDERS'] ?? 3);
const BIG_BUILDS = Number(env['DEVSERVER_STAGING_BENCH_BIG_BUILDS'] ?? 5_000);
const CYCLES = Number(env['DEVSERVER_STAGING_BENCH_CYCLES'] ?? 1_000);

/** Figures by name, for the runner's summary over several runs. */
const figures: Record<string, number> = {};

function say(line = ''): void {
  console.log(MARK + line);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const ms1 = (v: number): string => (Number.isFinite(v) ? v.toFixed(1) : '-');

function spread(samples: readonly number[]): { median: number; p95: number; max: number } {
  return { median: median(samples), p95: p95(samples), max: samples.length === 0 ? NaN : Math.max(...samples) };
}

async function waitUntil(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

// ---------------------------------------------------------------------------------------------
// Activation

/** VS Code's own marks in the extension host (epoch ms, whole milliseconds), by name. */
function vscodeMarks(): Map<string, number> {
  const perf = (globalThis as { MonacoPerformanceMarks?: { getMarks(): { name: string; startTime: number }[] } }).MonacoPerformanceMarks;
  return new Map((perf?.getMarks() ?? []).map((m) => [m.name, m.startTime]));
}

/**
 * Activates the extension, or waits for VS Code's own activation (onStartupFinished), which
 * usually comes before the extension host loads this file. Either way VS Code marks when it
 * started loading the extension's code, when that was loaded, when it called activate() and when
 * activate() returned: those marks are the figures.
 */
async function activate(): Promise<DevserverStagingApi> {
  const ext = vscode.extensions.getExtension<DevserverStagingApi>(EXTENSION_ID);
  if (ext === undefined) throw new Error(`${EXTENSION_ID} is not installed in this VS Code`);
  const askedAt = Date.now();
  const t = performance.now();
  const api = await ext.activate();
  const callMs = performance.now() - t;
  if (!PARTS.has('activation')) return api;

  const marks = vscodeMarks();
  const at = (what: string): number => marks.get(`code/extHost/${what}/${EXTENSION_ID}`) ?? NaN;
  const origin = Math.round(marks.get('code/timeOrigin') ?? performance.timeOrigin);
  const willLoad = at('willLoadExtensionCode');
  const didLoad = at('didLoadExtensionCode');
  const willActivate = at('willActivateExtension');
  const didActivate = at('didActivateExtension');
  const since = (t: number): string => `${ms1(t - origin).padStart(7)} ms`;
  say('activation (VS Code\'s marks in the extension host, whole milliseconds)');
  say(`   extension host process started                      ${since(origin)}`);
  say(`   extension host ready                                 ${since(marks.get('code/extHost/ready') ?? NaN)}`);
  say(`   started loading the extension's code                 ${since(willLoad)}`);
  say(`   loaded it (evaluated dist/extension.js)              ${since(didLoad)}`);
  say(`   called activate()                                    ${since(willActivate)}`);
  say(`   activate() returned                                  ${since(didActivate)}`);
  say(`   the benchmark was loaded                             ${since(T0)}`);
  say(`   -> loading the code                                  ${ms1(didLoad - willLoad).padStart(7)} ms`);
  say(`   -> then VS Code preparing the extension's context    ${ms1(willActivate - didLoad).padStart(7)} ms (its stored state; begun with the loading)`);
  say(`   -> activate() itself                                 ${ms1(didActivate - willActivate).padStart(7)} ms`);
  say(`   -> from starting to load to activate() returned      ${ms1(didActivate - willLoad).padStart(7)} ms`);
  if (willLoad < askedAt) say(`   activated by VS Code (onStartupFinished), ${willLoad < T0 ? 'before the benchmark was loaded' : 'while the benchmark started'}`);
  else say(`   activated by the benchmark's getExtension().activate(), which took ${ms1(callMs)} ms`);
  say();
  figures['activation: start loading -> activate() returned, ms'] = didActivate - willLoad;
  figures['activation: loading the code, ms'] = didLoad - willLoad;
  figures['activation: then preparing the context, ms'] = willActivate - didLoad;
  figures['activation: activate() itself, ms'] = didActivate - willActivate;
  return api;
}

// ---------------------------------------------------------------------------------------------
// A static directory, and workers that lock in it

function makeStaticDir(): string {
  const staticDir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'dss-bench-vscode-')), 'static');
  const make = (tag: string): void => {
    fs.mkdirSync(path.join(staticDir, tag), { recursive: true });
    fs.writeFileSync(path.join(staticDir, tag, 'autotest.tar'), 'x');
    // As the Python devserver marks a staged build: without a mark a directory is a folder.
    fs.writeFileSync(path.join(staticDir, tag, 'staged.timestamp'), '');
  };
  for (let i = 0; i < LATENCY_BUILDS; i++) make(`${LATENCY_BOARD}/R${100 + i}-1.0.0`);
  for (const tag of cpuTags()) make(tag);
  return staticDir;
}

function cpuTags(): string[] {
  const tags: string[] = [];
  for (let b = 0; b < CPU_BOARDS; b++) for (let i = 0; i < CPU_BUILDS_PER_BOARD; i++) tags.push(`cpu-board-${b}/R${100 + i}-1.0.0`);
  return tags;
}

class Worker {
  private readonly child: ChildProcess;
  private next = 0;
  private readonly calls = new Map<number, { resolve: (t: [number, number][]) => void; reject: (e: Error) => void }>();
  private stderr = '';

  constructor(private readonly staticDir: string) {
    // The extension host's Node (an Electron one in desktop VS Code: run it as Node).
    this.child = spawn(process.execPath, [path.join(__dirname, 'lock-worker.js')], {
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      env: { ...process.env, ELECTRON_RUN_AS_NODE: '1' },
    });
    this.child.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
    this.child.on('message', (m: { type: string; id: number; times?: [number, number][]; message?: string }) => {
      const call = this.calls.get(m.id);
      this.calls.delete(m.id);
      if (m.type === 'done') call?.resolve(m.times!);
      else call?.reject(new Error(m.message));
    });
    this.child.on('exit', (code, signal) => {
      for (const c of this.calls.values()) c.reject(new Error(`a lock worker exited (${code ?? signal}): ${this.stderr}`));
      this.calls.clear();
    });
  }

  /** Takes or releases the locks of `tags`, one after the other: [before, after] of each. */
  call(type: 'lock' | 'release', tags: string[]): Promise<[number, number][]> {
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.calls.set(id, { resolve, reject });
      this.child.send({ type, id, staticDir: this.staticDir, tags });
    });
  }

  /** Lets the worker release what it holds and exit; kills it if it does not. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((r) => this.child.once('exit', () => r()));
    this.child.disconnect();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  }
}

// ---------------------------------------------------------------------------------------------
// Watching the tree

/** Counts what the tree does, and what VS Code asks of it (it asks only for items it shows). */
class TreeProbe implements vscode.Disposable {
  events = 0;
  getTreeItem = 0;
  getChildren = 0;
  /** The last item VS Code was given for each folder's row, by the folder's tag: what it shows. */
  readonly folderItems = new Map<string, vscode.TreeItem>();
  private readonly waiters = new Set<() => void>();
  private readonly fetchWaiters = new Set<(n: Node) => void>();
  private readonly sub: vscode.Disposable;
  private readonly restore: () => void;

  constructor(private readonly api: DevserverStagingApi) {
    this.sub = api.tree.onDidChangeTreeData(() => {
      this.events++;
      for (const w of [...this.waiters]) w();
    });
    // VS Code calls the provider's methods through the object it was given: counting them there
    // tells what the workbench fetched, and when.
    const tree = api.tree;
    const getTreeItem = tree.getTreeItem;
    const getChildren = tree.getChildren;
    tree.getTreeItem = (n: Node) => {
      this.getTreeItem++;
      for (const w of [...this.fetchWaiters]) w(n);
      const item = getTreeItem.call(tree, n);
      if (n.kind === 'folder') this.folderItems.set(n.tag, item);
      return item;
    };
    tree.getChildren = (n?: Node) => {
      this.getChildren++;
      return getChildren.call(tree, n);
    };
    this.restore = () => {
      tree.getTreeItem = getTreeItem;
      tree.getChildren = getChildren;
    };
  }

  /**
   * When (Date.now()) the tree first announces a change after which `tag` is in `state`, and
   * how long after that VS Code first fetched the item (undefined if it did not within a second:
   * a view not on screen is not fetched). Date.now(), because the other process's times are.
   */
  expect(staticDir: string, tag: string, state: string, timeoutMs: number): Promise<{ event: number; fetchMs?: number }> {
    return new Promise((resolve, reject) => {
      let event: number | undefined;
      let eventPerf = 0;
      const done = (fetchMs?: number): void => {
        this.fetchWaiters.delete(onFetch);
        clearTimeout(fetchTimer);
        resolve({ event: event!, ...(fetchMs !== undefined ? { fetchMs } : {}) });
      };
      const onFetch = (n: Node): void => {
        if (n.kind === 'build' && n.entry.staticDir === staticDir && n.entry.tag === tag && n.entry.state === state) done(performance.now() - eventPerf);
      };
      let fetchTimer: NodeJS.Timeout | undefined;
      const onEvent = (): void => {
        const n = this.api.tree.find(staticDir, tag);
        if (n === undefined || n.kind !== 'build' || n.entry.state !== state) return;
        event = Date.now();
        eventPerf = performance.now();
        this.waiters.delete(onEvent);
        clearTimeout(timer);
        this.fetchWaiters.add(onFetch);
        fetchTimer = setTimeout(() => done(), 1_000);
      };
      const timer = setTimeout(() => {
        this.waiters.delete(onEvent);
        reject(new Error(`the tree did not show ${tag} as ${state} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.add(onEvent);
    });
  }

  dispose(): void {
    this.sub.dispose();
    this.restore();
  }
}

/** Expands `tag`'s board as VS Code would, and in the view on screen. */
async function expandBoard(api: DevserverStagingApi, staticDir: string, board: string): Promise<number> {
  const [root] = await api.tree.getChildren();
  if (root === undefined) throw new Error('the tree shows no static directory');
  const boards = await api.tree.getChildren(root);
  const node = boards.find((n) => n.kind === 'folder' && n.tag === board);
  if (node === undefined) throw new Error(`the tree does not show ${board} in ${staticDir}`);
  const builds = await api.tree.getChildren(node);
  await api.view.reveal(node, { select: false, focus: false, expand: true }).then(undefined, () => undefined);
  return builds.length;
}

// ---------------------------------------------------------------------------------------------
// Latency: another process takes or releases a lock -> the tree shows it

/**
 * EVENTS takes and releases of `tags` in turn by another process, 300-600 ms apart (far enough
 * that each is handled alone): for each, when the call began and returned, when the tree announced
 * the build in its new state, and how long after that VS Code fetched its row (if it did).
 */
async function lockEvents(
  worker: Worker,
  probe: TreeProbe,
  staticDir: string,
  tags: readonly string[],
  seen: (op: 'lock' | 'release', before: number, after: number, event: number, fetchMs: number | undefined) => void,
): Promise<void> {
  for (let i = 0; i < EVENTS; i++) {
    const tag = tags[i % tags.length];
    for (const [op, state] of [
      ['lock', 'held'],
      ['release', 'free'],
    ] as const) {
      const shown = probe.expect(staticDir, tag, state, 10_000);
      const [[before, after]] = (await worker.call(op, [tag])) as [[number, number]];
      const { event, fetchMs } = await shown;
      seen(op, before, after, event, fetchMs);
      await sleep(300 + Math.random() * 300);
    }
  }
}

async function latency(api: DevserverStagingApi, probe: TreeProbe, staticDir: string): Promise<void> {
  say(`latency: another process takes or releases a lock -> the tree's item changes (${EVENTS} of each)`);
  await expandBoard(api, staticDir, LATENCY_BOARD);
  const tags = Array.from({ length: LATENCY_BUILDS }, (_, i) => `${LATENCY_BOARD}/R${100 + i}-1.0.0`);
  const worker = new Worker(staticDir);
  const s = {
    lock: { fromBefore: [] as number[], fromAfter: [] as number[], call: [] as number[], fetch: [] as number[] },
    release: { fromBefore: [] as number[], fromAfter: [] as number[], call: [] as number[], fetch: [] as number[] },
  };
  try {
    // Warm-up: the worker loads the core, the extension's paths get their first run.
    for (const tag of tags) {
      const held = probe.expect(staticDir, tag, 'held', 10_000);
      await worker.call('lock', [tag]);
      await held;
      const free = probe.expect(staticDir, tag, 'free', 10_000);
      await worker.call('release', [tag]);
      await free;
    }
    await sleep(500);
    await lockEvents(worker, probe, staticDir, tags, (op, before, after, event, fetchMs) => {
      s[op].fromBefore.push(event - before);
      s[op].fromAfter.push(event - after);
      s[op].call.push(after - before);
      if (fetchMs !== undefined) s[op].fetch.push(fetchMs);
    });
  } finally {
    await worker.stop();
  }
  for (const op of ['lock', 'release'] as const) {
    const v = s[op];
    const a = spread(v.fromBefore);
    const f = spread(v.fetch);
    const what = op === 'lock' ? 'take -> held ' : 'release -> free';
    say(`   ${what}  median ${ms1(a.median).padStart(6)} ms   p95 ${ms1(a.p95).padStart(6)} ms   max ${ms1(a.max).padStart(6)} ms   (${v.fromBefore.length} events)`);
    say(`      the ${op === 'lock' ? 'acquire' : 'release'} call itself took median ${ms1(median(v.call))} ms, max ${ms1(Math.max(...v.call))} ms; counted from its return instead: median ${ms1(median(v.fromAfter))} ms, p95 ${ms1(p95(v.fromAfter))} ms`);
    if (v.fetch.length > 0) {
      say(`      then VS Code fetched the changed item: median +${f.median.toFixed(2)} ms, p95 +${f.p95.toFixed(2)} ms, max +${f.max.toFixed(2)} ms (${v.fetch.length} of ${v.fromBefore.length} events)`);
    } else {
      say('      VS Code did not fetch the changed item within a second (the view is not on screen)');
    }
    figures[`latency: ${what.trim()}, median ms`] = a.median;
    figures[`latency: ${what.trim()}, p95 ms`] = a.p95;
    figures[`latency: ${what.trim()}, max ms`] = a.max;
  }
  say('   (aim: p95 under 300 ms; times are from right before the other process\'s acquire or release call)');
  say();
}

// ---------------------------------------------------------------------------------------------
// CPU of the extension host: nothing held, then 100 locks held (and refreshed) by other processes

interface Window {
  cpuMs: number;
  wallMs: number;
  elu: number;
  work: { listings: number; inspections: number; probes: number };
  events: number;
  getTreeItem: number;
  getChildren: number;
}

async function measureWindow(api: DevserverStagingApi, probe: TreeProbe, ms: number): Promise<Window> {
  const cpu0 = process.cpuUsage();
  const elu0 = performance.eventLoopUtilization();
  const work0 = { ...api.states.work };
  const c0 = { events: probe.events, getTreeItem: probe.getTreeItem, getChildren: probe.getChildren };
  const t0 = performance.now();
  await sleep(ms);
  const cpu = process.cpuUsage(cpu0);
  const elu = performance.eventLoopUtilization(elu0);
  const w = api.states.work;
  return {
    cpuMs: (cpu.user + cpu.system) / 1000,
    wallMs: performance.now() - t0,
    elu: elu.utilization,
    work: { listings: w.listings - work0.listings, inspections: w.inspections - work0.inspections, probes: w.probes - work0.probes },
    events: probe.events - c0.events,
    getTreeItem: probe.getTreeItem - c0.getTreeItem,
    getChildren: probe.getChildren - c0.getChildren,
  };
}

function describeWindow(name: string, w: Window): void {
  const pct = (100 * w.cpuMs) / w.wallMs;
  say(`   ${name.padEnd(26)} CPU ${w.cpuMs.toFixed(0).padStart(6)} ms in ${(w.wallMs / 1000).toFixed(1)} s (${pct.toFixed(2)}% of a core; event loop busy ${(100 * w.elu).toFixed(2)}%)`);
  say(`   ${''.padEnd(26)} listings ${w.work.listings}, inspections ${w.work.inspections}, probes ${w.work.probes}, tree events ${w.events}; VS Code fetched ${w.getTreeItem} items, ${w.getChildren} child lists`);
}

function addWindows(a: Window, b: Window): Window {
  return {
    cpuMs: a.cpuMs + b.cpuMs,
    wallMs: a.wallMs + b.wallMs,
    elu: (a.elu * a.wallMs + b.elu * b.wallMs) / (a.wallMs + b.wallMs),
    work: { listings: a.work.listings + b.work.listings, inspections: a.work.inspections + b.work.inspections, probes: a.work.probes + b.work.probes },
    events: a.events + b.events,
    getTreeItem: a.getTreeItem + b.getTreeItem,
    getChildren: a.getChildren + b.getChildren,
  };
}

/**
 * Two states, measured in alternating windows (nothing held, all held, nothing held, all held)
 * so that a burst of load from elsewhere on the machine is less likely to hit only one of them.
 * Taking and releasing the locks happens between windows, and settles before the next opens.
 */
async function cpu(api: DevserverStagingApi, probe: TreeProbe, staticDir: string): Promise<void> {
  const tags = cpuTags();
  const windowMs = CPU_MS / CPU_ROUNDS;
  say(`extension-host CPU, the tree showing ${tags.length} builds: nothing held, and all held by ${CPU_WORKERS} other processes (heartbeat every 2.5 s);`);
  say(`   ${CPU_MS / 1000} s of each, in ${CPU_ROUNDS} alternating windows of ${windowMs / 1000} s`);
  let shown = 0;
  for (let b = 0; b < CPU_BOARDS; b++) shown += await expandBoard(api, staticDir, `cpu-board-${b}`);
  if (shown !== tags.length) throw new Error(`the tree shows ${shown} builds, not ${tags.length}`);
  const state = (tag: string): string | undefined => api.states.entry(staticDir, tag)?.state;
  const noHolder = (): number => tags.filter((t) => state(t) === 'held' && api.states.entry(staticDir, t)!.holder === undefined).length;

  const workers = Array.from({ length: CPU_WORKERS }, () => new Worker(staticDir));
  const per = Math.ceil(tags.length / CPU_WORKERS);
  const share = (i: number): string[] => tags.slice(i * per, (i + 1) * per);
  let idle: Window | undefined;
  let held: Window | undefined;
  const perWindow: string[] = [];
  const withoutHolder: number[] = [];
  try {
    for (let round = 0; round < CPU_ROUNDS; round++) {
      await sleep(3_000);
      const i = await measureWindow(api, probe, windowMs);
      idle = idle === undefined ? i : addWindows(idle, i);
      await Promise.all(workers.map((w, k) => w.call('lock', share(k))));
      await waitUntil(() => tags.every((t) => state(t) === 'held'), 30_000, `the tree to show all ${tags.length} builds held`);
      // The first heartbeats, and whatever the takes set off, pass before the window opens.
      await sleep(3_000);
      withoutHolder.push(noHolder());
      const h = await measureWindow(api, probe, windowMs);
      held = held === undefined ? h : addWindows(held, h);
      const stillHeld = tags.filter((t) => state(t) === 'held').length;
      if (stillHeld !== tags.length) say(`   (only ${stillHeld} of ${tags.length} were still shown held at the end of a window)`);
      perWindow.push(`${i.cpuMs.toFixed(0)} / ${h.cpuMs.toFixed(0)}`);
      await Promise.all(workers.map((w, k) => w.call('release', share(k))));
      await waitUntil(() => tags.every((t) => state(t) === 'free'), 30_000, `the tree to show all ${tags.length} builds free again`);
    }
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
  }

  describeWindow('nothing held:', idle!);
  describeWindow(`${tags.length} held elsewhere:`, held!);
  say(`   CPU per window, nothing held / held: ${perWindow.join(', ')} ms`);
  const ratio = held!.cpuMs / idle!.cpuMs;
  const extra = held!.cpuMs - idle!.cpuMs;
  say(`   ratio ${ratio.toFixed(2)}x; extra CPU ${(extra / (held!.wallMs / 1000)).toFixed(1)} ms per second` + (held!.work.probes > 0 ? ` (${((1000 * extra) / held!.work.probes).toFixed(0)} µs per heartbeat seen)` : ''));
  say(`   builds shown held but without their holder when a held window opened: ${withoutHolder.join(', ')} (of ${tags.length})`);
  say('   (aim: no listings, no inspections and no tree events while nothing changes state)');
  say();
  figures['cpu: nothing held, ms per minute'] = (idle!.cpuMs * 60_000) / idle!.wallMs;
  figures['cpu: 100 held, ms per minute'] = (held!.cpuMs * 60_000) / held!.wallMs;
  figures['cpu: ratio held/nothing'] = ratio;
  figures['cpu: 100 held, listings per minute'] = (held!.work.listings * 60_000) / held!.wallMs;
  figures['cpu: 100 held, inspections per minute'] = (held!.work.inspections * 60_000) / held!.wallMs;
  figures['cpu: 100 held, probes per minute'] = (held!.work.probes * 60_000) / held!.wallMs;
  figures['cpu: 100 held, tree events per minute'] = (held!.events * 60_000) / held!.wallMs;
  figures['cpu: shown held without holder'] = withoutHolder.reduce((a, b) => a + b, 0);
}

// ---------------------------------------------------------------------------------------------
// Scale: one folder of many builds, expanded and filtered in the view on screen

/** Resolves when VS Code has stopped fetching items for `quietMs`: the time of its last fetch. */
async function lastFetch(probe: TreeProbe, started: number, quietMs = 250): Promise<number> {
  let seen = probe.getTreeItem;
  let last = performance.now();
  for (;;) {
    await sleep(10);
    if (probe.getTreeItem !== seen) {
      seen = probe.getTreeItem;
      last = performance.now();
    } else if (performance.now() - last >= quietMs) {
      return last - started;
    }
  }
}

async function scale(api: DevserverStagingApi, probe: TreeProbe, staticDir: string): Promise<void> {
  const folder = 'scale-board';
  const root = path.join(staticDir, folder);
  const started = performance.now();
  for (let i = 0; i < SCALE_BUILDS; i++) {
    const dir = path.join(root, `R${100 + (i % 50)}-${15000 + i}.0.0`);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'staged.timestamp'), '');
  }
  say(`scale: made ${SCALE_BUILDS} builds in one folder in ${ms1(performance.now() - started)} ms`);
  // A few held, so that a state filter has something to find.
  for (const i of [7, 4242, 9001].filter((n) => n < SCALE_BUILDS)) fs.mkdirSync(path.join(root, `R${100 + (i % 50)}-${15000 + i}.0.0`, 'devserver.lock'));
  const heap0 = process.memoryUsage().heapUsed;
  const lag = monitorEventLoopDelay({ resolution: 5 });
  lag.enable();
  const scanStart = performance.now();
  api.states.reset();
  await waitUntil(() => api.states.buildsUnder(staticDir, folder).length >= SCALE_BUILDS, 120_000, 'the scan of the big folder');
  const scanMs = performance.now() - scanStart;
  lag.disable();
  const heapMb = (process.memoryUsage().heapUsed - heap0) / 1048576;
  say(`scale: scanned ${SCALE_BUILDS} builds in ${ms1(scanMs)} ms; longest event-loop delay ${ms1(lag.max / 1e6)} ms; heap +${heapMb.toFixed(1)} MB`);
  figures['scale: scan, ms'] = scanMs;
  figures['scale: scan, longest event-loop delay, ms'] = lag.max / 1e6;
  figures['scale: heap after scan, MB more'] = heapMb;

  const collapse = (): Thenable<unknown> => vscode.commands.executeCommand('workbench.actions.treeView.devserverStaging.areas.collapseAll');
  const expand: number[] = [];
  const filter: number[] = [];
  const clear: number[] = [];
  for (let round = 0; round < SCALE_ROUNDS; round++) {
    // Shown afresh, so that VS Code asks for every row again rather than showing what it kept.
    api.tree.refresh();
    await collapse();
    await lastFetch(probe, performance.now());
    const node = api.tree.nodeFor(staticDir, folder);
    if (node === undefined) throw new Error(`the tree has no node for ${folder}`);
    let t = performance.now();
    await api.view.reveal(node, { select: false, focus: false, expand: true });
    expand.push(await lastFetch(probe, t));
    t = performance.now();
    await vscode.commands.executeCommand('devserverStaging.filter', { text: `R${100 + round}-` });
    filter.push(await lastFetch(probe, t));
    t = performance.now();
    await vscode.commands.executeCommand('devserverStaging.clearFilter');
    clear.push(await lastFetch(probe, t));
  }
  // The provider's own share: the children and every row, without VS Code around them.
  const own: number[] = [];
  for (let round = 0; round < SCALE_ROUNDS; round++) {
    const node = api.tree.nodeFor(staticDir, folder)!;
    const t = performance.now();
    for (const child of await api.tree.getChildren(node)) api.tree.getTreeItem(child);
    own.push(performance.now() - t);
  }
  const o = spread(own);
  say(`scale: the provider alone, children and rows of that folder: median ${ms1(o.median)} ms`);
  figures['scale: provider rows 10k, median ms'] = o.median;
  const e = spread(expand);
  const f = spread(filter);
  const c = spread(clear);
  say(`scale: expand a folder of ${SCALE_BUILDS} builds: median ${ms1(e.median)} ms, max ${ms1(e.max)} ms (until VS Code stops fetching rows)`);
  say(`scale: filter it by text: median ${ms1(f.median)} ms, max ${ms1(f.max)} ms; clear the filter: median ${ms1(c.median)} ms, max ${ms1(c.max)} ms`);
  figures['scale: expand 10k, median ms'] = e.median;
  figures['scale: filter 10k, median ms'] = f.median;
  figures['scale: clear filter 10k, median ms'] = c.median;
}


// ---------------------------------------------------------------------------------------------
// Scan: a static directory of 100,000 builds in 10 folders, from the setting that names it until
// the tree shows every folder with its count

/** Runs `script` in another Node process: work on 100,000 directories would hold this host for seconds. */
function inChild(script: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', script, ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ELECTRON_RUN_AS_NODE: '1' } });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`a helper process failed (${code}): ${stderr}`))));
  });
}

/** Builds in folders board-0, board-1, …; with `sized`, each with a file of its own size (so that sorting by size means something). */
const MAKE_BUILDS = `
const fs = require('fs'), path = require('path');
const [dir, folders, per, sized] = [process.argv[1], Number(process.argv[2]), Number(process.argv[3]), process.argv[4] === 'sized'];
for (let f = 0; f < folders; f++) {
  for (let i = 0; i < per; i++) {
    const b = path.join(dir, 'board-' + f, 'R' + (100 + (i % 50)) + '-' + (15000 + i) + '.0.0');
    fs.mkdirSync(b, { recursive: true });
    if (sized) fs.writeFileSync(path.join(b, 'image.bin'), Buffer.alloc(1 + ((i * 7919) % 8192)));
    fs.writeFileSync(path.join(b, 'staged.timestamp'), '');
  }
}`;

/**
 * A full garbage collection, so that heap figures tell what is alive rather than what is left
 * over: the extension host has no `--expose-gc`, but a flag set at run time gives a new context
 * its `gc`. False where that does not work.
 */
function collectGarbage(): boolean {
  try {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as unknown;
    if (typeof gc !== 'function') return false;
    (gc as () => void)();
    return true;
  } catch {
    return false;
  }
}

/** This thread's CPU time in ms (NaN where Node cannot tell it from the process's). */
function threadCpuMs(): number {
  const f = (process as { threadCpuUsage?: () => NodeJS.CpuUsage }).threadCpuUsage;
  if (f === undefined) return NaN;
  const u = f.call(process);
  return (u.user + u.system) / 1000;
}

const mb = (bytes: number): string => `${(bytes / 1048576).toFixed(0)} MB`;

/**
 * With DEVSERVER_STAGING_BENCH_PROFILE set, starts V8's sampling profiler in this extension host;
 * the function returned stops it and writes the profile there (open it in a browser's devtools).
 */
async function startProfile(): Promise<(() => Promise<void>) | undefined> {
  const dir = env['DEVSERVER_STAGING_BENCH_PROFILE'];
  if (dir === undefined || dir === '') return undefined;
  const session = new inspector.Session();
  session.connect();
  const post = (method: string, params?: object): Promise<unknown> =>
    new Promise((resolve, reject) => session.post(method, params, (err, result) => (err !== null ? reject(err) : resolve(result))));
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: 200 });
  await post('Profiler.start');
  return async () => {
    const { profile } = (await post('Profiler.stop')) as { profile: unknown };
    session.disconnect();
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(dir, 'scan.cpuprofile');
    fs.writeFileSync(file, JSON.stringify(profile));
    say(`scan: CPU profile written to ${file}`);
  };
}

async function scan(api: DevserverStagingApi, probe: TreeProbe, smallDir: string): Promise<void> {
  const per = Math.ceil(SCAN_BUILDS / SCAN_FOLDERS);
  const total = per * SCAN_FOLDERS;
  const staticDir = path.join(path.dirname(smallDir), 'scan-static');
  let t = performance.now();
  await inChild(MAKE_BUILDS, [staticDir, String(SCAN_FOLDERS), String(per)]);
  say(`scan: made ${total} builds in ${SCAN_FOLDERS} folders (in another process) in ${ms1(performance.now() - t)} ms`);
  const config = vscode.workspace.getConfiguration('devserverStaging');
  const folders = Array.from({ length: SCAN_FOLDERS }, (_, f) => `board-${f}`);
  const counted = `${new Intl.NumberFormat().format(per)} builds`;
  const shown = (): number => folders.filter((f) => String(probe.folderItems.get(f)?.description ?? '').startsWith(counted)).length;
  const listed = (): number => folders.filter((f) => api.states.record(staticDir, f)?.children?.length === per).length;
  try {
    await sleep(2_000);
    const collected = collectGarbage();
    const before = process.memoryUsage();
    probe.folderItems.clear();
    // Starting V8's profiler holds the thread for tens of milliseconds (it walks every script
    // loaded): started before the probe, so that its own block is not counted as the scan's.
    const profiler = await startProfile();
    const blocks = new BlockProbe();
    const start = performance.now();
    const scanCpu0 = process.cpuUsage();
    const thread0 = threadCpuMs();
    const listedAt: number[] = [];
    const onListed = api.states.onDidList((ref) => {
      if (ref.staticDir === staticDir && ref.tag !== '') listedAt.push(performance.now() - start);
    });
    // What activation does with a static directory (scan it, show it in the status bar and the
    // tree) is what a change of the setting does: the model starts over on the new directory.
    await config.update('staticDirs', [staticDir], vscode.ConfigurationTarget.Global);
    let scannedMs = NaN;
    let shownMs = NaN;
    try {
      await waitUntil(
        () => {
          if (Number.isNaN(scannedMs) && listed() === SCAN_FOLDERS) scannedMs = performance.now() - start;
          if (Number.isNaN(shownMs) && shown() === SCAN_FOLDERS) shownMs = performance.now() - start;
          return !Number.isNaN(scannedMs) && !Number.isNaN(shownMs);
        },
        180_000,
        `the model to list every folder and the tree to show ${SCAN_FOLDERS} folders with "${counted}"`,
      );
    } catch (err) {
      say(`scan: ${err instanceof Error ? err.message : String(err)}`);
      say(`scan: listed ${listed()} of ${SCAN_FOLDERS} folders; the rows show: ${folders.map((f) => `${f} "${String(probe.folderItems.get(f)?.description ?? '(not fetched)')}"`).join(', ')}`);
    }
    await api.states.settled();
    const doneMs = performance.now() - start;
    const block = blocks.stop();
    await profiler?.();
    onListed.dispose();
    const scanCpu = process.cpuUsage(scanCpu0);
    const threadMs = threadCpuMs() - thread0;
    const unCollected = process.memoryUsage();
    collectGarbage();
    const after = process.memoryUsage();
    const builds = api.states.buildsUnder(staticDir, '').length;
    say(`scan: ${builds} builds known; every folder listed after ${ms1(scannedMs)} ms, the tree showed ${SCAN_FOLDERS} folders with "${counted}" after ${ms1(shownMs)} ms, all settled after ${ms1(doneMs)} ms`);
    say(`scan: folders listed at ${listedAt.map((t) => `${(t / 1000).toFixed(1)}`).join(', ')} s`);
    say(`scan: CPU of the extension host meanwhile ${((scanCpu.user + scanCpu.system) / 1000).toFixed(0)} ms, of its main thread ${ms1(threadMs)} ms`);
    say(`scan: longest event-loop block in the extension host ${ms1(block.wallMs)} ms (${blocks.describe()})`);
    say(
      `scan: heapUsed ${mb(before.heapUsed)} -> ${mb(after.heapUsed)} (+${mb(after.heapUsed - before.heapUsed)}; ${mb(unCollected.heapUsed)} before ` +
        `${collected ? 'a full garbage collection' : 'garbage collection (none could be forced here: figures include garbage)'}), RSS ${mb(before.rss)} -> ${mb(after.rss)} (+${mb(after.rss - before.rss)})`,
    );
    figures['scan 100k: every folder listed, ms'] = scannedMs;
    figures['scan 100k: tree shows the folders with counts, ms'] = shownMs;
    figures['scan 100k: main thread CPU until settled, ms'] = threadMs;
    figures['scan 100k: longest event-loop block, ms'] = block.wallMs;
    figures['scan 100k: most thread CPU in one block, ms'] = block.cpuMs;
    figures['scan 100k: heapUsed after, MB'] = after.heapUsed / 1048576;
    figures['scan 100k: heapUsed added, MB'] = (after.heapUsed - before.heapUsed) / 1048576;
    figures['scan 100k: RSS added, MB'] = (after.rss - before.rss) / 1048576;

    // Then nothing happens: what 100,000 builds followed cost while idle (after the collection's
    // own work in the background has ended).
    await sleep(2_000);
    const idleBlocks = new BlockProbe();
    const cpu0 = process.cpuUsage();
    t = performance.now();
    await sleep(10_000);
    const cpu = process.cpuUsage(cpu0);
    const idleBlock = idleBlocks.stop();
    const idleMs = performance.now() - t;
    const later = process.memoryUsage();
    say(`scan: then idle for ${(idleMs / 1000).toFixed(0)} s: CPU ${((cpu.user + cpu.system) / 1000).toFixed(0)} ms, longest block ${ms1(idleBlock.wallMs)} ms (${idleBlocks.describe()}); heapUsed ${mb(later.heapUsed)}, RSS ${mb(later.rss)}`);
    figures['scan 100k: idle CPU, ms per 10 s'] = ((cpu.user + cpu.system) / 1000) * (10_000 / idleMs);

    // A folder of 10,000 opened in the view.
    const node = api.tree.nodeFor(staticDir, folders[0]);
    if (node !== undefined) {
      const expandBlocks = new BlockProbe();
      t = performance.now();
      await api.view.reveal(node, { select: false, focus: false, expand: true });
      const expandMs = await lastFetch(probe, t);
      const expandBlock = expandBlocks.stop();
      say(`scan: expand one folder of ${per}: ${ms1(expandMs)} ms until VS Code stopped fetching rows, longest block ${ms1(expandBlock.wallMs)} ms (${expandBlocks.describe()})`);
      figures['scan 100k: expand a folder, longest block, ms'] = expandBlock.wallMs;
      figures['scan 100k: expand a folder, most thread CPU in one block, ms'] = expandBlock.cpuMs;
    }
  } finally {
    // The model lets go of the directory (and its watches) before it goes.
    await config.update('staticDirs', [smallDir], vscode.ConfigurationTarget.Global);
    await sleep(500);
    await inChild("require('fs').rmSync(process.argv[1], { recursive: true, force: true })", [staticDir]);
  }
  say();
}
// ---------------------------------------------------------------------------------------------
// Big: 3 folders of 5,000 builds, one expanded, builds sorted by size with size and last use
// shown: how fast a lock change shows, and what lock traffic costs in memory

/** Memory of the extension host after a full collection: heap in use and RSS, in MB. */
function memoryNow(): { heap: number; rss: number } {
  collectGarbage();
  const m = process.memoryUsage();
  return { heap: m.heapUsed / 1048576, rss: m.rss / 1048576 };
}

async function big(api: DevserverStagingApi, probe: TreeProbe, smallDir: string): Promise<void> {
  const staticDir = path.join(path.dirname(smallDir), 'big-static');
  let t = performance.now();
  await inChild(MAKE_BUILDS, [staticDir, String(BIG_FOLDERS), String(BIG_BUILDS), 'sized']);
  say(`big: made ${BIG_FOLDERS} folders of ${BIG_BUILDS} builds (in another process) in ${ms1(performance.now() - t)} ms`);
  const config = vscode.workspace.getConfiguration('devserverStaging');
  const folders = Array.from({ length: BIG_FOLDERS }, (_, f) => `board-${f}`);
  // The last folder: expanded, the others' rows stay above its builds, on screen.
  const folder = folders[folders.length - 1];
  const worker = new Worker(staticDir);
  try {
    await config.update('sortBuilds', 'size', vscode.ConfigurationTarget.Global);
    await config.update('showSizeAndLastUse', true, vscode.ConfigurationTarget.Global);
    await config.update('staticDirs', [staticDir], vscode.ConfigurationTarget.Global);
    await waitUntil(() => folders.every((f) => api.states.record(staticDir, f)?.children?.length === BIG_BUILDS), 180_000, 'every folder listed');
    const node = api.tree.nodeFor(staticDir, folder);
    if (node === undefined) throw new Error(`the tree has no node for ${folder}`);
    t = performance.now();
    await api.view.reveal(node, { select: false, focus: false, expand: true });
    await waitUntil(() => api.states.buildsUnder(staticDir, folder).every((r) => r.usage !== undefined), 180_000, `the sizes of ${folder}'s builds`);
    await lastFetch(probe, t, 1_000);
    say(`big: ${folder} expanded and its sizes shown after ${ms1(performance.now() - t)} ms`);
    // The builds its page shows first (the largest): on screen.
    const tags = (await api.tree.getChildren(node)).filter((n) => n.kind === 'build').slice(0, 5).map((n) => (n.kind === 'build' ? n.tag : ''));

    // A lock taken or released by another process -> VS Code fetched the build's row in its new state.
    const shown: Record<'lock' | 'release', number[]> = { lock: [], release: [] };
    const event: Record<'lock' | 'release', number[]> = { lock: [], release: [] };
    let unseen = 0;
    await lockEvents(worker, probe, staticDir, tags, (op, before, _after, at, fetchMs) => {
      event[op].push(at - before);
      if (fetchMs === undefined) unseen++;
      else shown[op].push(at - before + fetchMs);
    });
    for (const op of ['lock', 'release'] as const) {
      const e = spread(event[op]);
      const f = spread(shown[op]);
      const what = op === 'lock' ? 'take -> held ' : 'release -> free';
      say(`big: ${what}  shown (VS Code fetched the row): median ${ms1(f.median).padStart(6)} ms   p95 ${ms1(f.p95).padStart(6)} ms   max ${ms1(f.max).padStart(6)} ms;  tree event: median ${ms1(e.median)} ms, p95 ${ms1(e.p95)} ms`);
      figures[`big: ${what.trim()}, shown, median ms`] = f.median;
      figures[`big: ${what.trim()}, shown, p95 ms`] = f.p95;
      figures[`big: ${what.trim()}, tree event, p95 ms`] = e.p95;
    }
    say(`big: ${unseen} of ${2 * EVENTS} changes were not fetched by VS Code within a second of the tree's event (aim: none; p95 under 150 ms)`);
    figures['big: changes not shown within a second'] = unseen;

    // Lock traffic: memory after 100 cycles and after all of them, and once idle.
    await sleep(2_000);
    const m0 = memoryNow();
    const cpu0 = process.cpuUsage();
    t = performance.now();
    let m100 = m0;
    const state = (tag: string): string | undefined => api.states.entry(staticDir, tag)?.state;
    for (let i = 1; i <= CYCLES; i++) {
      const tag = tags[i % tags.length];
      await worker.call('lock', [tag]);
      await waitUntil(() => state(tag) === 'held', 10_000, `${tag} held`);
      await worker.call('release', [tag]);
      await waitUntil(() => state(tag) === 'free', 10_000, `${tag} free`);
      if (i === 100) {
        await sleep(1_000);
        m100 = memoryNow();
      }
    }
    const cycleMs = (performance.now() - t) / CYCLES;
    const cpu = process.cpuUsage(cpu0);
    await sleep(1_000);
    const mAll = memoryNow();
    await sleep(10_000);
    const mIdle = memoryNow();
    say(`big: ${CYCLES} lock cycles, ${ms1(cycleMs)} ms each, host CPU ${(((cpu.user + cpu.system) / 1000) / CYCLES).toFixed(1)} ms each`);
    say(`big: host memory after a full collection: before ${m0.heap.toFixed(0)} MB heap / ${m0.rss.toFixed(0)} MB RSS; after 100 cycles ${m100.heap.toFixed(0)} / ${m100.rss.toFixed(0)}; after ${CYCLES} ${mAll.heap.toFixed(0)} / ${mAll.rss.toFixed(0)}; 10 s idle ${mIdle.heap.toFixed(0)} / ${mIdle.rss.toFixed(0)}`);
    say(`big: after ${CYCLES} against after 100: heap ${((100 * mAll.heap) / m100.heap - 100).toFixed(1)}%, RSS ${((100 * mAll.rss) / m100.rss - 100).toFixed(1)}% (aim: within 10%)`);
    figures['big: cycle, ms'] = cycleMs;
    figures['big: host CPU per cycle, ms'] = (cpu.user + cpu.system) / 1000 / CYCLES;
    figures['big: heap after 100 cycles, MB'] = m100.heap;
    figures['big: heap after all cycles, MB'] = mAll.heap;
    figures['big: RSS after 100 cycles, MB'] = m100.rss;
    figures['big: RSS after all cycles, MB'] = mAll.rss;
    figures['big: RSS idle after, MB'] = mIdle.rss;
  } finally {
    await worker.stop();
    await config.update('sortBuilds', undefined, vscode.ConfigurationTarget.Global);
    await config.update('showSizeAndLastUse', undefined, vscode.ConfigurationTarget.Global);
    await config.update('staticDirs', [smallDir], vscode.ConfigurationTarget.Global);
    await sleep(500);
    await inChild("require('fs').rmSync(process.argv[1], { recursive: true, force: true })", [staticDir]);
  }
  say();
}

// ---------------------------------------------------------------------------------------------

export async function run(): Promise<void> {
  const staticDir = ['latency', 'cpu', 'scale', 'scan', 'big', 'usage'].some((p) => PARTS.has(p)) ? makeStaticDir() : undefined;
  const config = vscode.workspace.getConfiguration('devserverStaging');
  if (staticDir !== undefined) await config.update('staticDirs', [staticDir], vscode.ConfigurationTarget.Global);
  const api = await activate();
  if (staticDir === undefined) return writeFigures();

  const probe = new TreeProbe(api);
  try {
    // The view on screen, as a user would have it.
    await vscode.commands.executeCommand('workbench.view.extension.devserverStaging');
    await waitUntil(() => api.view.visible, 10_000, 'the view to be visible').catch(() => say('(the view did not become visible: VS Code will not fetch items)'));
    if (PARTS.has('latency')) await latency(api, probe, staticDir);
    if (PARTS.has('cpu')) await cpu(api, probe, staticDir);
    if (PARTS.has('scale')) await scale(api, probe, staticDir);
    if (PARTS.has('scan')) await scan(api, probe, staticDir);
    if (PARTS.has('big')) await big(api, probe, staticDir);
    if (PARTS.has('usage')) await usagePart(say, figures, Number(env['DEVSERVER_STAGING_BENCH_USAGE_BUILDS'] ?? 5_000), Number(env['DEVSERVER_STAGING_BENCH_USAGE_EVENTS'] ?? 100_000));
  } finally {
    probe.dispose();
    await config.update('staticDirs', undefined, vscode.ConfigurationTarget.Global);
    fs.rmSync(path.dirname(staticDir), { recursive: true, force: true });
  }
  writeFigures();
}

function writeFigures(): void {
  const out = env['DEVSERVER_STAGING_BENCH_OUT'];
  if (out) fs.writeFileSync(out, JSON.stringify(figures, null, 2));
}
