/**
 * The hashes of names and the random names of the lock path, made without Node's crypto: the
 * same digests as Node's SHA-256 for any text, random bytes from the system's generator, and
 * Node's generator where /dev/urandom is missing or is not the device.
 */
import { strict as assert } from 'assert';
import { execFileSync } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { randomHex, sha256Hex, systemRandom } from '../../../src/core/base/crypto';
import { cleanup, tempDir } from '../../helpers';

describe('sha256Hex and randomHex', () => {
  const dir = tempDir();
  after(() => cleanup(dir));

  it("gives Node's SHA-256 of any text, as hex", () => {
    const texts = ['', 'a', 'eve-release/R120-15662.0.0', 'é☃ 𝄞 \u0000 \uFFFD', 'x'.repeat(55), 'x'.repeat(56), 'x'.repeat(64), 'y'.repeat(1000)];
    for (let i = 0; i < 200; i++) texts.push(crypto.randomBytes(1 + (i % 97)).toString('latin1'));
    for (const t of texts) assert.equal(sha256Hex(t), crypto.createHash('sha256').update(t, 'utf8').digest('hex'), JSON.stringify(t));
  });

  it('draws names of the length asked, never the same, across refills of its batch', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 3000; i++) {
      const n = 1 + (i % 13);
      const h = randomHex(n);
      assert.match(h, new RegExp(`^[0-9a-f]{${2 * n}}$`));
      if (n >= 6) {
        assert.ok(!seen.has(h), `${h} came twice`);
        seen.add(h);
      }
    }
    assert.equal(randomHex(5000).length, 10_000);
  });

  it('reads the system generator, and falls back to Node where the source is missing or no device', () => {
    const a = systemRandom(64);
    const b = systemRandom(64);
    assert.equal(a.length, 64);
    assert.notDeepEqual(a, b);
    const plain = path.join(dir, 'not-random');
    fs.writeFileSync(plain, Buffer.alloc(64));
    const fromPlain = systemRandom(64, plain);
    assert.equal(fromPlain.length, 64);
    assert.notDeepEqual(fromPlain, Buffer.alloc(64), 'a plain file is not taken for the generator');
    assert.equal(systemRandom(16, path.join(dir, 'missing')).length, 16);
  });

  it('does not wait on a FIFO put where the generator should be', function () {
    const fifo = path.join(dir, 'fifo');
    try {
      execFileSync('mkfifo', [fifo]);
    } catch {
      this.skip();
    }
    // Without O_NONBLOCK this open would wait for a writer forever.
    assert.equal(systemRandom(16, fifo).length, 16);
  });
});
