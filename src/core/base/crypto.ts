/**
 * Hashes of names and random names, without Node's crypto on the lock path. Loading crypto (with
 * the stream modules it takes) and setting up its first SHA-256 costs a command a sizeable share
 * of Node's own start, to hash a tag of thirty bytes once. A plain JavaScript SHA-256
 * (@noble/hashes, audited) and the system's generator read from /dev/urandom cost next to
 * nothing (bench/README.md has the figures). Files are still hashed by Node's crypto (staging, verify), where its speed counts.
 */
import { sha256 } from '@noble/hashes/sha2.js';
import type * as NodeCrypto from 'crypto';
import * as fs from 'fs';

/** The hex SHA-256 of `text` (UTF-8): the same digest as `sha256sum`. */
export function sha256Hex(text: string): string {
  return Buffer.from(sha256(Buffer.from(text, 'utf8'))).toString('hex');
}

/**
 * `n` bytes from the system's generator: /dev/urandom, which never blocks once the system has
 * started; Node's crypto where that cannot be read (no /dev, or not the device it should be).
 * `source` is for tests.
 */
export function systemRandom(n: number, source = '/dev/urandom'): Buffer {
  const bytes = Buffer.alloc(n);
  let fd: number | undefined;
  try {
    // O_NONBLOCK: whatever is there, the open returns at once (a FIFO would wait for a writer).
    fd = fs.openSync(source, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | fs.constants.O_NOCTTY);
    if (!fs.fstatSync(fd).isCharacterDevice()) throw new Error(`${source} is not a device`);
    for (let got = 0; got < n; ) {
      const read = fs.readSync(fd, bytes, got, n - got, null);
      if (read === 0) throw new Error(`${source} ended`);
      got += read;
    }
    return bytes;
  } catch {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- only where /dev/urandom fails, see above
    return (require('crypto') as typeof NodeCrypto).randomBytes(n);
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/**
 * Random bytes for names and tokens, as hex, drawn from one larger batch of the system's generator:
 * a lock cycle needs several, and each call to the generator costs more than the name it makes.
 */
let pool: Buffer = Buffer.alloc(0);
let poolAt = 0;

export function randomHex(bytes: number): string {
  if (poolAt + bytes > pool.length) {
    pool = systemRandom(Math.max(4096, bytes));
    poolAt = 0;
  }
  poolAt += bytes;
  return pool.toString('hex', poolAt - bytes, poolAt);
}
