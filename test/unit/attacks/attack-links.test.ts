/**
 * Symbolic links planted where the tool writes its own files: the clock probes under
 * `<static>/.devserver-staging/`, `audit.log`, the trash, `staged.timestamp`, the manifest, owner
 * records and the lock directory itself, and `.devserver-staging` as a whole. Every command, even
 * `list`, runs in a fresh sandbox with them planted; the files the links point to, outside the
 * static directory, are hashed before and after. A single change outside fails the command's test,
 * naming the file and what changed.
 *
 * A command that stops before the link it is run against proves nothing about that link, so each
 * run's exit code and words are checked against what reaching it gives, and the clock probe is
 * measured (`DEVSERVER_STAGING_CLOCK_PROBE=1`, which a local filesystem otherwise skips) with the
 * planted probe names old enough for its sweep: some of them must be gone afterwards. With a link
 * as `audit.log`, every removal stops at the log; the links at the locks and the trash are reached
 * in a second sandbox whose log is a plain file.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { changes, cliTimed, describeRun, fingerprint, nextPids, plantCanaries } from '../../attack';
import { cleanup, cli, report, tempDir } from '../../helpers';

interface Sandbox {
  root: string;
  staticDir: string;
  outside: string;
  src: string;
  /** The same names as src with other content. */
  src2: string;
  /** The clock probe names planted (none where `.devserver-staging` is a link). */
  probes: string[];
}

/**
 * Where the links are: 'all' of them; 'log is a file' (all but `audit.log`, so that removals get
 * past the log to the locks and the trash); 'meta is a link' (`.devserver-staging` itself a link
 * to a directory outside, besides the links in the areas).
 */
type Variant = 'all' | 'log is a file' | 'meta is a link';
const VARIANTS: Variant[] = ['all', 'log is a file', 'meta is a link'];

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

async function sandbox(variant: Variant): Promise<Sandbox> {
  const root = tempDir('dss-attack-links-');
  // Links copied as they are: a relative link made absolute would point into the template.
  fs.cpSync(template, root, { recursive: true, preserveTimestamps: true, verbatimSymlinks: true });
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
  const probes: string[] = [];
  if (variant === 'meta is a link') {
    fs.rmSync(meta, { recursive: true, force: true });
    fs.symlinkSync(path.join(outside, 'meta'), meta);
  } else {
    fs.mkdirSync(meta, { recursive: true });
    // An hour old: the probe's sweep takes such names for a dead writer's and unlinks them, so
    // those gone afterwards show the probe reached them.
    for (const pid of nextPids(1500)) {
      const p = path.join(meta, `clock.${pid}`);
      fs.symlinkSync(path.join(outside, 'clock-victim.txt'), p);
      fs.lutimesSync(p, old, old);
      probes.push(p);
    }
    fs.rmSync(path.join(meta, 'audit.log'), { force: true });
    if (variant === 'all') fs.symlinkSync(path.join(outside, 'audit-victim.txt'), path.join(meta, 'audit.log'));
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
  return { root, staticDir, outside, src, src2, probes };
}

/** What a run must show to have reached the link it is run against. */
interface Expect {
  code: number;
  /** Found in stdout + stderr, with the sandbox's root written as `<root>`. */
  says: RegExp;
  /** Whether it measures the filesystem's clock (default: it does). */
  measures?: false;
  /** What must be true of the static directory afterwards, where the words alone do not show it. */
  after?: (s: Sandbox) => string | undefined;
}

const LINK_REFUSED = 'is a symbolic link, not a file this tool wrote';
const AUDIT_LINK = /could not record it in <root>\/static\/\.devserver-staging\/audit\.log: it is a symbolic link, not a file this tool wrote/;
const META_LINK = /<root>\/static\/\.devserver-staging is a symbolic link/;
const TRASH_LINK = /Did not destroy <root>\/static\/board\/b[45]: ELOOP: <root>\/static\/\.devserver-staging\/trash is a symbolic link/;
const OWNER_LINK = new RegExp(`<root>/static/board/b3/devserver\\.lock/owner\\.json: it ${LINK_REFUSED}`);
const MANIFEST_LINK = new RegExp(`<root>/static/board/b1/\\.devserver-staging\\.manifest\\.json: it ${LINK_REFUSED}`);

/** `p` is now a regular file of the static directory (a link the tool replaced with its own file). */
const nowAFile =
  (rel: string) =>
  (s: Sandbox): string | undefined =>
    fs.lstatSync(path.join(s.staticDir, rel), { throwIfNoEntry: false })?.isFile() === true ? undefined : `${rel} is not a regular file now`;
const gone =
  (rel: string) =>
  (s: Sandbox): string | undefined =>
    fs.lstatSync(path.join(s.staticDir, rel), { throwIfNoEntry: false }) === undefined ? undefined : `${rel} is still there`;

/** Commands, and what each must give in each variant. */
const COMMANDS: { name: string; args: (s: Sandbox) => string[]; expect: Record<Variant, Expect> }[] = [
  { name: 'list', args: () => ['list'], expect: same({ code: 0, says: /folder\s+board\b/ }) },
  { name: 'list board', args: () => ['list', 'board'], expect: same({ code: 0, says: /held\s+board\/b3\s+\?[\s\S]*legacy\s+board\/b4\s+python@unknown/ }) },
  { name: '--json list board', args: () => ['--json', 'list', 'board'], expect: same({ code: 0, says: /"tag": "board\/b3"[\s\S]*"unreadable": "[^"]*owner\.json/ }) },
  // A free area: no lock to judge, so no clock to measure.
  { name: 'status board/b1', args: () => ['status', 'board/b1'], expect: same({ code: 0, says: /board\/b1: free/, measures: false }) },
  { name: 'status board/b3', args: () => ['status', 'board/b3'], expect: same({ code: 0, says: OWNER_LINK }) },
  { name: 'status board/b4', args: () => ['status', 'board/b4'], expect: same({ code: 0, says: /the Python devserver on unknown/ }) },
  { name: 'du', args: () => ['du'], expect: same({ code: 0, says: MANIFEST_LINK }) },
  { name: 'stage --add board/b1', args: (s) => ['stage', '--add', 'board/b1', s.src], expect: same({ code: 1, says: MANIFEST_LINK }) },
  { name: 'stage --add --overwrite board/b1', args: (s) => ['stage', '--add', '--overwrite', 'board/b1', s.src2], expect: same({ code: 1, says: MANIFEST_LINK }) },
  // The dangling link at staged.timestamp is replaced by the tool's own file, never written through.
  { name: 'stage --add board/b2', args: (s) => ['stage', '--add', 'board/b2', s.src], expect: same({ code: 0, says: /Staged board\/b2/, after: nowAFile('board/b2/staged.timestamp') }) },
  { name: 'stage board/new', args: (s) => ['stage', 'board/new', s.src], expect: same({ code: 0, says: /Staged board\/new \(new build\)/, after: nowAFile('board/new/staged.timestamp') }) },
  { name: 'lock board/b1 -- true', args: () => ['lock', 'board/b1', '--', 'true'], expect: same({ code: 0, says: /^/ }) },
  { name: 'lock board/b3 -- true', args: () => ['lock', 'board/b3', '--', 'true'], expect: same({ code: 3, says: OWNER_LINK }) },
  {
    name: 'force-release board/b3',
    args: () => ['force-release', 'board/b3'],
    expect: {
      all: { code: 1, says: AUDIT_LINK },
      'log is a file': { code: 0, says: /Released <root>\/static\/board\/b3\/devserver\.lock/, after: gone('board/b3/devserver.lock') },
      'meta is a link': { code: 1, says: META_LINK },
    },
  },
  {
    name: 'force-release board/b4',
    args: () => ['force-release', 'board/b4'],
    expect: {
      all: { code: 1, says: AUDIT_LINK },
      'log is a file': { code: 0, says: /Released <root>\/static\/board\/b4\/devserver\.lock/, after: gone('board/b4/devserver.lock') },
      'meta is a link': { code: 1, says: META_LINK },
    },
  },
  {
    name: 'destroy board/b5',
    args: () => ['destroy', 'board/b5'],
    expect: {
      all: { code: 1, says: AUDIT_LINK },
      'log is a file': { code: 1, says: TRASH_LINK },
      'meta is a link': { code: 1, says: META_LINK },
    },
  },
  {
    name: 'destroy --force board/b4',
    args: () => ['destroy', '--force', 'board/b4'],
    expect: {
      all: { code: 1, says: AUDIT_LINK },
      'log is a file': { code: 1, says: TRASH_LINK },
      'meta is a link': { code: 1, says: META_LINK },
    },
  },
  {
    name: 'prune --keep 0',
    args: () => ['prune', '--keep', '0'],
    expect: {
      all: { code: 1, says: AUDIT_LINK },
      'log is a file': { code: 1, says: /skipped\s+board\/b3 .*owner\.json: it is a symbolic link[\s\S]*failed\s+board\/b5 .*trash is a symbolic link/ },
      'meta is a link': { code: 1, says: META_LINK },
    },
  },
];

function same(e: Expect): Record<Variant, Expect> {
  return { all: e, 'log is a file': e, 'meta is a link': e };
}

describe('attack: symbolic links planted where the tool writes its own files', function () {
  this.timeout(60_000);
  if (process.platform !== 'linux') return;
  before(async () => {
    template = await makeTemplate();
  });
  after(() => cleanup(template));

  for (const variant of VARIANTS) {
    const where =
      variant === 'meta is a link'
        ? '.devserver-staging itself a link to a directory outside'
        : `links at the probes, ${variant === 'all' ? 'audit.log, ' : ''}trash, staged.timestamp, manifest, owner.json, devserver.lock${variant === 'all' ? '' : ' (audit.log a file)'}`;
    describe(where, () => {
      for (const c of COMMANDS) {
        it(`${c.name} writes nothing through them`, async () => {
          const s = await sandbox(variant);
          try {
            const before = fingerprint(s.outside);
            const r = await cliTimed(s.staticDir, c.args(s), { timeoutMs: 20_000, env: { DEVSERVER_STAGING_CLOCK_PROBE: '1' } });
            const diff = changes(s.outside, before, fingerprint(s.outside));
            const swept = s.probes.filter((p) => fs.lstatSync(p, { throwIfNoEntry: false }) === undefined).length;
            const words = `${r.stdout}\n${r.stderr}`.split(s.root).join('<root>');
            report(`${describeRun(c.name, r).split(s.root).join('<root>')}; ${s.probes.length === 0 ? 'no probe names planted' : `${swept} of ${s.probes.length} planted probe names swept`}`);
            assert.ok(diff.length === 0, `${describeRun(c.name, r)}\nchanged outside the static directory:\n  ${diff.join('\n  ')}`);
            assert.ok(!r.hung, describeRun(c.name, r));
            // It reached what it was run against: its exit code and words say so.
            const want = c.expect[variant];
            assert.equal(r.code, want.code, `${c.name}: exit ${r.code}, expected ${want.code}: it did not reach what was planted.\n${words}`);
            assert.match(words, want.says, `${c.name}: its words do not show it reached what was planted:\n${words}`);
            const afterwards = want.after?.(s);
            assert.equal(afterwards, undefined, `${c.name}: ${afterwards}`);
            // A command that measures the filesystem's clock met the planted probe names in its sweep.
            if (s.probes.length > 0 && want.measures !== false) assert.ok(swept > 0, `${c.name}: none of the ${s.probes.length} planted probe names was reached by the clock probe`);
          } finally {
            cleanup(s.root);
          }
        });
      }
    });
  }
});
