/**
 * Audit first: when the audit line cannot be written (audit.log is a directory, a FIFO, or a file
 * the user may not write), force-release and destroy must not happen, and the error must say why
 * (naming the audit log). Each case runs the built CLI under a deadline, so a FIFO cannot hang it.
 */
import { strict as assert } from 'assert';
import { spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { cliTimed, describeRun, hasTool } from '../../attack';
import { CLI, cleanup, isRoot, tempDir, waitFor } from '../../helpers';

type Blocker = 'a directory' | 'a FIFO' | 'not writable by the user';

describe('attack: force-release and destroy that cannot be recorded', function () {
  this.timeout(120_000);
  const roots: string[] = [];
  after(() => roots.forEach(cleanup));

  /** A static dir (1777) with two areas made by `user` (or root), the audit log blocked. */
  async function sandbox(blocker: Blocker, user?: string): Promise<{ staticDir: string; audit: string; src: string }> {
    const root = tempDir('dss-attack-audit-');
    roots.push(root);
    fs.chmodSync(root, 0o755);
    const staticDir = path.join(root, 'static');
    fs.mkdirSync(staticDir);
    fs.chmodSync(staticDir, 0o1777);
    const src = path.join(root, 'src');
    fs.mkdirSync(src);
    fs.writeFileSync(path.join(src, 'a.bin'), 'a\n');
    for (const tag of ['board/held', 'board/doomed']) {
      const r = await cliTimed(staticDir, ['stage', tag, src], { timeoutMs: 20_000, user });
      assert.equal(r.code, 0, describeRun(`set-up stage ${tag}`, r));
    }
    const meta = path.join(staticDir, '.devserver-staging');
    fs.mkdirSync(meta, { recursive: true });
    fs.chmodSync(meta, 0o1777);
    const audit = path.join(meta, 'audit.log');
    fs.rmSync(audit, { recursive: true, force: true });
    if (blocker === 'a directory') fs.mkdirSync(audit);
    else if (blocker === 'a FIFO') assert.equal(spawnSync('mkfifo', [audit]).status, 0);
    else {
      fs.writeFileSync(audit, '{"earlier":"line"}\n', { mode: 0o644 });
      fs.chmodSync(audit, 0o644);
    }
    return { staticDir, audit, src };
  }

  const cases: { blocker: Blocker; user?: string }[] = [{ blocker: 'a directory' }, { blocker: 'a FIFO' }, { blocker: 'not writable by the user', user: 'nobody' }];

  for (const { blocker, user } of cases) {
    describe(`audit.log ${blocker}${user ? ` (CLI run as ${user})` : ''}`, () => {
      before(function () {
        if (user !== undefined && (!isRoot || !hasTool('runuser'))) {
          console.log(`      skipped: needs root and runuser to act as ${user}`);
          this.skip();
        }
        if (blocker === 'a FIFO' && !hasTool('mkfifo')) {
          console.log('      skipped: needs mkfifo');
          this.skip();
        }
      });

      it('force-release does not happen and says why', async () => {
        const s = await sandbox(blocker, user);
        // A live holder, of the same user, whose lock the force-release would remove.
        const lockDir = path.join(s.staticDir, 'board/held/devserver.lock');
        const argv = user === undefined ? [process.execPath, CLI] : ['runuser', '-u', user, '--', process.execPath, CLI];
        const holder = spawn(argv[0], [...argv.slice(1), 'lock', 'board/held', '--', 'sleep', '60'], { env: { ...process.env, DEVSERVER_STATIC_DIR: s.staticDir }, stdio: 'ignore' });
        try {
          await waitFor(() => (fs.existsSync(path.join(lockDir, 'owner.json')) ? true : undefined), 15_000, 'the holder to take board/held');
          const ownerBefore = fs.readFileSync(path.join(lockDir, 'owner.json'), 'utf8');
          const r = await cliTimed(s.staticDir, ['force-release', 'board/held'], { timeoutMs: 15_000, user });
          let ownerAfter: string | undefined;
          try {
            ownerAfter = fs.readFileSync(path.join(lockDir, 'owner.json'), 'utf8');
          } catch {
            ownerAfter = undefined;
          }
          const problems: string[] = [];
          if (r.hung) problems.push('it hung');
          if (r.code === 0) problems.push('it exited 0');
          if (ownerAfter !== ownerBefore) problems.push(`the lock ${lockDir} was removed anyway (owner.json ${ownerAfter === undefined ? 'gone' : 'changed'})`);
          if (!/audit/i.test(r.stderr) || !r.stderr.includes(s.audit)) problems.push(`the error does not name the audit log ${s.audit}`);
          assert.ok(problems.length === 0, `force-release with audit.log ${blocker}: ${problems.join('; ')}\n  ${describeRun('force-release board/held', r)}`);
        } finally {
          holder.kill('SIGKILL');
        }
      });

      it('destroy does not happen and says why', async () => {
        const s = await sandbox(blocker, user);
        const area = path.join(s.staticDir, 'board/doomed');
        const r = await cliTimed(s.staticDir, ['destroy', 'board/doomed'], { timeoutMs: 15_000, user });
        const problems: string[] = [];
        if (r.hung) problems.push('it hung');
        if (r.code === 0) problems.push('it exited 0');
        if (!fs.existsSync(path.join(area, 'a.bin'))) problems.push(`the area ${area} was destroyed anyway`);
        if (!/audit/i.test(r.stderr) || !r.stderr.includes(s.audit)) problems.push(`the error does not name the audit log ${s.audit}`);
        assert.ok(problems.length === 0, `destroy with audit.log ${blocker}: ${problems.join('; ')}\n  ${describeRun('destroy board/doomed', r)}`);
      });
    });
  }
});
