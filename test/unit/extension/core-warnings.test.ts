/**
 * What the core reports without failing reaches the extension's log: a planted link where a build's
 * history belongs is reported by the real core through `process.emitWarning`, and `logCoreWarnings`
 * (what activate() installs) logs it once, again only after its quiet time, and nothing else.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { history, lastHeld } from '../../../src/core/log/history';
import { acquire } from '../../../src/core/lock/lock';
import { HISTORY_DIR, META_DIR, historyDirOf, historyHostName, historySegmentName } from '../../../src/core/base/protocol';
import { logCoreWarnings } from '../../../src/extension/coreWarnings';
import { cleanup, tempDir } from '../../helpers';

/** Lets the warnings emitted so far be delivered: Node emits them on the next tick. */
const delivered = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('core warnings in the extension log', () => {
  let root: string;
  let staticDir: string;
  const tag = 'board/R1-1.0.0';
  const logged: string[] = [];
  let clock = 0;
  let handle: { dispose(): void };

  beforeEach(async () => {
    root = tempDir('core-warnings-');
    staticDir = path.join(root, 'static');
    fs.mkdirSync(path.join(staticDir, tag), { recursive: true });
    // One real lock cycle, so the tag has a history directory and this host a segment in it.
    const lease = await acquire(staticDir, tag, { createOnce: false });
    await lease.release();
    logged.length = 0;
    clock = 0;
    handle = logCoreWarnings({ warn: (m: string) => void logged.push(m) }, 60_000, () => clock);
  });

  afterEach(() => {
    handle.dispose();
    cleanup(root);
  });

  it("logs a planted link in a build's history once, and again after the quiet time", async () => {
    const segment = path.join(staticDir, META_DIR, HISTORY_DIR, ...historyDirOf(tag), historySegmentName(historyHostName(os.hostname()), 0));
    fs.rmSync(segment);
    fs.symlinkSync('/etc/passwd', segment);
    // What the details page and the tooltip call, with no `warn` of their own.
    assert.deepEqual(await history(staticDir, { tag }), []);
    await lastHeld(staticDir, tag);
    await delivered();
    assert.equal(logged.length, 1, `logged: ${JSON.stringify(logged)}`);
    assert.match(logged[0], /symbolic link/);
    await history(staticDir, { tag });
    clock = 59_000;
    await history(staticDir, { tag });
    await delivered();
    assert.equal(logged.length, 1, 'the same warning within the quiet time is not logged again');
    clock = 61_000;
    await history(staticDir, { tag });
    await delivered();
    assert.equal(logged.length, 2);
  });

  it("ignores other warnings, and logs nothing once disposed", async () => {
    process.emitWarning('something else', { type: 'SomeOtherWarning' });
    await delivered();
    assert.deepEqual(logged, []);
    handle.dispose();
    process.emitWarning('after', { type: 'DevserverStagingWarning' });
    await delivered();
    assert.deepEqual(logged, []);
  });
});
