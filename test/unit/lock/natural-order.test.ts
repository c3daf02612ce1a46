/**
 * `naturalOrder` compares names of printable ASCII without ICU's collator (which costs
 * milliseconds to make, on every command line run that sorts): its answer must be the collator's.
 */
import { strict as assert } from 'assert';
import { naturalOrder } from '../../../src/core/base/format';

const collator = new Intl.Collator('en', { numeric: true, sensitivity: 'variant' });
const sign = (n: number): number => Math.sign(n) || 0;

/** The same pseudo-random names every run. */
function randomNames(count: number, alphabet: string, maxLength: number, seed: number): string[] {
  let s = seed;
  const next = (n: number): number => {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    return s % n;
  };
  return Array.from({ length: count }, () => Array.from({ length: next(maxLength + 1) }, () => alphabet[next(alphabet.length)]).join(''));
}

let printable = '';
for (let c = 0x20; c < 0x7f; c++) printable += String.fromCharCode(c);

describe('naturalOrder', () => {
  it('sorts builds as people read them', () => {
    const tags = ['eve/R10-1', 'eve/R9-1', 'eve/R100', 'Eve/R9', 'eve/R9', 'eve/R09-1', 'eve/R9.1', 'eve/R9_1', 'eve-release/R120-15662.0.0', 'eve-release/R120-15662.0.10', 'eve-release/R120-15662.0.9'];
    assert.deepEqual([...tags].sort(naturalOrder.compare), [...tags].sort(collator.compare));
    assert.ok(naturalOrder.compare('R9', 'R10') < 0);
    assert.equal(naturalOrder.compare('R09', 'R9'), 0, 'leading zeros do not count, as for the collator');
  });

  for (const [what, alphabet, length] of [
    ['every printable character', printable, 6],
    ['digits, zeros and separators, where numbers decide', '0001239._-', 8],
    ['letters of both cases, where case decides', 'aAbBzZ1', 5],
    ['build-like names', 'R0123456789.-_/abAB', 12],
  ] as const) {
    it(`gives the collator's answer for 300,000 random pairs: ${what}`, () => {
      const names = randomNames(3_000, alphabet, length, length * 7919 + alphabet.length);
      let ties = 0;
      for (let i = 0; i < names.length; i++) {
        for (let k = 0; k < 100; k++) {
          const a = names[i];
          const b = names[(i * 31 + k * 97) % names.length];
          const want = sign(collator.compare(a, b));
          if (want === 0) ties++;
          assert.equal(sign(naturalOrder.compare(a, b)), want, `${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
        }
      }
      assert.ok(ties > 0, 'some pairs tie');
    });
  }

  it('long numbers, and names that are not printable ASCII, as the collator says', () => {
    const cases: [string, string][] = [
      ['9007199254740993', '9007199254740992'],
      ['x' + '9'.repeat(199), 'x1' + '0'.repeat(199)],
      ['x' + '1'.repeat(250), 'x' + '1'.repeat(249) + '2'],
      ['1\u0661', '2'],
      ['é', 'f'],
      ['e\u0301', 'é'],
      ['a\tb', 'a b'],
      ['Ω', 'z'],
      ['', 'a'],
    ];
    for (const [a, b] of cases) {
      assert.equal(sign(naturalOrder.compare(a, b)), sign(collator.compare(a, b)), `${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
      assert.equal(sign(naturalOrder.compare(b, a)), sign(collator.compare(b, a)), `${JSON.stringify(b)} vs ${JSON.stringify(a)}`);
    }
  });
});
