/**
 * The extension's model of a static directory (src/extension/model/), under plain mocha on real
 * directories and real locks: which directories are builds and which are folders, what a folder
 * counts, what is bookkeeping, how it follows other processes' locks (with its watches in this
 * thread, as the command line keeps them, and in a worker thread, as the extension does), and the
 * filter and order.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { acquire, forceRelease, LockStates, naturalOrder, stage, threadWatcher, type AreaRecord, type Counts, type Lease, type StateChange } from '../../../src/core';
import { ThreadWatcher } from '../../../src/core/watch/threadWatcher';
import { NewsBatch } from '../../../src/core/watch/watchProtocol';
import { inThreadWatcher, type WatchEvent, type WatcherFactory } from '../../../src/core/watch/watcher';
import { Mine, type WindowLease } from '../../../src/extension/model/mine';
import { matches, sortBuilds, NO_FILTER } from '../../../src/extension/model/view';
import { cleanup, cli, run, tempDir, waitFor } from '../../helpers';
import { PYTHON, python } from '../../fixtures';

const timing = { staleMs: 4_000, refreshMs: 1_000 };
const quiet = { warn: (): void => undefined };

/** A build as tools leave it: a file and the mark of staging. */
function build(staticDir: string, tag: string, mark = 'staged.timestamp'): void {
  const dir = path.join(staticDir, tag);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'image.bin'), Buffer.alloc(1024, 7));
  fs.writeFileSync(path.join(dir, mark), '');
}

async function scanned(staticDir: string, watcher: WatcherFactory): Promise<LockStates> {
  const states = new LockStates(timing, quiet, { watcher });
  states.scan([staticDir]);
  await waitFor(() => (states.buildsUnder(staticDir, '').length > 0 && (states.record(staticDir, 'eve')?.children !== undefined) ? true : undefined), 5_000, 'the scan');
  return states;
}

// The extension keeps its watches in a worker thread; the command line and the library in their own.
const WATCHERS: [string, WatcherFactory][] = [
  ['watches in this thread', inThreadWatcher],
  ['watches in a worker thread', threadWatcher],
];

for (const [where, watcher] of WATCHERS) {
  describe(`the model of builds and folders, ${where}`, function () {
    let staticDir: string;
    let states: LockStates | undefined;

    beforeEach(() => {
      staticDir = tempDir('dss-model-');
    });
    afterEach(() => {
      states?.dispose();
      states = undefined;
      cleanup(staticDir);
      cleanup(`${staticDir}-src`);
    });

    it('tells builds from the folders that group them, at any depth, without anyone expanding anything', async () => {
      build(staticDir, 'eve/R9-1.0.0');
      build(staticDir, 'eve/R10-1.0.0');
      build(staticDir, 'eve/R120-1.0.0');
      build(staticDir, 'lab/octopus/R1-0.0.1');
      // A directory inside a build is an artifact folder, never a build of its own.
      fs.mkdirSync(path.join(staticDir, 'eve/R120-1.0.0/sub'));
      fs.writeFileSync(path.join(staticDir, 'eve/R120-1.0.0/sub/staged.timestamp'), '');
      states = await scanned(staticDir, watcher);
      await waitFor(() => (states!.record(staticDir, 'lab/octopus/R1-0.0.1') !== undefined ? true : undefined), 5_000, 'the nested build');
      assert.equal(states.record(staticDir, 'eve')?.kind, 'folder');
      assert.equal(states.record(staticDir, 'lab')?.kind, 'folder');
      assert.equal(states.record(staticDir, 'lab/octopus')?.kind, 'folder');
      assert.equal(states.record(staticDir, 'eve/R120-1.0.0')?.kind, 'build');
      assert.equal(states.record(staticDir, 'eve/R120-1.0.0/sub'), undefined);
      assert.deepEqual(states.buildsUnder(staticDir, 'eve').map((r) => r.tag).sort(), ['eve/R10-1.0.0', 'eve/R120-1.0.0', 'eve/R9-1.0.0']);
      assert.equal(states.buildsUnder(staticDir, '').length, 4);
      const none = (): boolean => false;
      assert.deepEqual(states.counts(staticDir, 'eve', none), { builds: 3, held: 0, stale: 0, legacy: 0, mine: 0 });
      assert.deepEqual(states.counts(staticDir, 'lab', none), { builds: 1, held: 0, stale: 0, legacy: 0, mine: 0 });
      // Whose builds are whose comes from an owner whose version says when its answers change:
      // its counts are kept until then, and no one outside the model has to say they are stale.
      const ours = new Set<string>();
      const owner = { has: (r: AreaRecord) => ours.has(r.tag), refs: () => [...ours].map((tag) => ({ staticDir, tag })), version: 0 };
      assert.equal(states.counts(staticDir, 'eve', owner).mine, 0);
      ours.add('eve/R10-1.0.0');
      assert.equal(states.counts(staticDir, 'eve', owner).mine, 0, 'kept while the owner says nothing changed');
      owner.version++;
      assert.equal(states.counts(staticDir, 'eve', owner).mine, 1, 'counted again once it did');
    });

    it('lists a build\'s artifacts and artifact folders, never its bookkeeping', async () => {
      await stage(staticDir, 'eve/R1', [writeSource(staticDir)], timing);
      states = new LockStates(timing, quiet, { watcher });
      states.scan([staticDir]);
      const eve = await states.children(staticDir, 'eve');
      assert.deepEqual(eve.map((r) => [r.tag, r.kind]), [['eve/R1', 'build']]);
      const lease = await acquire(staticDir, 'eve/R1', { ...timing, createOnce: false });
      try {
        const top = await states.artifacts(staticDir, 'eve/R1');
        assert.deepEqual(top.map((a) => `${a.name}${a.directory ? '/' : ''}`), ['sub/', 'a.txt']);
        const sub = await states.artifactDir(staticDir, 'eve/R1', 'sub');
        assert.deepEqual(sub.map((a) => a.rel), ['sub/b.bin']);
      } finally {
        await lease.release();
      }
    });

    it('leaves out the file a Python devserver lock is a link to, and counts the legacy lock', async function () {
      if (!fs.existsSync(PYTHON) || (await python('import lockfile').then(() => false, () => true))) this.skip();
      build(staticDir, 'eve/R1');
      await python('import lockfile,sys; lockfile.FileLock(sys.argv[1]).acquire(timeout=0)', path.join(staticDir, 'eve/R1', 'devserver'));
      const names = fs.readdirSync(path.join(staticDir, 'eve/R1'));
      assert.ok(names.length >= 4, `the Python lock left its link file: ${names.join(', ')}`);
      states = await scanned(staticDir, watcher);
      assert.equal(states.entry(staticDir, 'eve/R1')?.state, 'legacy');
      assert.deepEqual((await states.artifacts(staticDir, 'eve/R1')).map((a) => a.name), ['image.bin']);
      assert.equal(states.counts(staticDir, '', () => false).legacy, 1);
    });

    it('follows locks other processes take and release, naming only the build that changed', async () => {
      build(staticDir, 'eve/R1');
      build(staticDir, 'eve/R2');
      states = await scanned(staticDir, watcher);
      const seen: StateChange[] = [];
      states.onDidChange((c) => seen.push(...c));
      const lease = await acquire(staticDir, 'eve/R1', { ...timing, createOnce: false, clientId: 'someone-else' });
      await waitFor(() => (states!.entry(staticDir, 'eve/R1')?.state === 'held' ? true : undefined), 3_000, 'R1 held');
      assert.ok(seen.some((c) => c.tag === 'eve/R1' && c.what === 'state'));
      assert.ok(!seen.some((c) => c.tag === 'eve/R2'), 'R2 did not change');
      assert.deepEqual(states.counts(staticDir, 'eve', () => false), { builds: 2, held: 1, stale: 0, legacy: 0, mine: 0 });
      await lease.release();
      await waitFor(() => (states!.entry(staticDir, 'eve/R1')?.state === 'free' ? true : undefined), 3_000, 'R1 free');
    });

    it('sees a new build staged into a folder, and a folder that turns into a build', async () => {
      build(staticDir, 'eve/R1');
      fs.mkdirSync(path.join(staticDir, 'eve/R2'));
      states = await scanned(staticDir, watcher);
      assert.equal(states.record(staticDir, 'eve/R2')?.kind, 'folder');
      const seen: StateChange[] = [];
      states.onDidChange((c) => seen.push(...c));
      await stage(staticDir, 'eve/R3', [writeSource(staticDir)], timing);
      await waitFor(() => (states!.record(staticDir, 'eve/R3')?.kind === 'build' ? true : undefined), 3_000, 'R3 as a build');
      assert.ok(seen.some((c) => c.tag === 'eve' && c.what === 'children'));
      fs.writeFileSync(path.join(staticDir, 'eve/R2/staged.timestamp'), '');
      await waitFor(() => (states!.record(staticDir, 'eve/R2')?.kind === 'build' ? true : undefined), 3_000, 'R2 as a build');
      fs.rmSync(path.join(staticDir, 'eve/R1'), { recursive: true });
      await waitFor(() => (states!.record(staticDir, 'eve/R1') === undefined ? true : undefined), 3_000, 'R1 gone');
      assert.equal(states.buildsUnder(staticDir, 'eve').length, 2);
    });

    it('knows this window\'s locks by its leases and its stagings with their progress', async () => {
      build(staticDir, 'eve/R1');
      build(staticDir, 'eve/R2');
      states = await scanned(staticDir, watcher);
      const leases = new Map<string, WindowLease>();
      const mine = new Mine((d, t) => (d === staticDir ? leases.get(t) : undefined));
      const lease = await acquire(staticDir, 'eve/R1', { ...timing, createOnce: false, clientId: 'vscode:test-window' });
      leases.set('eve/R1', { token: lease.holder.token, since: Date.now() });
      try {
        await waitFor(() => (states!.entry(staticDir, 'eve/R1')?.state === 'held' ? true : undefined), 3_000, 'R1 held');
        const isMine = (r: AreaRecord): boolean => mine.has(r);
        assert.deepEqual(states.counts(staticDir, 'eve', isMine), { builds: 2, held: 0, stale: 0, legacy: 0, mine: 1 });
        let release!: () => void;
        const fractions: (number | undefined)[] = [];
        mine.onDidChange(() => fractions.push(mine.staging({ staticDir, tag: 'eve/R2' })?.fraction));
        const running = mine.track({ staticDir, tag: 'eve/R2' }, (report) => {
          report(0.421);
          report(0.4215);
          return new Promise<void>((r) => (release = r));
        });
        assert.equal(mine.stagingCount, 1);
        assert.ok(mine.has({ staticDir, tag: 'eve/R2' }));
        release();
        await running;
        assert.equal(mine.stagingCount, 0);
        // Started, 42 %, ended: the second report was the same whole percent.
        assert.deepEqual(fractions, [undefined, 0.421, undefined]);
      } finally {
        await lease.release();
      }
    });

    it('measures size and last use on request, and marks a damaged build until it is whole again', async () => {
      build(staticDir, 'eve/R1');
      states = await scanned(staticDir, watcher);
      await states.measure(staticDir, 'eve');
      const r = states.record(staticDir, 'eve/R1')!;
      assert.ok(r.usage !== undefined && r.usage.bytes >= 1024, JSON.stringify(r.usage));
      const seen: StateChange[] = [];
      states.onDidChange((c) => seen.push(...c));
      states.markDamaged(staticDir, 'eve/R1', '1 file changed');
      assert.equal(states.record(staticDir, 'eve/R1')?.damaged, '1 file changed');
      states.markDamaged(staticDir, 'eve/R1', undefined);
      assert.equal(states.record(staticDir, 'eve/R1')?.damaged, undefined);
      assert.equal(seen.length, 2);
    });
  });

  describe(`the model at scale: counts kept as records change, listings taken in slices, ${where}`, function () {
    let staticDir: string;
    let other: string;
    let states: LockStates | undefined;

    beforeEach(() => {
      staticDir = tempDir('dss-model-scale-');
      other = tempDir('dss-model-scale-other-');
    });
    afterEach(() => {
      states?.dispose();
      states = undefined;
      cleanup(staticDir);
      cleanup(other);
    });

    /** The counts as a pass over every build below would give them: what the kept tallies must equal. */
    function recount(s: LockStates, tag: string, mine: (r: AreaRecord) => boolean = () => false): Counts {
      const c: Counts = { builds: 0, held: 0, stale: 0, legacy: 0, mine: 0 };
      for (const r of s.builds((b) => b.staticDir === staticDir && (tag === '' || b.tag === tag || b.tag.startsWith(`${tag}/`)))) {
        c.builds++;
        if (mine(r)) c.mine++;
        else if (r.lock?.state === 'held' || r.lock?.state === 'stale' || r.lock?.state === 'legacy') c[r.lock.state]++;
      }
      return c;
    }

    function agree(s: LockStates, what: string): void {
      for (const tag of ['', 'eve', 'lab', 'lab/octopus']) {
        assert.deepEqual(s.counts(staticDir, tag, () => false), recount(s, tag), `${what}: the counts of '${tag}'`);
      }
    }

    it('keeps every folder\'s counts equal to a recount through locks, new builds, removals and a folder turned build', async () => {
      for (let i = 0; i < 30; i++) build(staticDir, `eve/R${i}`);
      build(staticDir, 'lab/octopus/R1');
      build(staticDir, 'lab/R2');
      fs.mkdirSync(path.join(staticDir, 'lab/later'));
      states = await scanned(staticDir, watcher);
      await waitFor(() => (states!.record(staticDir, 'lab/octopus/R1') !== undefined && states!.record(staticDir, 'lab/later')?.children !== undefined ? true : undefined), 5_000, 'the nested folders');
      agree(states, 'after the scan');
      assert.deepEqual(states.counts(staticDir, '', () => false), { builds: 32, held: 0, stale: 0, legacy: 0, mine: 0 });

      const leases = await Promise.all(['eve/R3', 'eve/R7', 'lab/octopus/R1'].map((t) => acquire(staticDir, t, { ...timing, createOnce: false, clientId: 'someone-else' })));
      try {
        await waitFor(() => (states!.lockedBuilds().length === 3 ? true : undefined), 5_000, 'three held');
        agree(states, 'three held');
        assert.equal(states.counts(staticDir, 'lab', () => false).held, 1);
        // A stale lock, left by a holder that no longer exists.
        fs.mkdirSync(path.join(staticDir, 'eve/R9/devserver.lock'));
        const hourAgo = new Date(Date.now() - 3_600_000);
        fs.utimesSync(path.join(staticDir, 'eve/R9/devserver.lock'), hourAgo, hourAgo);
        await waitFor(() => (states!.entry(staticDir, 'eve/R9')?.state === 'stale' ? true : undefined), 5_000, 'R9 stale');
        agree(states, 'one stale');
      } finally {
        await Promise.all(leases.map((l) => l.release()));
      }
      await waitFor(() => (states!.lockedBuilds().length === 1 ? true : undefined), 5_000, 'only the stale one locked');
      agree(states, 'released');

      build(staticDir, 'eve/R100');
      fs.rmSync(path.join(staticDir, 'eve/R0'), { recursive: true });
      await waitFor(() => (states!.record(staticDir, 'eve/R100') !== undefined && states!.record(staticDir, 'eve/R0') === undefined ? true : undefined), 5_000, 'R100 in, R0 out');
      agree(states, 'a build added and one removed');

      // A folder staged into is a build: what was below it goes, and it counts as one.
      fs.writeFileSync(path.join(staticDir, 'lab/octopus/staged.timestamp'), '');
      await waitFor(() => (states!.record(staticDir, 'lab/octopus')?.kind === 'build' ? true : undefined), 5_000, 'octopus a build');
      agree(states, 'a folder turned build');
      fs.rmSync(path.join(staticDir, 'lab'), { recursive: true });
      await waitFor(() => (states!.record(staticDir, 'lab') === undefined ? true : undefined), 5_000, 'lab gone');
      agree(states, 'a folder removed');
      assert.deepEqual(states.counts(staticDir, '', () => false), { builds: 30, held: 0, stale: 1, legacy: 0, mine: 0 });
      assert.equal(states.lockedBuilds().length, 1);
    });

    it('never takes a lock for this window\'s by what its record says: a copied client id, or another instance where its lease was', async () => {
      build(staticDir, 'eve/R1');
      build(staticDir, 'eve/R2');
      states = await scanned(staticDir, watcher);
      const clientId = 'vscode:test-window';
      // A co-user's lock whose record names this window's client id.
      const spoof = await acquire(staticDir, 'eve/R1', { ...timing, createOnce: false, clientId });
      // This window's own lock on R2, then broken and taken by another holder before the window has noticed.
      const own = await acquire(staticDir, 'eve/R2', { ...timing, createOnce: false, clientId });
      const leases = new Map<string, WindowLease>([['eve/R2', { token: own.holder.token, since: Date.now() }]]);
      const mine = new Mine((d, t) => (d === staticDir ? leases.get(t) : undefined));
      let other: Awaited<ReturnType<typeof acquire>> | undefined;
      try {
        await waitFor(() => (states!.entry(staticDir, 'eve/R1')?.holder?.clientId === clientId && states!.entry(staticDir, 'eve/R2')?.holder?.token === own.holder.token ? true : undefined), 3_000, 'both locks seen');
        assert.equal(mine.has(states.record(staticDir, 'eve/R1')!), false, 'a record naming this window is not this window\'s lock');
        assert.equal(mine.has(states.record(staticDir, 'eve/R2')!), true, 'the lease\'s own lock is');
        assert.deepEqual(states.counts(staticDir, 'eve', mine), { builds: 2, held: 1, stale: 0, legacy: 0, mine: 1 });
        await forceRelease(staticDir, 'eve/R2', { ...timing, expect: { token: own.holder.token } });
        other = await acquire(staticDir, 'eve/R2', { ...timing, createOnce: false, clientId });
        const otherToken = other.holder.token;
        await waitFor(() => (states!.entry(staticDir, 'eve/R2')?.holder?.token === otherToken ? true : undefined), 3_000, 'the new holder seen');
        // The attack happened: the lease is still this window's, and the record names this window.
        assert.equal(leases.get('eve/R2')?.token, own.holder.token);
        assert.equal(states.entry(staticDir, 'eve/R2')?.holder?.clientId, clientId);
        assert.equal(mine.has(states.record(staticDir, 'eve/R2')!), false, 'another instance is not this window\'s lock');
        assert.deepEqual(states.counts(staticDir, 'eve', mine), { builds: 2, held: 2, stale: 0, legacy: 0, mine: 0 });
      } finally {
        await spoof.release();
        await other?.release();
        await own.release().catch(() => undefined);
      }
    });

    it('a lock this window held stops being yours as soon as the model sees it broken, before its lease hears of it', async () => {
      build(staticDir, 'eve/R1');
      build(staticDir, 'eve/R2');
      states = await scanned(staticDir, watcher);
      const leases = new Map<string, WindowLease>();
      const mine = new Mine((d, t) => (d === staticDir ? leases.get(t) : undefined), () => [...leases.keys()].map((tag) => ({ staticDir, tag })));
      const isMine = (r: AreaRecord): boolean => mine.has(r);
      // Heartbeats far apart: the leases learn of the loss long after the model has seen it.
      const slow = { staleMs: 120_000, refreshMs: 60_000 };
      const ours = [await acquire(staticDir, 'eve/R1', { ...slow, createOnce: false }), await acquire(staticDir, 'eve/R2', { ...slow, createOnce: false })];
      for (const l of ours) leases.set(l.tag, { token: l.holder.token, since: Date.now() });
      let theirs: Lease | undefined;
      try {
        await waitFor(() => (ours.every((l) => states!.entry(staticDir, l.tag)?.holder?.token === l.holder.token) ? true : undefined), 3_000, 'both held');
        assert.deepEqual(states.counts(staticDir, 'eve', mine), { builds: 2, held: 0, stale: 0, legacy: 0, mine: 2 });
        // Another process force-releases R1; R2 is force-released and taken by another holder.
        const fr = await cli(staticDir, ['force-release', 'eve/R1']);
        assert.equal(fr.code, 0, fr.stderr);
        await forceRelease(staticDir, 'eve/R2', slow);
        theirs = await acquire(staticDir, 'eve/R2', { ...slow, createOnce: false });
        await waitFor(() => (states!.entry(staticDir, 'eve/R1')?.state === 'free' && states!.entry(staticDir, 'eve/R2')?.holder?.token === theirs!.holder.token ? true : undefined), 3_000, 'R1 free and R2 held by the other');
        assert.deepEqual(ours.map((l) => l.state), ['held', 'held'], 'the leases have not heard yet: the model alone saw it');
        assert.equal(isMine(states.record(staticDir, 'eve/R1')!), false);
        assert.equal(isMine(states.record(staticDir, 'eve/R2')!), false);
        assert.deepEqual(states.counts(staticDir, 'eve', mine), { builds: 2, held: 1, stale: 0, legacy: 0, mine: 0 });
        assert.deepEqual(states.totals(mine), { builds: 2, held: 1, stale: 0, legacy: 0, mine: 0 });
      } finally {
        await theirs?.release();
        for (const l of ours) await l.release().catch(() => undefined);
      }
    });

    it('counts an area this window says it holds as mine before the watcher has seen its lock', async () => {
      build(staticDir, 'eve/R1');
      build(staticDir, 'eve/R2');
      states = await scanned(staticDir, watcher);
      const held = [{ staticDir, tag: 'eve/R2' }];
      const taken = { token: 'not-seen-yet', since: Date.now() };
      const mine = new Mine((d, t) => (d === staticDir && t === 'eve/R2' ? taken : undefined), () => held);
      assert.equal(states.entry(staticDir, 'eve/R2')?.state, 'free');
      assert.deepEqual(states.counts(staticDir, 'eve', mine), { builds: 2, held: 0, stale: 0, legacy: 0, mine: 1 });
      assert.deepEqual(states.totals(mine), { builds: 2, held: 0, stale: 0, legacy: 0, mine: 1 });
    });

    it('a reset while a folder of thousands is being listed: nothing of the old directory is kept, nothing is counted twice', async () => {
      for (let i = 0; i < 3_000; i++) build(staticDir, `eve/R${i}`);
      build(other, 'lab/R1');
      states = new LockStates(timing, quiet, { watcher });
      states.scan([staticDir]);
      // The root is listed; its folder of 3,000 is being taken in.
      await waitFor(() => (states!.record(staticDir, 'eve') !== undefined ? true : undefined), 5_000, 'eve found');
      states.reset(timing, [other]);
      await states.settled();
      await new Promise((r) => setTimeout(r, 200));
      await states.settled();
      assert.deepEqual(states.builds().map((r) => r.tag), ['lab/R1']);
      assert.equal(states.record(staticDir, 'eve'), undefined);
      assert.deepEqual(states.counts(staticDir, '', () => false), { builds: 0, held: 0, stale: 0, legacy: 0, mine: 0 });
      assert.deepEqual(states.totals(() => false), { builds: 1, held: 0, stale: 0, legacy: 0, mine: 0 });
    });

    it('a folder the view asks for while the scan lists it is listed once', async () => {
      for (let i = 0; i < 500; i++) build(staticDir, `eve/R${i}`);
      states = new LockStates(timing, quiet, { watcher });
      states.scan([staticDir]);
      // Asked for twice before its first listing ends, as the scan asks for it too.
      const [a, b] = await Promise.all([states.children(staticDir, 'eve'), states.children(staticDir, 'eve')]);
      await states.settled();
      assert.equal(a.length, 500);
      assert.deepEqual(b, a);
      // The static directory and eve, each once.
      assert.equal(states.work.listings, 2);
    });

    it('a folder of 5,000 builds: every one known once, in natural order, and a folder\'s builds found without a pass over all', async () => {
      for (let i = 0; i < 5_000; i++) build(staticDir, `big/R${i % 50}-${i}.0.0`, i % 2 === 0 ? 'staged.timestamp' : '.devserver-staging.manifest.json');
      build(staticDir, 'small/R1');
      states = new LockStates(timing, quiet, { watcher });
      states.scan([staticDir]);
      const big = await states.children(staticDir, 'big');
      assert.equal(big.length, 5_000);
      assert.deepEqual(big.map((r) => r.tag), [...big.map((r) => r.tag)].sort((a, b) => naturalOrder.compare(a, b)));
      assert.equal(new Set(big.map((r) => r.tag)).size, 5_000);
      await waitFor(() => (states!.isListed(staticDir, 'small') ? true : undefined), 5_000, 'small listed');
      assert.deepEqual(states.buildsUnder(staticDir, 'small').map((r) => r.tag), ['small/R1']);
      assert.equal(states.buildsUnder(staticDir, 'big').length, 5_000);
      assert.equal(states.buildsUnder(staticDir, '').length, 5_001);
    });
  });
}

describe('watches kept in a worker thread', function () {
  let dir: string;
  let watcher: ThreadWatcher<string> | undefined;

  beforeEach(() => {
    dir = tempDir('dss-thread-watch-');
  });
  afterEach(() => {
    watcher?.dispose();
    watcher = undefined;
    cleanup(dir);
  });

  function watching(script?: string): { seen: WatchEvent<string>[]; errors: string[] } {
    const seen: WatchEvent<string>[] = [];
    const errors: string[] = [];
    const onError = (d: string, err: unknown): void => void errors.push(`${d}: ${(err as { code?: string }).code ?? ''} ${String(err)}`);
    watcher = script === undefined ? new ThreadWatcher<string>((e) => seen.push(e), onError) : new ThreadWatcher<string>((e) => seen.push(e), onError, script);
    return { seen, errors };
  }

  it('a change made once ready() has resolved is seen, with the data of its directory, among 500 watched', async () => {
    const { seen, errors } = watching();
    for (let i = 0; i < 500; i++) fs.mkdirSync(path.join(dir, `b${i}`));
    for (let i = 0; i < 500; i++) watcher!.watch(path.join(dir, `b${i}`), `build ${i}`);
    await watcher!.ready();
    // No wait between: the watch must already be there.
    fs.mkdirSync(path.join(dir, 'b7', 'devserver.lock'));
    fs.writeFileSync(path.join(dir, 'b499', 'x'), '');
    await waitFor(() => (seen.some((e) => e.data === 'build 7') && seen.some((e) => e.data === 'build 499') ? true : undefined), 5_000, 'both changes');
    assert.deepEqual(
      [...new Set(seen.map((e) => `${e.data} ${e.dir} ${e.name}`))].sort(),
      [`build 499 ${path.join(dir, 'b499')} x`, `build 7 ${path.join(dir, 'b7')} devserver.lock`],
    );
    assert.deepEqual(errors, []);
  });

  it('says nothing of a directory once unwatched or after unwatchAll, and watches it again when asked', async () => {
    const { seen } = watching();
    fs.mkdirSync(path.join(dir, 'a'));
    fs.mkdirSync(path.join(dir, 'b'));
    watcher!.watch(path.join(dir, 'a'), 'a');
    watcher!.watch(path.join(dir, 'b'), 'b');
    await watcher!.ready();
    watcher!.unwatch(path.join(dir, 'a'));
    await watcher!.ready();
    fs.writeFileSync(path.join(dir, 'a', 'x'), '');
    fs.writeFileSync(path.join(dir, 'b', 'x'), '');
    await waitFor(() => (seen.some((e) => e.data === 'b') ? true : undefined), 5_000, 'the change in b');
    watcher!.unwatchAll();
    watcher!.watch(path.join(dir, 'a'), 'a again');
    await watcher!.ready();
    fs.writeFileSync(path.join(dir, 'b', 'y'), '');
    fs.writeFileSync(path.join(dir, 'a', 'y'), '');
    await waitFor(() => (seen.some((e) => e.data === 'a again') ? true : undefined), 5_000, 'the change in a, watched again');
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual([...new Set(seen.map((e) => `${e.data} ${e.name}`))].sort(), ['a again y', 'b x']);
  });

  it('tells onError of a directory it cannot watch, with its code, and goes on with the others', async () => {
    const { seen, errors } = watching();
    fs.mkdirSync(path.join(dir, 'there'));
    watcher!.watch(path.join(dir, 'missing'), 'missing');
    watcher!.watch(path.join(dir, 'there'), 'there');
    await watcher!.ready();
    assert.equal(errors.length, 1);
    assert.match(errors[0], /missing: ENOENT /);
    fs.writeFileSync(path.join(dir, 'there', 'x'), '');
    await waitFor(() => (seen.some((e) => e.data === 'there') ? true : undefined), 5_000, 'the change in there');
  });

  it('watches in this thread instead when the worker cannot start, and says so once', async () => {
    const { seen, errors } = watching(path.join(dir, 'no-such-worker.js'));
    fs.mkdirSync(path.join(dir, 'a'));
    watcher!.watch(path.join(dir, 'a'), 'a');
    await watcher!.ready();
    fs.writeFileSync(path.join(dir, 'a', 'x'), '');
    await waitFor(() => (seen.some((e) => e.data === 'a') ? true : undefined), 5_000, 'the change, seen from this thread');
    assert.equal(errors.length, 1);
    assert.match(errors[0], /The watcher thread stopped .*; watching in this thread instead\./);
  });

  it('a worker that dies after its watches are made: they are made again in this thread, and onError says so once', async () => {
    // The real worker, which ends itself once it has made the first watches (as a crash would).
    const dying = path.join(dir, 'dying-worker.js');
    fs.writeFileSync(dying, `require(${JSON.stringify(path.resolve(__dirname, '../../../src/core/watch/watchWorker.js'))});
      require('worker_threads').parentPort.once('message', () => setTimeout(() => process.exit(7), 200));`);
    const { seen, errors } = watching(dying);
    for (const d of ['a', 'b']) fs.mkdirSync(path.join(dir, d));
    watcher!.watch(path.join(dir, 'a'), 'a');
    watcher!.watch(path.join(dir, 'b'), 'b');
    await watcher!.ready();
    await waitFor(() => (errors.length > 0 ? true : undefined), 5_000, 'the worker to die');
    await watcher!.ready();
    watcher!.unwatch(path.join(dir, 'b'));
    fs.writeFileSync(path.join(dir, 'a', 'x'), '');
    fs.writeFileSync(path.join(dir, 'b', 'x'), '');
    await waitFor(() => (seen.some((e) => e.data === 'a') ? true : undefined), 5_000, 'the change in a, seen from this thread');
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual([...new Set(seen.map((e) => e.data))], ['a']);
    assert.equal(errors.length, 1);
    assert.match(errors[0], /The watcher thread stopped \(the watcher thread exited with code 7\); watching in this thread instead\./);
  });

  it('sends a burst of the same event once a turn, keeping every different one in order', () => {
    const batch = new NewsBatch();
    for (let i = 0; i < 10_000; i++) {
      batch.add({ dir: '/s/eve/R1', name: 'x', kind: 'change' });
      batch.add({ dir: '/s/eve/R1', name: 'x', kind: 'rename' });
    }
    batch.add({ dir: '/s/eve/R2', name: 'x', kind: 'change' });
    batch.add({ dir: '/s/eve/R1', name: null, kind: 'rename' });
    batch.add({ dir: '/s/eve/R1', name: 'devserver.lock', kind: 'rename' });
    batch.add({ dir: '/s/eve/R1', name: 'x', kind: 'change' });
    assert.deepEqual(
      batch.events.map((e) => `${e.kind} ${e.dir} ${String(e.name)}`),
      ['change /s/eve/R1 x', 'rename /s/eve/R1 x', 'change /s/eve/R2 x', 'rename /s/eve/R1 null', 'rename /s/eve/R1 devserver.lock'],
    );
  });

  for (const [what, scriptIn] of [
    ['its worker cannot start', (d: string): string => path.join(d, 'no-such-worker.js')],
    // Not a path Node accepts for a worker: the Worker constructor itself throws, as it does when
    // the system has no thread left to give (its scan, inside activate(), must not throw).
    ['no thread can even be made', (): string => 'no-such-worker.js'],
  ] as const) {
    it(`the model, when ${what}, warns that it watches in its own thread and goes on following locks`, async () => {
      fs.mkdirSync(path.join(dir, 'eve', 'R1'), { recursive: true });
      fs.writeFileSync(path.join(dir, 'eve', 'R1', 'staged.timestamp'), '');
      const warned: string[] = [];
      const broken: WatcherFactory = (onEvent, onError) => new ThreadWatcher(onEvent, onError, scriptIn(dir));
      const states = new LockStates(timing, { warn: (m: string) => void warned.push(m) }, { watcher: broken });
      try {
        states.scan([dir]);
        await waitFor(() => (states.record(dir, 'eve/R1') !== undefined ? true : undefined), 5_000, 'the scan');
        await states.settled();
        const lease = await acquire(dir, 'eve/R1', { ...timing, createOnce: false });
        try {
          await waitFor(() => (states.record(dir, 'eve/R1')?.lock?.state === 'held' ? true : undefined), 5_000, 'the lock seen');
        } finally {
          await lease.release();
        }
        assert.equal(warned.length, 1, warned.join('\n'));
        assert.match(warned[0], /^The watcher thread stopped \(.*\); watching in this thread instead\.$/);
      } finally {
        states.dispose();
      }
    });
  }

  it('keeps no process alive: one that starts the thread early, watches and returns exits by itself', async () => {
    const script = `const { ThreadWatcher } = require(${JSON.stringify(path.resolve(__dirname, '../../../src/core/watch/threadWatcher'))});
      const w = new ThreadWatcher(() => {}, (d, e) => { console.error(String(e)); process.exitCode = 3; });
      w.prepare();
      w.watch(${JSON.stringify(dir)}, 'x');
      w.ready().then(() => console.log('ready'));`;
    const r = await run(process.execPath, ['-e', script], { timeout: 20_000 });
    assert.equal(r.stdout.trim(), 'ready', r.stderr);
    assert.equal(r.code, 0, r.stderr);
    // Started and never asked for anything.
    const idle = `const { ThreadWatcher } = require(${JSON.stringify(path.resolve(__dirname, '../../../src/core/watch/threadWatcher'))});
      new ThreadWatcher(() => {}, () => { process.exitCode = 3; }).prepare();`;
    const i = await run(process.execPath, ['-e', idle], { timeout: 20_000 });
    assert.equal(i.code, 0, i.stderr);
  });

  it('the model starts its thread when it is given a static directory, before it looks at it', async () => {
    // In a process of its own: the threads the kernel lists before scan() and as it returns, one
    // more (the watches' thread) before anything is read.
    const script = `const { LockStates } = require(${JSON.stringify(path.resolve(__dirname, '../../../src/core/watch/states'))});
      const { threadWatcher } = require(${JSON.stringify(path.resolve(__dirname, '../../../src/core/watch/threadWatcher'))});
      const fs = require('fs');
      const threads = () => fs.readdirSync('/proc/self/task').length;
      // libuv's pool of threads, started by the first call that needs it, is counted in both.
      fs.stat('/', () => {});
      const states = new LockStates({ staleMs: 4000, refreshMs: 1000 }, { warn: () => {} }, { watcher: threadWatcher });
      const before = threads();
      states.scan([${JSON.stringify(dir)}]);
      const after = threads();
      states.settled().then(() => { console.log(before + ' ' + after); states.dispose(); });`;
    const r = await run(process.execPath, ['-e', script], { timeout: 20_000 });
    assert.equal(r.code, 0, r.stderr);
    const [before, after] = r.stdout.trim().split(' ').map(Number);
    assert.equal(after, before + 1, r.stdout);
  });
});

describe('the filter and order of builds', () => {
  const rec = (tag: string, state: 'free' | 'held' | 'stale' | 'legacy', extra: Partial<AreaRecord> = {}): AreaRecord => ({
    staticDir: '/s',
    tag,
    kind: 'build',
    judgedAt: 0,
    lock: { name: tag, kind: 'build', staticDir: '/s', tag, dir: `/s/${tag}`, lockPath: '', exists: true, state },
    ...extra,
  });

  it('orders by version newest first, R10 after R120 and before R9', () => {
    const order = sortBuilds([rec('eve/R9-1', 'free'), rec('eve/R120-2', 'free'), rec('eve/R10-3', 'free'), rec('eve/R120-10', 'free')], 'version');
    assert.deepEqual(order.map((r) => r.tag), ['eve/R120-10', 'eve/R120-2', 'eve/R10-3', 'eve/R9-1']);
  });

  it('orders by size or last use, unmeasured builds last', () => {
    const a = rec('eve/R1', 'free', { usage: { bytes: 10, lastUsedMs: 300 } });
    const b = rec('eve/R2', 'free', { usage: { bytes: 30, lastUsedMs: 100 } });
    const c = rec('eve/R3', 'free');
    assert.deepEqual(sortBuilds([a, b, c], 'size').map((r) => r.tag), ['eve/R2', 'eve/R1', 'eve/R3']);
    assert.deepEqual(sortBuilds([a, b, c], 'lastUse').map((r) => r.tag), ['eve/R1', 'eve/R2', 'eve/R3']);
  });

  it('matches every word of the text in any case, and any of the states asked for', () => {
    const held = rec('eve-release/R120-15662.0.0', 'held');
    assert.ok(matches(held, NO_FILTER, false));
    assert.ok(matches(held, { text: 'EVE r120', states: [] }, false));
    assert.ok(!matches(held, { text: 'eve R119', states: [] }, false));
    assert.ok(matches(held, { text: '', states: ['stale', 'held'] }, false));
    assert.ok(!matches(held, { text: '', states: ['free'] }, false));
    // This window's lock counts as mine, not held.
    assert.ok(matches(held, { text: '', states: ['mine'] }, true));
    assert.ok(!matches(held, { text: '', states: ['held'] }, true));
    assert.ok(matches(rec('x', 'free', { damaged: 'missing a' }), { text: '', states: ['damaged'] }, false));
  });
});

/** A source folder for staging: a file and a subfolder. */
function writeSource(near: string): string {
  const src = `${near}-src`;
  fs.mkdirSync(path.join(src, 'sub'), { recursive: true });
  fs.writeFileSync(path.join(src, 'a.txt'), 'hello\n');
  fs.writeFileSync(path.join(src, 'sub', 'b.bin'), Buffer.alloc(100, 1));
  return src;
}
