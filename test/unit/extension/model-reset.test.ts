/**
 * The model reset (a setting changed, Refresh) while its first listing of a static directory is
 * ending: whichever turn the reset lands in, the new generation lists the directory itself, and
 * keeps following it.
 */
import * as fs from 'fs';
import * as path from 'path';
import { LockStates } from '../../../src/core';
import * as inspect from '../../../src/core/lock/inspect';
import { cleanup, tempDir, waitFor } from '../../helpers';

const timing = { staleMs: 4_000, refreshMs: 1_000 };

describe('the model reset while it lists', function () {
  this.timeout(60_000);
  let root: string;
  let dir: string;
  const list = inspect.list;

  beforeEach(() => {
    root = tempDir('dss-model-reset-');
    dir = path.join(root, 'static');
    fs.mkdirSync(path.join(dir, 'eve', 'R1'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'eve', 'R1', 'staged.timestamp'), '');
  });
  afterEach(() => {
    (inspect as { list: typeof list }).list = list;
    cleanup(root);
  });

  for (let turns = 0; turns <= 4; turns++) {
    it(`a reset ${turns} turn${turns === 1 ? '' : 's'} after the root's listing ends: the folder is listed, and a build made after is seen`, async () => {
      const states = new LockStates(timing, { warn: () => undefined });
      let resets = 0;
      // The listing of the root resolves, and the reset comes that many microtasks later.
      (inspect as { list: typeof list }).list = (staticDir, subpath, options) =>
        list(staticDir, subpath, options).then((found) => {
          if (resets === 0 && (subpath === undefined || subpath === '')) {
            resets++;
            let later = Promise.resolve();
            for (let i = 0; i < turns; i++) later = later.then(() => undefined);
            void later.then(() => states.reset());
          }
          return found;
        });
      try {
        states.scan([dir]);
        await waitFor(() => (resets === 1 ? true : undefined), 5_000, 'the reset');
        await waitFor(() => (states.isListed(dir, 'eve') ? true : undefined), 5_000, 'the folder listed by the new generation');
        fs.mkdirSync(path.join(dir, 'R2'));
        fs.writeFileSync(path.join(dir, 'R2', 'staged.timestamp'), '');
        await waitFor(() => (states.record(dir, 'R2') !== undefined ? true : undefined), 5_000, 'the build made after, seen through the root');
      } finally {
        states.dispose();
      }
    });
  }
});
