/**
 * Symbolic links planted where the tool writes its own files: the clock probes under
 * `<static>/.devserver-staging/`, `audit.log`, the trash, `staged.timestamp`, the manifest, owner
 * records and the lock directory itself, and `.devserver-staging` as a whole. Every command, even
 * `list`, runs in a fresh sandbox with all of them planted; the files the links point to, outside the
 * static directory, are hashed before and after. A single change outside fails the command's test,
 * naming the file and what changed.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { changes, cliTimed, describeRun, fingerprint, nextPids, plantCanaries } from '../attack';
import { cleanup, cli, tempDir } from '../helpers';

interface Sandbox {
  root: string;
  staticDir: string;
  outside: string;
  src: string;
  /** The same names as src with other content. */
  src2: string;
}

/** Areas: board/b1 (staged), board/b2 (staged, dangling timestamp link), board/b3 (lock whose owner.json is a link), board/b4 (devserver.lock is a link to a directory outside), board/b5 (staged, to destroy). */
let template = '';

/** Three staged areas, made once with the CLI and copied for each test. */
async function makeTemplate(): Promise<string> {
  const t = tempDir('dss-attack-links-template-');
  const src = path.join(t, 'src');
  fs.mkdirSync(path.join(t, 'static'));
  fs.mkdirSync(path.join(src, 'more'), { recursive: true });
  fs.writeFileSync(path.join(src, 'a.bin'), 'artifact a\n');
  fs.writeFileSync(path.join(src, 'more', 'b.bin'), 'artifact b\n');
  const src2 = path.join(t, 'src2');
  fs.mkdirSync(path.join(src2, 'more'), { recursive: true });
  fs.writeFileSync(path.join(src2, 'a.bin'), 'artifact a, second version\n');
  fs.writeFileSync(path.join(src2, 'more', 'b.bin'), 'artifact b, second version\n');
  for (const tag of ['board/b1', 'board/b2', 'board/b5']) {
    const r = await cli(path.join(t, 'static'), ['stage', tag, src]);
    assert.equal(r.code, 0, `set-up stage ${tag}: ${r.stderr}`);
  }
  fs.rmSync(path.join(t, 'static', '.devserver-staging'), { recursive: true, force: true });
  return t;
}

async function sandbox(metaAsLink: boolean): Promise<Sandbox> {
  const root = tempDir('dss-attack-links-');
  fs.cpSync(template, root, { recursive: true, preserveTimestamps: true });
  const staticDir = path.join(root, 'static');
  const outside = path.join(root, 'outside');
  const src = path.join(root, 'src');
  const src2 = path.join(root, 'src2');
  const manifestText = fs.readFileSync(path.join(staticDir, 'board/b1/.devserver-staging.manifest.json'), 'utf8');
  plantCanaries(outside, {
    'clock-victim.txt': 'clock probes must not write here\n',
    'audit-victim.txt': 'the audit log must not be appended here\n',
    'timestamp-victim.txt': 'staged.timestamp must not touch this\n',
    'manifest-victim.json': manifestText,
    'owner-victim.json': JSON.stringify({ pid: 1, hostname: 'elsewhere', token: 'x' }),
    'lockdir/owner.json': JSON.stringify({ pid: 999999, hostname: 'elsewhere', token: 'y', acquiredAt: 0, staleMs: 10000, refreshMs: 2500 }),
    'lockdir/keep.txt': 'inside the directory devserver.lock points to\n',
    'meta/audit.log': 'an outside directory standing in for .devserver-staging\n',
  });
  const old = new Date(Date.now() - 3600_000);
  fs.utimesSync(path.join(outside, 'timestamp-victim.txt'), old, old);

  const meta = path.join(staticDir, '.devserver-staging');
  if (metaAsLink) {
    fs.rmSync(meta, { recursive: true, force: true });
    fs.symlinkSync(path.join(outside, 'meta'), meta);
  } else {
    fs.mkdirSync(meta, { recursive: true });
    for (const pid of nextPids(1500)) fs.symlinkSync(path.join(outside, 'clock-victim.txt'), path.join(meta, `clock.${pid}`));
    fs.rmSync(path.join(meta, 'audit.log'), { force: true });
    fs.symlinkSync(path.join(outside, 'audit-victim.txt'), path.join(meta, 'audit.log'));
    fs.rmSync(path.join(meta, 'trash'), { recursive: true, force: true });
    fs.mkdirSync(path.join(outside, 'trash-target'));
    fs.symlinkSync(path.join(outside, 'trash-target'), path.join(meta, 'trash'));
  }
  const b1 = path.join(staticDir, 'board/b1');
  fs.rmSync(path.join(b1, 'staged.timestamp'));
  fs.symlinkSync(path.join(outside, 'timestamp-victim.txt'), path.join(b1, 'staged.timestamp'));
  fs.rmSync(path.join(b1, '.devserver-staging.manifest.json'));
  fs.symlinkSync(path.join(outside, 'manifest-victim.json'), path.join(b1, '.devserver-staging.manifest.json'));
  const b2 = path.join(staticDir, 'board/b2');
  fs.rmSync(path.join(b2, 'staged.timestamp'));
  fs.symlinkSync(path.join(outside, 'timestamp-created-by-tool'), path.join(b2, 'staged.timestamp'));
  const b3lock = path.join(staticDir, 'board/b3/devserver.lock');
  fs.mkdirSync(b3lock, { recursive: true });
  fs.symlinkSync(path.join(outside, 'owner-victim.json'), path.join(b3lock, 'owner.json'));
  const old2 = new Date(Date.now() - 600_000);
  fs.utimesSync(b3lock, old2, old2);
  fs.mkdirSync(path.join(staticDir, 'board/b4'), { recursive: true });
  fs.symlinkSync(path.join(outside, 'lockdir'), path.join(staticDir, 'board/b4/devserver.lock'));
  return { root, staticDir, outside, src, src2 };
}

const COMMANDS: { name: string; args: (s: Sandbox) => string[] }[] = [
  { name: 'list', args: () => ['list'] },
  { name: 'list board', args: () => ['list', 'board'] },
  { name: '--json list board', args: () => ['--json', 'list', 'board'] },
  { name: 'status board/b1', args: () => ['status', 'board/b1'] },
  { name: 'status board/b3', args: () => ['status', 'board/b3'] },
  { name: 'status board/b4', args: () => ['status', 'board/b4'] },
  { name: 'du', args: () => ['du'] },
  { name: 'stage --add board/b1', args: (s) => ['stage', '--add', 'board/b1', s.src] },
  { name: 'stage --add --overwrite board/b1', args: (s) => ['stage', '--add', '--overwrite', 'board/b1', s.src2] },
  { name: 'stage --add board/b2', args: (s) => ['stage', '--add', 'board/b2', s.src] },
  { name: 'stage board/new', args: (s) => ['stage', 'board/new', s.src] },
  { name: 'lock board/b1 -- true', args: () => ['lock', 'board/b1', '--', 'true'] },
  { name: 'lock board/b3 -- true', args: () => ['lock', 'board/b3', '--', 'true'] },
  { name: 'force-release board/b3', args: () => ['force-release', 'board/b3'] },
  { name: 'force-release board/b4', args: () => ['force-release', 'board/b4'] },
  { name: 'destroy board/b5', args: () => ['destroy', 'board/b5'] },
  { name: 'destroy --force board/b4', args: () => ['destroy', '--force', 'board/b4'] },
  { name: 'prune --keep 0', args: () => ['prune', '--keep', '0'] },
];

describe('attack: symbolic links planted where the tool writes its own files', function () {
  this.timeout(60_000);
  if (process.platform !== 'linux') return;
  before(async () => {
    template = await makeTemplate();
  });
  after(() => cleanup(template));

  for (const metaAsLink of [false, true]) {
    const where = metaAsLink ? '.devserver-staging itself a link to a directory outside' : 'links at the probes, audit.log, trash, staged.timestamp, manifest, owner.json, devserver.lock';
    describe(where, () => {
      for (const c of COMMANDS) {
        it(`${c.name} writes nothing through them`, async () => {
          const s = await sandbox(metaAsLink);
          try {
            const before = fingerprint(s.outside);
            const r = await cliTimed(s.staticDir, c.args(s), { timeoutMs: 20_000 });
            const diff = changes(s.outside, before, fingerprint(s.outside));
            assert.ok(diff.length === 0, `${describeRun(c.name, r)}\nchanged outside the static directory:\n  ${diff.join('\n  ')}`);
            assert.ok(!r.hung, describeRun(c.name, r));
          } finally {
            cleanup(s.root);
          }
        });
      }
    });
  }
});
