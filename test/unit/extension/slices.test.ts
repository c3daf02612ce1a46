/**
 * Work done in slices: the merge sort that pauses, the natural order by keys (which must be the
 * collator's order exactly, and fall back to the collator where it is not), and a listing that
 * gives the event loop its turns.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { performance } from 'perf_hooks';
import { list, naturalOrder } from '../../../src/core';
import { naturalKey, sortNatural } from '../../../src/core/base/natural';
import { eachInSlices, sortInSlices } from '../../../src/core/base/slices';
import { cleanup, tempDir } from '../../helpers';

/** A deterministic generator, so that a failure can be replayed. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function names(rand: () => number, count: number, alphabet: string, maxLength: number): string[] {
  return Array.from({ length: count }, () => {
    let s = '';
    const n = 1 + Math.floor(rand() * maxLength);
    for (let i = 0; i < n; i++) s += alphabet[Math.floor(rand() * alphabet.length)];
    return s;
  });
}

const byCollator = (a: string, b: string): number => naturalOrder.compare(a, b);

describe('work in slices', () => {
  it('sorts as Array.prototype.sort does, stable, at sizes around its runs', async () => {
    const rand = random(7);
    for (const n of [0, 1, 2, 511, 512, 513, 1024, 1500, 5000]) {
      const items = Array.from({ length: n }, (_, i) => ({ v: Math.floor(rand() * 50), i }));
      const sorted = await sortInSlices(items, (a, b) => a.v - b.v);
      assert.deepEqual(sorted, [...items].sort((a, b) => a.v - b.v), `n = ${n}`);
    }
  });

  it('keys names of printable ASCII in exactly the collator\'s order: digits as numbers, case after everything else', () => {
    const rand = random(11);
    for (const [alphabet, length] of [
      [' _-.,;:!?\'"()[]{}@*/\\&#%`^+<=>|~$0123456789aAbBzZrR', 8],
      ['0123456789.-', 30],
      ['00009aAzZ', 40],
      ['R0123456789-.', 24],
    ] as const) {
      const a = names(rand, 20_000, alphabet, length);
      const b = names(rand, 20_000, alphabet, length);
      for (let i = 0; i < a.length; i++) {
        const ka = naturalKey(a[i])!;
        const kb = naturalKey(b[i])!;
        const byKey = ka < kb ? -1 : ka > kb ? 1 : 0;
        assert.equal(byKey, Math.sign(byCollator(a[i], b[i])), `${JSON.stringify(a[i])} against ${JSON.stringify(b[i])}`);
      }
    }
    assert.equal(naturalKey('R120-15662.0.0é'), undefined);
    assert.equal(naturalKey('tab\there'), undefined);
  });

  it('sorts names in natural order, by keys where it can and by the collator where it cannot', async () => {
    const rand = random(13);
    const builds = names(rand, 3_000, 'R0123456789-.', 20);
    const mixed = [...builds, 'Ångström', 'été', 'R9-é', 'ﬁle', 'Z', 'a', 'R01', 'R1'];
    for (const set of [builds, mixed]) {
      const items = set.map((name, i) => ({ name, i }));
      const sorted = await sortNatural(items, (x) => x.name);
      // The collator's order, and stable among names it calls equal (R01 and R1).
      assert.deepEqual(sorted, [...items].sort((a, b) => byCollator(a.name, b.name)));
    }
  });

  it('gives the event loop turns during long synchronous work, timers included', async () => {
    let turns = 0;
    let ticking = true;
    const tick = (): void => {
      turns++;
      if (ticking) setImmediate(tick);
    };
    let timerFired = false;
    setTimeout(() => (timerFired = true), 1);
    setImmediate(tick);
    const before = turns;
    // 2,000 items of 50 µs each, all synchronous: without pauses, neither a turn nor the timer
    // would come before the end.
    await eachInSlices(Array.from({ length: 2_000 }, (_, i) => i), 4, async () => {
      const until = performance.now() + 0.05;
      while (performance.now() < until) {
        /* busy */
      }
    });
    ticking = false;
    assert.ok(turns - before > 1, `the event loop turned ${turns - before} times`);
    assert.ok(timerFired, 'a timer due during the work ran before it ended');
  });

  it('stops every lane at the first error and throws it', async () => {
    let after = 0;
    await assert.rejects(
      eachInSlices([1, 2, 3, 4, 5, 6, 7, 8], 2, async (n) => {
        if (n === 2) throw new Error('two');
        if (n > 3) after++;
        await new Promise((r) => setImmediate(r));
      }),
      /two/,
    );
    assert.ok(after <= 1, `${after} items were started after the error`);
  });

  describe('a listing of many areas', () => {
    let staticDir: string;
    before(() => {
      staticDir = tempDir('dss-slices-');
      for (let i = 0; i < 20_000; i++) fs.mkdirSync(path.join(staticDir, `R${i % 97}-${i}.0.0`));
      fs.mkdirSync(path.join(staticDir, 'Épreuve'));
      fs.mkdirSync(path.join(staticDir, 'r5-1.0.0'));
    });
    after(() => cleanup(staticDir));

    it('comes in natural order', async () => {
      const tags = (await list(staticDir)).map((e) => e.tag);
      assert.equal(tags.length, 20_002);
      assert.deepEqual(tags, [...tags].sort(byCollator));
    });
  });
});
