/**
 * Staging through a client of a network filesystem (sshfs, default options). An sshfs client
 * refuses to read a link whose target holds `..` or starts with `/` (EPERM), so the last check of a
 * staging, which follows every link of the area once more as the kernel would, cannot read such a
 * link there. A link that leads out only through another link (`a -> l/../..` beside `l -> ..`)
 * must still be refused, and a plain relative link into the build still staged.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { runCli } from '../../commit';
import { killAll, report, tempDir, cleanup } from '../../helpers';
import { startSshfs, whyNoSshfs, type SshfsExport } from '../../sshfs';

describe('staging through an sshfs client', function () {
  this.timeout(120_000);
  let nfs: SshfsExport | undefined;
  let src = '';

  before(async function () {
    const why = await whyNoSshfs();
    if (why !== undefined) {
      report(`skipped: ${why}`);
      this.skip();
    }
    nfs = await startSshfs('dss-stage-sshfs-');
    src = tempDir('dss-stage-sshfs-src-');
  });
  after(async () => {
    await killAll();
    await nfs?.stop();
    if (src !== '') cleanup(src);
  });

  it('refuses a link that leads out through another link, though the client cannot read either', async () => {
    const out = path.join(src, 'escape');
    fs.mkdirSync(path.join(out, 'x', 'y'), { recursive: true });
    fs.writeFileSync(path.join(out, 'x', 'file'), 'data\n');
    fs.symlinkSync('..', path.join(out, 'x', 'y', 'l'));
    fs.symlinkSync('l/../..', path.join(out, 'x', 'y', 'a'));
    // What the attack relies on: the client cannot read either link.
    fs.mkdirSync(path.join(nfs!.exportDir, 'probe', 'y'), { recursive: true });
    fs.symlinkSync('..', path.join(nfs!.exportDir, 'probe', 'y', 'l'));
    assert.throws(() => fs.readlinkSync(path.join(nfs!.mountA, 'probe', 'y', 'l')), /EPERM/, 'sshfs refuses to read a link to ..');
    const r = await runCli(['stage', 'b/escape', out], { staticDir: nfs!.mountA });
    report(`stage through client A: exit ${String(r.code)}: ${r.stderr.trim().split('\n').pop() ?? ''}`);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /EUNSAFE|leads outside|cannot be read/);
    assert.equal(fs.existsSync(path.join(nfs!.exportDir, 'b', 'escape')), false, 'nothing of the refused staging is left');
  });

  it('stages a build whose links stay inside, one with .. among them', async () => {
    const ok = path.join(src, 'fine');
    fs.mkdirSync(path.join(ok, 'x', 'y'), { recursive: true });
    fs.writeFileSync(path.join(ok, 'x', 'file'), 'data\n');
    fs.symlinkSync('../file', path.join(ok, 'x', 'y', 'up'));
    fs.symlinkSync('file', path.join(ok, 'x', 'same'));
    const r = await runCli(['stage', 'b/fine', ok], { staticDir: nfs!.mountA });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(fs.readlinkSync(path.join(nfs!.exportDir, 'b', 'fine', 'x', 'y', 'up')), '../file');
  });
});
