/**
 * Tags are the one input every caller controls. This fuzzes them through the whole public API
 * against a static directory booby-trapped with symlinks, and checks that nothing outside the
 * static directory is touched, that every failure is a StagingError with a code, and that no
 * lock is left behind.
 *
 * Reproducible: DSS_FUZZ_SEED=<n> replays a run, DSS_FUZZ_TAGS=<n> changes the tag count,
 * DSS_FUZZ_FAILURES=<file> writes every bad call to a file (the assertion shows the first ten).
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { performance } from 'perf_hooks';
import { StagingError, acquire, destroy, forceRelease, inspect, isInside, list, parseTag, type Lease } from '../../../src/core';
import { cleanup, prng, snapshot, tempDir } from '../../helpers';

// ---------------------------------------------------------------------------------------------
// Focused cases

describe('parseTag and isInside edge cases', () => {
  it('accepts plain relative tags and one trailing slash', () => {
    assert.deepEqual(parseTag('eve-release/R120-15662.0.0'), ['eve-release', 'R120-15662.0.0']);
    assert.deepEqual(parseTag('board/build/'), ['board', 'build']);
    assert.deepEqual(parseTag('.hidden/..dots/...'), ['.hidden', '..dots', '...']);
  });

  it('rejects empty segments, dot segments and absolute paths', () => {
    // 'a/b//': only a single trailing slash is forgiven.
    for (const tag of ['', 'a//b', 'a/b//', '//', '/', '/etc', '/a/b', '.', '..', './a', 'a/.', 'a/../b', '../x', 'a/b/..']) {
      assert.throws(() => parseTag(tag), (e: unknown) => e instanceof StagingError && e.code === 'EBADTAG', JSON.stringify(tag));
    }
  });

  it('rejects NUL and control characters but not other unicode', () => {
    for (const c of ['\0', '\x01', '\n', '\r', '\t', '\x1b', '\x7f']) {
      assert.throws(() => parseTag(`a${c}b`), (e: unknown) => e instanceof StagingError && e.code === 'EBADTAG');
    }
    // Lookalikes of dots and slashes are ordinary characters: they name a directory, they do not traverse.
    assert.deepEqual(parseTag('\uff0e\uff0e\uff0fetc'), ['\uff0e\uff0e\uff0fetc']);
    assert.deepEqual(parseTag('a\u2215b'), ['a\u2215b']);
    assert.deepEqual(parseTag('..\\..\\x'), ['..\\..\\x']);
  });

  it('rejects the lock protocol names in any segment', () => {
    for (const tag of ['devserver', 'a/devserver', 'devserver.lock', 'devserver.lock.claim.1.2.0', 'a/devserver.lock.trash.x', '.devserver-staging', '.devserver-staging/trash', '.devserver-stagingX']) {
      assert.throws(() => parseTag(tag), (e: unknown) => e instanceof StagingError && e.code === 'EBADTAG', tag);
    }
    // Only the exact names and prefixes are reserved.
    assert.deepEqual(parseTag('devserver2/Devserver'), ['devserver2', 'Devserver']);
  });

  it('limits segments to 255 bytes and tags to 1024 bytes, counting UTF-8 bytes', () => {
    assert.equal(parseTag('a'.repeat(255)).length, 1);
    assert.throws(() => parseTag('a'.repeat(256)), (e: unknown) => e instanceof StagingError && e.code === 'EBADTAG');
    assert.equal(parseTag('€'.repeat(85)).length, 1); // 255 bytes
    assert.throws(() => parseTag('€'.repeat(86)), (e: unknown) => e instanceof StagingError && e.code === 'EBADTAG'); // 258 bytes
    const seg = 'b'.repeat(255);
    assert.equal(parseTag([seg, seg, seg, seg].join('/')).length, 4); // 1023 bytes
    assert.throws(() => parseTag([seg, seg, seg, seg, 'x'].join('/')), (e: unknown) => e instanceof StagingError && e.code === 'EBADTAG');
  });

  it('rejects tags that are not strings', () => {
    for (const tag of [undefined, null, 1, {}, ['a'], Symbol('x')]) {
      assert.throws(() => parseTag(tag), (e: unknown) => e instanceof StagingError && e.code === 'EBADTAG');
    }
  });

  it('isInside compares path segments, not string prefixes', () => {
    assert.equal(isInside('/srv/static', '/srv/static2'), false);
    assert.equal(isInside('/srv/static', '/srv/static2/x'), false);
    assert.equal(isInside('/srv/static', '/srv/static-old/x'), false);
    assert.equal(isInside('/srv/static', '/srv/static'), false); // the directory itself is not inside
    assert.equal(isInside('/srv/static', '/srv/static/'), false);
    assert.equal(isInside('/srv/static', '/srv'), false);
    assert.equal(isInside('/srv/static', '/'), false);
    assert.equal(isInside('/srv/static', '/srv/static/a'), true);
    assert.equal(isInside('/srv/static/', '/srv/static/a/b'), true);
    assert.equal(isInside('/srv/static', '/srv/static/..a'), true); // a name starting with dots, not '..'
    assert.equal(isInside('/srv/static', '/srv/static/a/../../x'), false);
  });
});

// ---------------------------------------------------------------------------------------------
// The fuzz run

const ALLOWED = new Set(['EBADTAG', 'EEXIST', 'ENOENT', 'ENOTHELD', 'ELOCKED', 'EBADSTATICDIR']);
const MARKER = 'dss-fuzz-marker-';

function segmentsOf(p: string): string[] {
  return p.split(path.sep).filter((s) => s !== '');
}

/** Strictly inside, by path segments; deliberately independent of the core's isInside. */
function strictlyInside(parent: string, child: string): boolean {
  const a = segmentsOf(parent);
  const b = segmentsOf(child);
  return b.length > a.length && a.every((s, i) => b[i] === s);
}

class TagGen {
  private n = 0;
  constructor(
    private readonly rnd: () => number,
    private readonly root: string,
    private readonly seed: number,
  ) {}

  int(n: number): number {
    return Math.floor(this.rnd() * n);
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)];
  }
  /** A name that is unique to this run, so anything created under it can be found. */
  marker(): string {
    return `${MARKER}${this.seed}-${this.n++}`;
  }

  private static readonly TRAVERSAL = ['..', '.', '...', '..%2f', '%2e%2e', '%2e%2e%2f', '%252e%252e', '..\\', '..\\..\\x', '.\\', '..;', '..%00', '..%c0%af', '\uff0e\uff0e', '\u2024\u2024', '\u2025', '.\u200b.', '..\u0338', '%2f', '%5c'];
  private static readonly UNICODE = [
    'e\u0301', '\u0301', '\u0301\u0301\u0301', 'a\u20dd', '\u202eexe.txt', '\u200f\u05d0\u05d1', '\u0627\u0644\u0639\u0631\u0628\u064a\u0629', '👍🏽', '👨‍👩‍👧‍👦', '🏳️‍🌈',
    '\uff0e\uff0e\uff0f\uff0e\uff0e', '\uff0f', '\u2215', '\u2044', '\u29f8', '\uff3c', '\ufeff', '\u200b', '\u2028', '\u0085', '\u00a0', 'Å', 'A\u030a', 'ﬁ', 'ǅ', '𝔘𝔫𝔦', '\ud800', '\udfff', '\uffff', '\ufffd', '日本語', 'Ελληνικά', 'İı',
  ];
  private static readonly RESERVED = [
    'devserver', 'devserver.lock', 'devserver.lock.claim.x', 'devserver.lock.claim.12.abc.0', 'devserver.lock.trash.0011', '.devserver-staging', '.devserver-staging/trash', '.devserver-staging/audit.log', '.devserver-stagingX',
    'a/devserver', 'a/devserver.lock', 'a/devserver.lock/owner.json', 'real/devserver.lock', 'devserver/x', 'DEVSERVER', 'Devserver.Lock', 'devserver ', ' devserver', 'devserver.lockX', 'devserver..lock', 'trash', 'audit.log',
  ];
  private static readonly CHARS = 'abcXYZ019-_.~ !#$%&\'()*+,:;<=>?@[]^`{|}"\\'.split('');

  private word(maxLen = 12): string {
    let s = '';
    const len = 1 + this.int(maxLen);
    for (let i = 0; i < len; i++) {
      const r = this.rnd();
      if (r < 0.75) s += this.pick(TagGen.CHARS);
      else if (r < 0.95) s += this.pick(TagGen.UNICODE);
      else s += String.fromCharCode(this.int(0x10000));
    }
    return s;
  }

  private join(parts: readonly string[]): string {
    let out = parts[0] ?? '';
    for (let i = 1; i < parts.length; i++) out += (this.rnd() < 0.9 ? '/' : this.pick(['//', '/./', '\\', '/../'])) + parts[i];
    return this.rnd() < 0.1 ? `${out}/` : out;
  }

  traversal(): string {
    const forms = [
      () => this.join(Array.from({ length: 1 + this.int(5) }, () => (this.rnd() < 0.5 ? this.pick(TagGen.TRAVERSAL) : this.word(6)))),
      () => `a/${'../'.repeat(1 + this.int(4))}${this.pick(['x', 'static2/victim', 'outside', this.marker()])}`,
      () => `${'../'.repeat(1 + this.int(3))}static2`,
      () => `./${this.word()}`,
      () => `${this.word()}/./${this.word()}`,
      () => `${this.word()}\\..\\..\\${this.word()}`,
      () => encodeURIComponent(`../../${this.marker()}`),
      () => `..${this.pick(['', '/', '\\', '%2f', '\uff0f'])}${this.pick(['', 'static2', this.marker()])}`,
    ];
    return this.pick(forms)();
  }

  absolute(): string {
    return this.pick([
      '/', '//', '/etc/passwd', '/tmp', `/tmp/${this.marker()}`, `/${this.marker()}`, path.join(this.root, 'outside', 'x'), path.join(this.root, 'static2'),
      path.join(this.root, 'static', 'real'), `//${this.word()}`, `/./${this.word()}`, 'C:\\Windows', 'c:/x', '\\\\server\\share', '~/x', '~root', `\\${this.word()}`,
    ]);
  }

  control(): string {
    const base = this.word(10);
    const at = this.int(base.length + 1);
    const c = this.rnd() < 0.3 ? '\0' : String.fromCharCode(this.rnd() < 0.9 ? this.int(0x20) : 0x7f);
    const s = base.slice(0, at) + c + base.slice(at);
    return this.rnd() < 0.5 ? s : `${this.word()}/${s}`;
  }

  unicode(): string {
    return this.join(Array.from({ length: 1 + this.int(3) }, () => Array.from({ length: 1 + this.int(3) }, () => this.pick(TagGen.UNICODE)).join('') + (this.rnd() < 0.5 ? this.word(4) : '')));
  }

  long(): string {
    const seg = (bytes: number): string => {
      const unit = this.pick(['a', 'é', '€', '😀']); // 1, 2, 3 and 4 UTF-8 bytes
      let s = `${this.int(1e6)}-`;
      while (Buffer.byteLength(s + unit) <= bytes) s += unit;
      return s;
    };
    return this.pick([
      () => seg(255),
      () => seg(256),
      () => seg(254 + this.int(4)),
      () => `${seg(255)}/${seg(255)}`,
      () => [seg(255), seg(255), seg(255), seg(250)].join('/'),
      () => [seg(255), seg(255), seg(255), seg(255), 'x'].join('/'),
      // Deep, but not very: each level costs a realpath of the whole path so far.
      () => Array.from({ length: 1 + this.int(40) }, () => this.pick(['a', 'b', 'c'])).join('/'),
      () => `${this.word()}/${'x'.repeat(1000 + this.int(100))}`,
    ])();
  }

  reserved(): string {
    const r = this.pick(TagGen.RESERVED);
    return this.rnd() < 0.5 ? r : `${this.word(6)}/${r}`;
  }

  symlink(): string {
    const tail = (): string => (this.rnd() < 0.3 ? '' : `/${this.rnd() < 0.5 ? this.marker() : this.word(8)}`);
    return (
      this.pick([
        'up', 'up/static2', 'up/static2/victim', 'up/outside', 'up/outside/data', 'dot', 'prefix', 'prefix/victim', 'prefix-abs', 'prefix-victim', 'slash', 'slash/tmp', 'tmp', 'out', 'out/data', 'out-abs',
        'chain1', 'chain2/data', 'chain3', 'inchain1', 'inchain2', 'dangling', 'dangling-out', 'filelink', 'outfilelink', 'loop', 'loop-a', 'static-abs', 'static-abs/real', 'tricky', 'tricky-out',
        'real/sub/uplink', 'real/sub/uplink/outside', 'real/sub/uplink/static2/victim', 'real/sub/sidelink', 'real/sub/rootlink', 'real/sub/rootlink/real', 'real/sub/inlink', 'real/sub/inlink/sub',
        'legit', 'legit/sub', 'legit-abs', 'legit-deep', 'real', 'real/sub', 'real/file.txt', 'file.txt', 'real/sub/dangling',
      ]) + tail()
    );
  }

  random(): string {
    return this.join(Array.from({ length: 1 + this.int(4) }, () => this.word()));
  }

  /** The kind of the last tag, for the summary. */
  kind = '';

  next(): string {
    const r = this.rnd();
    const [kind, make] =
      r < 0.14 ? (['traversal', () => this.traversal()] as const)
      : r < 0.2 ? (['absolute', () => this.absolute()] as const)
      : r < 0.27 ? (['control', () => this.control()] as const)
      : r < 0.42 ? (['unicode', () => this.unicode()] as const)
      : r < 0.5 ? (['long', () => this.long()] as const)
      : r < 0.57 ? (['reserved', () => this.reserved()] as const)
      : r < 0.8 ? (['symlink', () => this.symlink()] as const)
      : (['random', () => this.random()] as const);
    this.kind = kind;
    return make();
  }
}

describe('tags fuzz: sandbox, errors, no leftovers', function () {
  this.timeout(300_000);

  const seed = process.env.DSS_FUZZ_SEED !== undefined ? Number(process.env.DSS_FUZZ_SEED) >>> 0 : 20_251_121;
  const count = process.env.DSS_FUZZ_TAGS !== undefined ? Number(process.env.DSS_FUZZ_TAGS) : 10_000;
  let root: string;
  let staticDir: string;

  /** The booby-trapped static directory and its neighbours; idempotent, so it can repair what a destroy removed. */
  function fixture(): void {
    const mk = (p: string): void => {
      fs.mkdirSync(path.join(root, p), { recursive: true });
    };
    const file = (p: string, text: string): void => {
      if (!fs.existsSync(path.join(root, p))) fs.writeFileSync(path.join(root, p), text);
    };
    const link = (p: string, target: string): void => {
      const at = path.join(root, p);
      if (fs.lstatSync(at, { throwIfNoEntry: false }) === undefined) fs.symlinkSync(target, at);
    };
    mk('static2/victim');
    file('static2/secret.txt', 'secret');
    mk('outside/data');
    file('outside/file.txt', 'outside');
    mk('static/real/sub');
    file('static/real/file.txt', 'inside');
    file('static/file.txt', 'inside');
    link('static/up', '..');
    link('static/dot', '.');
    link('static/prefix', '../static2'); // shares the prefix "static": a string comparison would accept it
    link('static/prefix-abs', path.join(root, 'static2'));
    link('static/prefix-victim', '../static2/victim');
    link('static/slash', '/');
    link('static/tmp', '/tmp');
    link('static/out', '../outside');
    link('static/out-abs', path.join(root, 'outside'));
    link('static/chain1', 'chain2');
    link('static/chain2', 'chain3');
    link('static/chain3', '../outside');
    link('static/inchain1', 'inchain2');
    link('static/inchain2', 'real');
    link('static/dangling', 'no-such-dir');
    link('static/dangling-out', '../outside/no-such-dir');
    link('static/filelink', 'real/file.txt');
    link('static/outfilelink', '../outside/file.txt');
    link('static/loop', 'loop');
    link('static/loop-a', 'loop-b');
    link('static/loop-b', 'loop-a');
    link('static/static-abs', path.join(root, 'static')); // the static directory itself is not inside it
    link('static/tricky', '../static/real'); // out and back in: inside
    link('static/tricky-out', '../static/../outside');
    link('static/legit', 'real');
    link('static/legit-abs', path.join(root, 'static', 'real', 'sub'));
    link('static/legit-deep', 'real/sub');
    link('static/real/sub/uplink', '../../..');
    link('static/real/sub/sidelink', '../../../static2/victim');
    link('static/real/sub/rootlink', '../..');
    link('static/real/sub/inlink', '..');
    link('static/real/sub/dangling', '../../../outside/gone');
  }
  const FIXTURE_TOP = new Set([
    'real', 'file.txt', 'up', 'dot', 'prefix', 'prefix-abs', 'prefix-victim', 'slash', 'tmp', 'out', 'out-abs', 'chain1', 'chain2', 'chain3', 'inchain1', 'inchain2', 'dangling', 'dangling-out',
    'filelink', 'outfilelink', 'loop', 'loop-a', 'loop-b', 'static-abs', 'tricky', 'tricky-out', 'legit', 'legit-abs', 'legit-deep',
  ]);

  /** Everything in the sandbox root except what lies inside the static directory. */
  function outsideSnapshot(): Map<string, string> {
    const all = snapshot(root);
    for (const k of [...all.keys()]) if (strictlyInside(staticDir, k)) all.delete(k);
    return all;
  }

  /**
   * The snapshot leaves out directories' times; these catch an entry made and removed again
   * outside (a lock taken and released there leaves no other trace).
   */
  function outsideDirTimes(outside: Map<string, string>): Map<string, string> {
    const out = new Map<string, string>();
    for (const p of [root, ...outside.keys()]) {
      const st = fs.lstatSync(p);
      if (st.isDirectory() && p !== staticDir) out.set(p, `${st.mtimeMs}:${st.ctimeMs}`);
    }
    return out;
  }

  function markersIn(dir: string): string[] {
    try {
      return fs.readdirSync(dir).filter((n) => n.startsWith(MARKER));
    } catch {
      return [];
    }
  }

  before(() => {
    root = tempDir('dss-fuzz-');
    staticDir = path.join(root, 'static');
    fixture();
  });

  after(() => {
    // A marker at / or /tmp would mean an escape, already reported; do not leave it behind.
    for (const dir of ['/', os.tmpdir()]) for (const m of markersIn(dir)) fs.rmSync(path.join(dir, m), { recursive: true, force: true });
    cleanup(root);
  });

  it(`${count} generated tags through acquire, release, inspect, forceRelease, destroy and list`, async () => {
    console.log(`      seed ${seed} (DSS_FUZZ_SEED=${seed} replays this run), ${count} tags`);
    const gen = new TagGen(prng(seed), root, seed);
    const before = outsideSnapshot();
    const dirTimesBefore = outsideDirTimes(before);
    const markersBefore = ['/', os.tmpdir()].map((d) => markersIn(d).length);
    const realStatic = fs.realpathSync(staticDir);

    const failures: string[] = [];
    const tally = new Map<string, number>();
    const bump = (k: string): void => void tally.set(k, (tally.get(k) ?? 0) + 1);
    const opMs = new Map<string, number>();
    const fail = (what: string): void => {
      if (failures.length < 1000) failures.push(what);
    };
    const onUnhandled = (err: unknown): void => fail(`unhandled rejection: ${String(err)}`);
    process.on('unhandledRejection', onUnhandled);

    /** Runs one call; a failure must be a StagingError with an allowed code and a message. */
    async function call<T>(op: string, tag: unknown, fn: () => Promise<T>): Promise<T | undefined> {
      const t = performance.now();
      try {
        const v = await fn();
        bump(`${op} ok`);
        return v;
      } catch (err) {
        if (err instanceof StagingError && ALLOWED.has(err.code) && err.message.length > 0) {
          bump(`${op} ${err.code}`);
        } else {
          const what = err instanceof StagingError ? `StagingError ${err.code}: ${err.message}` : err instanceof Error ? `${err.constructor.name} ${(err as { code?: string }).code ?? ''}: ${err.message}` : String(err);
          bump(`${op} BAD`);
          fail(`${op}(${JSON.stringify(tag)}): ${what}`);
        }
        return undefined;
      } finally {
        opMs.set(op, (opMs.get(op) ?? 0) + performance.now() - t);
      }
    }

    async function checkLease(lease: Lease, tag: unknown): Promise<string | undefined> {
      const realDir = await fs.promises.realpath(lease.dir).catch(() => undefined);
      const realLock = await fs.promises.realpath(lease.lockPath).catch(() => undefined);
      if (realDir === undefined || !strictlyInside(realStatic, realDir)) fail(`acquire(${JSON.stringify(tag)}): area ${lease.dir} resolves to ${realDir}, not inside ${realStatic}`);
      if (realLock === undefined || !strictlyInside(realStatic, realLock)) fail(`acquire(${JSON.stringify(tag)}): lock ${lease.lockPath} resolves to ${realLock}`);
      return realLock;
    }

    async function exercise(tag: unknown, i: number): Promise<void> {
      for (const createOnce of [true, false]) {
        const lease = await call(createOnce ? 'acquire(createOnce)' : 'acquire', tag, () => acquire(staticDir, tag as string, { createOnce }));
        if (lease === undefined) continue;
        const realLock = await checkLease(lease, tag);
        const broken = i % 50 === 0 && !createOnce;
        if (broken) {
          // Now and then, look at and break a lock that is really held.
          const info = await call('inspect(held)', tag, () => inspect(staticDir, tag as string));
          if (info !== undefined && info.state !== 'held') fail(`inspect(${JSON.stringify(tag)}) while held: ${info.state}`);
          await call('forceRelease(held)', tag, () => forceRelease(staticDir, tag as string));
        }
        const destroyIt = (i + (createOnce ? 0 : 1)) % 2 === 0;
        if (broken) {
          // Its holder must learn that it lost the lock, and must not remove anything.
          const err = await lease.release(destroyIt ? { destroy: true } : {}).then(() => undefined, (e: unknown) => e);
          if (!(err instanceof StagingError) || err.code !== 'ECOMPROMISED') fail(`release(${JSON.stringify(tag)}) after forceRelease: ${String(err)}`);
          if (!fs.existsSync(lease.dir)) fail(`release(destroy)(${JSON.stringify(tag)}) after forceRelease removed the area`);
          continue;
        }
        await call(destroyIt ? 'release(destroy)' : 'release', tag, () => lease.release(destroyIt ? { destroy: true } : {}));
        // Released (or refused) either way: our lock must not stay behind.
        if (realLock !== undefined) {
          const left = await fs.promises.readFile(path.join(realLock, 'owner.json'), 'utf8').catch(() => undefined);
          if (left !== undefined && left.includes(lease.holder.token)) fail(`release${destroyIt ? '(destroy)' : ''}(${JSON.stringify(tag)}): left its lock at ${realLock}`);
        }
      }
      await call('inspect', tag, () => inspect(staticDir, tag as string));
      await call('forceRelease', tag, () => forceRelease(staticDir, tag as string));
      await call('destroy', tag, () => destroy(staticDir, tag as string));
      await call('list', tag, () => list(staticDir, tag as string));
    }

    // Not strings, and one very deep tag: 511 one-character segments in 1021 bytes.
    const odd: unknown[] = [undefined, null, 0, 42, {}, ['a'], { toString: () => 'a' }, '', ' ', 'a\0', `${'q/'.repeat(510)}q`];
    const t0 = performance.now();
    let parsed = 0;
    const kindMs = new Map<string, number>();
    try {
      for (let i = 0; i < count; i++) {
        const tk = performance.now();
        const tag = gen.next();
        try {
          parseTag(tag);
          parsed++;
        } catch {
          /* most are meant to be rejected */
        }
        await exercise(tag, i);
        // Destroying a fixture directory ("real", or "real/sub" through a link) changes the fixture: put it back.
        if (FIXTURE_TOP.has(tag.split('/')[0])) fixture();
        kindMs.set(gen.kind, (kindMs.get(gen.kind) ?? 0) + performance.now() - tk);
      }
      for (const tag of odd) await exercise(tag, 1);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
    const elapsedS = (performance.now() - t0) / 1000;

    // No lock, claim or lock trash of ours anywhere in the static directory.
    const leftovers: string[] = [];
    const walk = (d: string): void => {
      for (const e of fs.readdirSync(d, { withFileTypes: true })) {
        const p = path.join(d, e.name);
        if (e.name.startsWith('devserver.lock')) leftovers.push(p);
        if (e.isDirectory() && e.name !== '.devserver-staging') walk(p);
      }
    };
    walk(staticDir);

    const summary = [...tally].sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => `${k} ${v}`);
    console.log(`      ${count + odd.length} tags (${parsed} syntactically valid) in ${elapsedS.toFixed(1)} s`);
    console.log(`      ${summary.join(', ')}`);
    console.log(`      time per kind of tag: ${[...kindMs].map(([k, v]) => `${k} ${(v / 1000).toFixed(1)} s`).join(', ')}`);
    if (process.env.DSS_FUZZ_FAILURES !== undefined) fs.writeFileSync(process.env.DSS_FUZZ_FAILURES, failures.join('\n'));
    console.log(`      time per operation: ${[...opMs].map(([k, v]) => `${k} ${(v / 1000).toFixed(1)} s`).join(', ')}`);

    const after = outsideSnapshot();
    const added = [...after.keys()].filter((k) => !before.has(k));
    const removed = [...before.keys()].filter((k) => !after.has(k));
    const changed = [...before.keys()].filter((k) => after.has(k) && after.get(k) !== before.get(k));
    const first = (xs: readonly string[]): string[] => xs.slice(0, 10).map((x) => (x.length > 300 ? `${x.slice(0, 300)}…` : x));
    assert.deepEqual({ added: first(added), removed: first(removed), changed: first(changed) }, { added: [], removed: [], changed: [] }, 'the sandbox outside the static directory changed');
    const dirTimesAfter = outsideDirTimes(after);
    const touched = [...dirTimesBefore.keys()].filter((k) => dirTimesAfter.get(k) !== dirTimesBefore.get(k));
    assert.deepEqual(touched, [], 'directories outside the static directory were written to (an entry made and removed again)');
    assert.deepEqual(['/', os.tmpdir()].map((d) => markersIn(d).length), markersBefore, 'something was created at / or in the temp directory');
    assert.deepEqual(first(failures), [], `${failures.length} calls failed badly (seed ${seed}); the first are shown`);
    assert.deepEqual(first(leftovers), [], `${leftovers.length} locks or claims left in the static directory; the first are shown`);
    assert.ok((tally.get('acquire(createOnce) ok') ?? 0) > count / 5, 'too few tags were accepted to exercise the accepted path');
  });
});
