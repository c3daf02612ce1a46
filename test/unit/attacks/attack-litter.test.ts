/**
 * A build renamed to a name the protocol clears as litter. Whoever takes an area's lock removes
 * the leftovers of dead and fenced holders in it: `devserver.lock.fenced.*`, `devserver.lock.trash.*`
 * and `devserver.lock.new.*` of a dead process, `.devserver-staging.part.*`. A co-user who may
 * rename entries of a folder (no sticky bit) but not delete another's files could rename a build
 * there to such a name, and have the next holder of the folder, perhaps root, delete it. A build
 * is never litter: every such rename is made, the folder is locked (which must succeed, so the
 * clean-up ran), and the build is still there, byte for byte.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { fingerprint } from '../../attack';
import { cleanup, cli, deadPid, tempDir } from '../../helpers';

describe('attack: a build renamed to a litter name', function () {
  this.timeout(120_000);
  let root: string;
  let staticDir: string;
  let src: string;

  beforeEach(() => {
    root = tempDir('dss-attack-litter-');
    staticDir = path.join(root, 'static');
    src = path.join(root, 'src');
    fs.mkdirSync(staticDir);
    fs.mkdirSync(src);
    fs.writeFileSync(path.join(src, 'image.bin'), 'a staged image\n');
    fs.mkdirSync(path.join(src, 'autotest'));
    fs.writeFileSync(path.join(src, 'autotest', 'control'), 'a control file\n');
  });

  afterEach(() => cleanup(root));

  const host = os.hostname();
  const names: [string, () => Promise<string>][] = [
    ['fenced', () => Promise.resolve('devserver.lock.fenced.mallory')],
    ['trash of a dead process here', async () => `devserver.lock.trash.${host}.${await deadPid()}.0123456789ab`],
    ['new lock of a dead process here', async () => `devserver.lock.new.${host}.${await deadPid()}.0123456789ab`],
    ['partial file of an earlier version', () => Promise.resolve('.devserver-staging.part.mallory')],
  ];
  for (const [what, name] of names) {
    it(`${what}: locking the folder keeps the build`, async () => {
      const staged = await cli(staticDir, ['stage', 'eve/R1', src]);
      assert.equal(staged.code, 0, staged.stderr);
      const litterName = await name();
      const renamed = path.join(staticDir, 'eve', litterName);
      fs.renameSync(path.join(staticDir, 'eve', 'R1'), renamed);
      const before = fingerprint(renamed);
      assert.ok(fs.existsSync(path.join(renamed, 'image.bin')), 'the build is there under its new name');

      const locked = await cli(staticDir, ['lock', 'eve', '--', 'true']);
      assert.equal(locked.code, 0, `the folder was locked, so its litter was cleared: ${locked.stderr}`);
      assert.ok(fs.existsSync(renamed), `${litterName} (a build) is still there`);
      assert.deepEqual(fingerprint(renamed), before, 'and unchanged, byte for byte');
    });
  }
});
