/**
 * The details page's summary of a manifest: its stagings by fencing token and its first artifacts
 * by name, counted once each, and worked out with the event loop given turns.
 */
import { strict as assert } from 'assert';
import type { ManifestEntry } from '../../../src/core';
import { summarize } from '../../../src/extension/details/summary';

function entry(name: string, size: number, stagedAt: string, fence?: number): ManifestEntry {
  return { name, type: 'file', size, sha256: '0'.repeat(64), source: `/out/${name}`, stagedAt, ...(fence !== undefined ? { fence } : {}) };
}

describe('the details page’s summary of a manifest', () => {
  it('groups the stagings by token, oldest first, and sorts the names as the user’s language does', async () => {
    const entries = [
      entry('b.bin', 10, '2026-01-02T00:00:00.000Z', 4),
      entry('A.bin', 1, '2026-01-01T00:00:00.000Z'),
      entry('a.bin', 2, '2026-01-03T00:00:00.000Z', 4),
      entry('c.bin', 100, '2026-01-01T12:00:00.000Z', 2),
    ];
    const s = await summarize(entries, 3);
    assert.equal(s.count, 4);
    assert.equal(s.bytes, 113);
    assert.deepEqual(s.stagings, [
      { fence: undefined, latest: '2026-01-01T00:00:00.000Z', count: 1, bytes: 1 },
      { fence: 2, latest: '2026-01-01T12:00:00.000Z', count: 1, bytes: 100 },
      { fence: 4, latest: '2026-01-03T00:00:00.000Z', count: 2, bytes: 12 },
    ]);
    assert.deepEqual(
      s.first.map((e) => e.name),
      [...entries].sort((x, y) => x.name.localeCompare(y.name)).slice(0, 3).map((e) => e.name),
    );
  });

  it('takes 100,000 artifacts of one staging in one pass, giving the event loop turns', async () => {
    const entries = Array.from({ length: 100_000 }, (_, i) => entry(`dir/f-${String(99_999 - i).padStart(6, '0')}`, 1, '2026-01-01T00:00:00.000Z', 9));
    let turns = 0;
    const tick = setInterval(() => turns++, 1);
    const s = await summarize(entries, 2_000);
    clearInterval(tick);
    assert.deepEqual(s.stagings, [{ fence: 9, latest: '2026-01-01T00:00:00.000Z', count: 100_000, bytes: 100_000 }]);
    assert.equal(s.first.length, 2_000);
    assert.equal(s.first[0].name, 'dir/f-000000');
    assert.equal(s.first[1_999].name, 'dir/f-001999');
    assert.ok(turns > 0, 'a timer ran while the summary was made');
  });
});
