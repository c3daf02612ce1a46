/**
 * One racer of reserve.test.ts: releases the reservation named by its token, or reserves the
 * build waiting in line, and prints what happened as one JSON line.
 */
import { isStagingError } from '../../src/core/base/errors';
import { releaseReservation, reserve } from '../../src/core/reserve';

const [staticDir, tag, what, token] = process.argv.slice(2);

async function main(): Promise<object> {
  try {
    if (what === 'release') {
      await releaseReservation(staticDir, tag, { token });
      return { what, ok: true };
    }
    const info = await reserve(staticDir, tag, { forMs: 3_600_000, waitMs: 20_000, note: 'racer' });
    return { what, ok: true, token: info.holder?.token };
  } catch (err) {
    return { what, ok: false, code: isStagingError(err) ? err.code : String(err) };
  }
}

void main().then((r) => process.stdout.write(`${JSON.stringify(r)}\n`));
