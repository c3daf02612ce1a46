/**
 * Hostile archives through stage(), end to end: hundreds of generated .tar, .tar.gz, .tar.xz and
 * .zip files that try to leave the area, plant links, read what is not theirs, or take the
 * lock's and the manifest's names. Each is staged as a new build and added into an area that
 * already holds artifacts, in a sandbox whose every file around the static directory is watched.
 * Then a few tricky but legal archives, which must stage whole.
 */
import { strict as assert } from 'assert';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { StagingError } from '../../../src/core/base/errors';
import { inspect } from '../../../src/core/lock/inspect';
import { META_DIR, TRASH_DIR } from '../../../src/core/base/protocol';
import { stage } from '../../../src/core/stage/stage';
import { MANIFEST_FILE, PART_PREFIX, TIMESTAMP_FILE, type Manifest } from '../../../src/core/stage/types';
import { differences, partsIn, sha, tree, writeArchives, type ArchiveSpec, type EntrySpec, type FixtureKind } from '../../fixtures';
import { cleanup, tempDir } from '../../helpers';

const TAR: readonly FixtureKind[] = ['tar', 'tar.gz', 'tar.xz'];
const ZIP: readonly FixtureKind[] = ['zip'];
const ALL: readonly FixtureKind[] = [...TAR, ...ZIP];

/** Where staging must never write: checked to be absent after every call (and removed at the end). */
const VICTIM = `dss-planted-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
const TMP_VICTIM = `/tmp/${VICTIM}`;
const ETC_VICTIM = `/etc/${VICTIM}`;
/** Replaced by the sandbox root once it exists (archives may name it absolutely). */
const ROOT = '@ROOT@';

interface HostileCase {
  id: string;
  what: string;
  kinds: readonly FixtureKind[];
  entries: EntrySpec[];
  /** The entry the error must name, as the archive stores it. */
  offender: string;
  format?: ArchiveSpec['format'];
  globalPax?: Record<string, string>;
  /** Why this one may fail as ESOURCE (the archive reader refuses it first) instead of EUNSAFE. */
  esource?: string;
  /** Never after the legal prefix (which the case would make hostile itself). */
  noPrefix?: boolean;
}

const file = (name: string, data = `content of ${name}\n`): EntrySpec => ({ name, data });
const dir = (name: string): EntrySpec => ({ name, type: 'dir' });
const symlink = (name: string, linkname: string): EntrySpec => ({ name, type: 'symlink', linkname });
const hardlink = (name: string, linkname: string): EntrySpec => ({ name, type: 'hardlink', linkname });

/**
 * A chain of links, each of which stays inside the area when read as written, that ends in
 * `<sandbox>/<rest>` when followed. The area is `<sandbox>/static/<two-segment tag>`, three levels
 * below the sandbox; `l1` climbs back up to `<top>` for real, so `l1/../../../..` leaves the area
 * although, as text, it only climbs from `<top>/b/c/d/l1` back to `<top>`.
 */
function chain(top: string, rest: string): { entries: EntrySpec[]; link: string } {
  const d = `${top}/b/c/d`;
  return {
    entries: [dir(`${top}/`), dir(`${top}/b/`), dir(`${top}/b/c/`), dir(d), symlink(`${d}/l1`, '../../..'), symlink(`${d}/l2`, `l1/../../../../${rest}`)],
    link: `${d}/l2`,
  };
}

function hostileCases(): HostileCase[] {
  const cases: HostileCase[] = [];
  const add = (c: HostileCase): void => void cases.push(c);

  // Names that climb out.
  add({ id: 'slip-up', what: 'a name starting with ../', kinds: ALL, entries: [file('../slip-up.txt')], offender: '../slip-up.txt' });
  add({ id: 'slip-mid', what: 'a/../../x', kinds: ALL, entries: [file('a/../../slip-mid.txt')], offender: 'a/../../slip-mid.txt' });
  add({ id: 'slip-outside', what: 'climbing to the sibling directory outside', kinds: ALL, entries: [file('../../../outside/planted.txt')], offender: '../../../outside/planted.txt' });
  add({ id: 'slip-static2', what: 'climbing to the sibling static2 (a prefix of static)', kinds: ALL, entries: [file('../../../static2/planted.txt')], offender: '../../../static2/planted.txt' });
  add({ id: 'slip-deep', what: 'a legal prefix, then three levels up', kinds: ALL, entries: [dir('ok'), file('ok/../../../outside/planted-deep.txt')], offender: 'ok/../../../outside/planted-deep.txt' });
  add({ id: 'slip-dot', what: './../x', kinds: ALL, entries: [file('./../slip-dot.txt')], offender: './../slip-dot.txt' });
  add({ id: 'slip-dotseg', what: 'a/./../../x', kinds: ALL, entries: [file('a/./../../slip-dotseg.txt')], offender: 'a/./../../slip-dotseg.txt' });
  add({ id: 'slip-dir', what: 'a directory entry ../dir', kinds: ALL, entries: [dir('../slip-dir')], offender: '../slip-dir' });
  add({ id: 'slip-dotdot', what: 'a directory entry named ..', kinds: ALL, entries: [dir('..'), file('x-after-dotdot.txt')], offender: '..' });
  add({
    id: 'slip-long',
    what: 'a slip hidden in a long (GNU long name) path',
    kinds: ALL,
    entries: [file(`${'a/'.repeat(60)}${'../'.repeat(61)}slip-long.txt`)],
    offender: `${'a/'.repeat(60)}${'../'.repeat(61)}slip-long.txt`,
  });
  add({ id: 'slip-backslash', what: '..\\x (Windows separators)', kinds: ALL, entries: [file('..\\slip-bs.txt')], offender: '..\\slip-bs.txt' });
  add({ id: 'slip-backslash-mid', what: 'sub\\..\\..\\x', kinds: ALL, entries: [file('sub\\..\\..\\slip-bs2.txt')], offender: 'sub\\..\\..\\slip-bs2.txt' });
  add({ id: 'backslash', what: 'a backslash inside a name', kinds: ALL, entries: [file('evil\\name.txt')], offender: 'evil\\name.txt' });

  // Absolute names.
  add({ id: 'abs-tmp', what: 'an absolute name in /tmp', kinds: ALL, entries: [file(TMP_VICTIM)], offender: TMP_VICTIM });
  add({ id: 'abs-etc', what: 'an absolute name in /etc', kinds: ALL, entries: [file(ETC_VICTIM)], offender: ETC_VICTIM });
  add({ id: 'abs-double', what: 'a name starting with //', kinds: ALL, entries: [file(`/${ETC_VICTIM}`)], offender: `/${ETC_VICTIM}` });
  add({ id: 'abs-sandbox', what: 'the absolute path of the outside directory', kinds: ALL, entries: [file(`${ROOT}/outside/planted-abs.txt`)], offender: `${ROOT}/outside/planted-abs.txt` });
  add({ id: 'abs-static2', what: 'the absolute path of static2', kinds: ALL, entries: [file(`${ROOT}/static2/planted-abs.txt`)], offender: `${ROOT}/static2/planted-abs.txt` });
  add({ id: 'abs-drive', what: 'a drive letter', kinds: ALL, entries: [file('C:/Windows/planted.txt')], offender: 'C:/Windows/planted.txt' });
  add({ id: 'abs-dir', what: 'an absolute directory entry', kinds: ALL, entries: [dir(`${TMP_VICTIM}-dir`)], offender: `${TMP_VICTIM}-dir` });
  add({ id: 'abs-link-name', what: 'a symbolic link with an absolute name', kinds: ALL, entries: [symlink(`${TMP_VICTIM}-link`, 'x')], offender: `${TMP_VICTIM}-link` });

  // Symbolic links.
  add({ id: 'ln-abs', what: 'a link to /etc/passwd', kinds: ALL, entries: [symlink('passwd', '/etc/passwd')], offender: 'passwd' });
  add({ id: 'ln-abs-sandbox', what: 'a link to the outside directory by absolute path', kinds: ALL, entries: [symlink('out-abs', `${ROOT}/outside`)], offender: 'out-abs' });
  add({ id: 'ln-root', what: 'a link to /', kinds: ALL, entries: [symlink('rootfs', '/')], offender: 'rootfs' });
  add({ id: 'ln-up', what: 'a link ../../../outside', kinds: ALL, entries: [symlink('out-rel', '../../../outside')], offender: 'out-rel' });
  add({ id: 'ln-up-deep', what: 'a nested link that climbs one level too many', kinds: ALL, entries: [dir('a/b'), symlink('a/b/escape', '../../../x')], offender: 'a/b/escape' });
  add({ id: 'ln-area-parent', what: 'a link to the parent of the area', kinds: ALL, entries: [symlink('parent', '..')], offender: 'parent' });
  add({
    id: 'ln-then-write',
    what: 'a link to a directory outside, then a file written through it',
    kinds: ALL,
    entries: [symlink('through', '../../../outside'), file('through/planted-through.txt')],
    offender: 'through',
  });
  add({
    id: 'ln-inside-then-write',
    what: 'a link to a directory inside, then a file written through it',
    kinds: ALL,
    entries: [dir('real-dir'), symlink('alias', 'real-dir'), file('alias/planted.txt')],
    offender: 'alias/planted.txt',
  });
  add({
    id: 'ln-inside-then-dir',
    what: 'a link to a directory inside, then a directory entry through it',
    kinds: ALL,
    entries: [dir('real-dir2'), symlink('alias2', 'real-dir2'), dir('alias2/inner')],
    offender: 'alias2/inner',
  });
  {
    const c = chain('ch', 'outside');
    add({ id: 'ln-chain', what: 'a chain of links, each inside as written, that ends outside', kinds: ALL, entries: c.entries, offender: c.link });
  }
  {
    const c = chain('chw', 'outside');
    add({
      id: 'ln-chain-write',
      what: 'a chain of links that ends outside, then a file written through it',
      kinds: ALL,
      entries: [...c.entries, file(`${c.link}/planted-chain.txt`)],
      offender: `${c.link}/planted-chain.txt`,
    });
  }
  {
    const c = chain('chd', 'outside/missing-target');
    add({
      id: 'ln-chain-dangling',
      what: 'a chain of links that ends outside at a path that does not exist yet',
      kinds: ALL,
      entries: c.entries,
      offender: c.link,
    });
  }
  {
    const c = chain('chh', 'outside');
    add({
      id: 'ln-chain-hardlink',
      what: 'a chain of links that ends outside, then a hard link to a file read through it',
      kinds: TAR,
      entries: [...c.entries, hardlink('stolen.txt', `${c.link}/secret.txt`)],
      offender: c.link,
    });
  }
  add({
    id: 'ln-then-hardlink-out',
    what: 'a link leading out, then a hard link to it',
    kinds: TAR,
    entries: [symlink('sl-out', '../../../outside/secret.txt'), hardlink('hl-to-sl', 'sl-out')],
    offender: 'sl-out',
  });
  add({
    id: 'ln-then-hardlink',
    what: 'a link inside, then a hard link to the link',
    kinds: TAR,
    entries: [file('target.txt'), symlink('sl-in', 'target.txt'), hardlink('hl-to-link', 'sl-in')],
    offender: 'hl-to-link',
  });
  add({ id: 'ln-reserved', what: 'a link named devserver.lock', kinds: ALL, entries: [symlink('devserver.lock', '../../../outside')], offender: 'devserver.lock' });
  add({
    id: 'ln-global-pax',
    what: 'a harmless link whose target a global pax header replaces with /etc/shadow',
    kinds: TAR,
    format: 'pax',
    globalPax: { linkpath: '/etc/shadow' },
    noPrefix: true,
    entries: [file('in.txt'), symlink('looks-fine', 'in.txt')],
    offender: 'looks-fine',
  });
  add({
    id: 'ln-pax',
    what: "a harmless link whose own pax header says it leads out",
    kinds: TAR,
    format: 'pax',
    entries: [{ ...symlink('pax-link', 'inside.txt'), pax: { linkpath: '../../../outside' } }],
    offender: 'pax-link',
  });
  add({ id: 'ln-empty', what: 'a zip link with an empty target', kinds: ZIP, entries: [symlink('empty-link', '')], offender: 'empty-link' });
  add({ id: 'ln-nul', what: 'a zip link whose target holds a NUL', kinds: ZIP, entries: [symlink('nul-link', 'ok\0/../../../../etc')], offender: 'nul-link' });
  add({
    id: 'ln-huge',
    what: 'a zip link with a 70 000-byte target',
    kinds: ZIP,
    entries: [symlink('huge-link', 'a/'.repeat(35_000))],
    offender: 'huge-link',
    esource: 'the zip reader refuses a link target over 64 KiB before the stager sees the entry',
  });

  // Names made to look harmless by the format.
  add({
    id: 'pax-path',
    what: 'a harmless header name whose pax path climbs out',
    kinds: TAR,
    format: 'pax',
    entries: [{ ...file('innocent.txt'), pax: { path: '../pax-slip.txt' } }],
    offender: '../pax-slip.txt',
  });
  add({
    id: 'zip-unicode-path',
    what: 'a harmless zip name whose Unicode Path extra field climbs out',
    kinds: ZIP,
    entries: [{ ...file('innocent.txt'), unicodePath: '../unicode-slip.txt' }],
    offender: '../unicode-slip.txt',
  });
  add({
    id: 'zip-bzip2-slip',
    what: 'a slip in an entry compressed with bzip2',
    kinds: ZIP,
    entries: [{ ...file('../bzip2-slip.txt'), method: 'bzip2' }],
    offender: '../bzip2-slip.txt',
    esource: 'the zip reader refuses the compression method when it opens the entry, before the stager judges its name',
  });

  // Hard links.
  add({ id: 'hl-abs', what: 'a hard link to /etc/passwd', kinds: TAR, entries: [hardlink('hl-passwd', '/etc/passwd')], offender: 'hl-passwd' });
  add({ id: 'hl-abs-sandbox', what: 'a hard link to a file outside by absolute path', kinds: TAR, entries: [hardlink('hl-abs', `${ROOT}/outside/secret.txt`)], offender: 'hl-abs' });
  add({ id: 'hl-up', what: 'a hard link climbing out', kinds: TAR, entries: [hardlink('hl-up', '../../../outside/secret.txt')], offender: 'hl-up' });
  add({ id: 'hl-other-area', what: 'a hard link into another area', kinds: TAR, entries: [hardlink('hl-other', '../../other/secret.txt')], offender: 'hl-other' });
  add({ id: 'hl-later', what: 'a hard link to an entry that comes later', kinds: TAR, entries: [hardlink('hl-early', 'later.txt'), file('later.txt')], offender: 'hl-early' });
  add({ id: 'hl-missing', what: 'a hard link to nothing', kinds: TAR, entries: [hardlink('hl-missing', 'no-such.txt')], offender: 'hl-missing' });
  add({ id: 'hl-dir', what: 'a hard link to a directory', kinds: TAR, entries: [dir('a-dir'), hardlink('hl-dir', 'a-dir')], offender: 'hl-dir' });
  add({ id: 'hl-manifest', what: 'a hard link to the manifest', kinds: TAR, entries: [hardlink('hl-manifest', MANIFEST_FILE)], offender: 'hl-manifest' });
  add({ id: 'hl-owner', what: "a hard link to the lock's owner record", kinds: TAR, entries: [hardlink('hl-owner', 'devserver.lock/owner.json')], offender: 'hl-owner' });
  add({ id: 'hl-timestamp', what: 'a hard link to staged.timestamp', kinds: TAR, entries: [hardlink('hl-stamp', TIMESTAMP_FILE)], offender: 'hl-stamp' });

  // Devices, FIFOs, sockets.
  add({ id: 'dev-chr', what: 'a character device', kinds: ALL, entries: [dir('dev'), { name: 'dev/null', type: 'chr', devmajor: 1, devminor: 3 }], offender: 'dev/null' });
  add({ id: 'dev-blk', what: 'a block device', kinds: ALL, entries: [{ name: 'sda', type: 'blk', devmajor: 8, devminor: 0 }], offender: 'sda' });
  add({ id: 'dev-fifo', what: 'a FIFO', kinds: ALL, entries: [{ name: 'pipe', type: 'fifo' }], offender: 'pipe' });
  add({ id: 'dev-socket', what: 'a socket', kinds: ZIP, entries: [{ name: 'sock', type: 'socket' }], offender: 'sock' });

  // Reserved names.
  for (const [id, name, kind] of [
    ['rsv-lock', 'devserver.lock', 'file'],
    ['rsv-owner', 'devserver.lock/owner.json', 'file'],
    ['rsv-lock-dir', 'devserver.lock', 'dir'],
    ['rsv-target', 'devserver', 'file'],
    ['rsv-manifest', MANIFEST_FILE, 'file'],
    ['rsv-timestamp', TIMESTAMP_FILE, 'file'],
    ['rsv-timestamp-dot', `./${TIMESTAMP_FILE}`, 'file'],
    ['rsv-claim', 'devserver.lock.claim.1.2.3', 'dir'],
    ['rsv-trash', 'devserver.lock.trash.x', 'file'],
    ['rsv-nested-lock', 'sub/devserver.lock', 'file'],
    ['rsv-part', `${PART_PREFIX}0123456789abcdef`, 'file'],
    ['rsv-meta', `${META_DIR}/trash/x`, 'file'],
  ] as const) {
    add({ id, what: `the reserved name ${name} (${kind})`, kinds: ALL, entries: [kind === 'dir' ? dir(name) : file(name)], offender: name });
  }

  // Long names.
  add({ id: 'long-seg', what: 'a 256-byte name', kinds: ALL, entries: [file('n'.repeat(256))], offender: 'n'.repeat(256) });
  add({ id: 'long-seg-sub', what: 'a 300-byte name in a directory', kinds: ALL, entries: [file(`long/${'x'.repeat(300)}.txt`)], offender: `long/${'x'.repeat(300)}.txt` });
  add({ id: 'long-seg-utf8', what: 'a name of 86 characters and 258 bytes', kinds: ALL, entries: [file('€'.repeat(86))], offender: '€'.repeat(86) });
  {
    const deep = `${Array.from({ length: 20 }, (_, i) => `${i}`.padEnd(250, 'y')).join('/')}/deep.txt`;
    add({ id: 'long-path', what: 'a path of 5 000 bytes (longer than PATH_MAX)', kinds: ALL, entries: [file(deep)], offender: deep });
  }

  // Control characters (tar cuts a name at a NUL, so only zip can carry one). Each name also
  // holds a non-ASCII letter, so that zip marks it UTF-8: without that mark a zip name is code
  // page 437, where the bytes 0x01-0x1f and 0x7f are printable symbols, not control characters.
  for (const [id, name] of [
    ['ctl-soh', 'ctl-\x01-é.txt'],
    ['ctl-newline', 'new\nline-é.txt'],
    ['ctl-cr', 'carriage\rreturn-é.txt'],
    ['ctl-tab', 'tab\there-é.txt'],
    ['ctl-esc', 'esc-\x1b[31m-é.txt'],
    ['ctl-del', 'del-\x7f-é.txt'],
    ['ctl-dir', 'ctl\x02-é/file.txt'],
  ] as const) {
    add({ id, what: `a name with ${JSON.stringify(name)}`, kinds: ALL, entries: [file(name)], offender: name });
  }
  add({ id: 'nul', what: 'a zip name with a NUL', kinds: ZIP, entries: [file('nul-\0.txt')], offender: 'nul-\0.txt' });
  add({ id: 'nul-slip', what: 'a zip name that a NUL would cut to a harmless one', kinds: ZIP, entries: [file('fine.txt\0/../../../../outside/x')], offender: 'fine.txt\0/../../../../outside/x' });
  return cases;
}

/**
 * Legal entries staged before the hostile one in most archives: everything they place must go
 * again, and `keep/existing.txt`, which differs from the existing area's, must come back.
 */
const PREFIX: EntrySpec[] = [
  dir('ok'),
  file('ok/a.txt'),
  dir('ok/deep'),
  { name: 'ok/deep/b.bin', data: 'b'.repeat(50_000) },
  file('keep/existing.txt', 'replacement that must not survive\n'),
  symlink('fresh-link', 'ok/a.txt'),
];

const kindTag = (kind: FixtureKind): string => ({ tar: 'tar', 'tar.gz': 'tgz', 'tar.xz': 'txz', zip: 'zip' })[kind];

/** Zip marks a directory with a trailing '/'; tarfile adds it itself. */
function forKind(entries: readonly EntrySpec[], kind: FixtureKind, root: string): EntrySpec[] {
  const fill = (s: string): string => s.split(ROOT).join(root);
  return entries.map((e) => {
    const out: EntrySpec = { ...e, name: fill(e.name) };
    if (e.linkname !== undefined) out.linkname = fill(e.linkname);
    if (kind === 'zip' && e.type === 'dir' && !out.name.endsWith('/')) out.name += '/';
    return out;
  });
}

/**
 * Whether the message names the entry, as stored or JSON-quoted. A zip's backslashes may show as
 * '/': yauzl reads them as separators (as Info-ZIP's unzip does), so that is the name users see.
 */
function names(err: StagingError, entry: string, kind: FixtureKind): boolean {
  const forms = kind === 'zip' ? [entry, entry.replace(/\\/g, '/')] : [entry];
  return forms.some((f) => err.message.includes(f) || err.message.includes(JSON.stringify(f)));
}

describe('stage() against hostile archives', function () {
  this.timeout(120_000);
  /** The sandbox: static, static2 and outside side by side. */
  let root: string;
  let staticDir: string;
  /** Archives and pristine copies, kept apart so the sandbox snapshot stays cheap. */
  let work: string;
  const EXISTING = 'board/existing';
  let existingDir: string;
  let pristine: string;
  const cases = hostileCases();
  const built: { c: HostileCase; kind: FixtureKind; file: string }[] = [];
  let outsideBefore: Map<string, string>;
  let staticBefore: Map<string, string>;
  let existingBefore: Map<string, string>;
  let calls = 0;
  let started = 0;

  /** Everything below the static directory except our bookkeeping; directory mtimes move with part files. */
  const staticTree = (): Map<string, string> => tree(staticDir, { skip: (p) => p === path.join(staticDir, META_DIR), dirMtimes: false });
  const outsideTree = (): Map<string, string> => tree(root, { skip: (p) => p === staticDir, dirMtimes: true });
  const artifacts = (): Map<string, string> => tree(existingDir, { dirMtimes: false });

  before(async function () {
    this.timeout(60_000);
    started = performance.now();
    root = tempDir('dss-hostile-');
    work = tempDir('dss-hostile-work-');
    staticDir = path.join(root, 'static');
    for (const d of ['static/new', 'static2/board/build', 'outside/sub', 'outside/empty']) fs.mkdirSync(path.join(root, d), { recursive: true });
    fs.writeFileSync(path.join(root, 'static2', 'board', 'build', 'image.bin'), crypto.randomBytes(4096));
    fs.writeFileSync(path.join(root, 'outside', 'secret.txt'), 'the secret outside\n');
    fs.writeFileSync(path.join(root, 'outside', 'sub', 'inner.txt'), 'inner\n');
    fs.symlinkSync('secret.txt', path.join(root, 'outside', 'alias'));

    // The existing area holds files, a nested one and a link, staged as any build is.
    const build = path.join(work, 'build');
    fs.mkdirSync(path.join(build, 'keep'), { recursive: true });
    fs.mkdirSync(path.join(build, 'sub'));
    fs.writeFileSync(path.join(build, 'keep', 'existing.txt'), 'the original\n');
    fs.writeFileSync(path.join(build, 'image.bin'), crypto.randomBytes(64 * 1024));
    fs.writeFileSync(path.join(build, 'sub', 'f.txt'), 'f\n');
    fs.symlinkSync('sub', path.join(build, 'latest'));
    await stage(staticDir, EXISTING, [build]);
    existingDir = path.join(staticDir, EXISTING);
    const other = path.join(work, 'other');
    fs.mkdirSync(other);
    fs.writeFileSync(path.join(other, 'secret.txt'), "another area's file\n");
    await stage(staticDir, 'other', [other]);
    pristine = path.join(work, 'pristine');
    fs.cpSync(existingDir, pristine, { recursive: true, preserveTimestamps: true, verbatimSymlinks: true });

    const specs: ArchiveSpec[] = [];
    cases.forEach((c, i) => {
      for (const kind of c.kinds) {
        // Plain tar and every other zip start with the hostile entry; the rest after legal ones.
        const prefix = c.noPrefix === true || kind === 'tar' || (kind === 'zip' && i % 2 === 0) ? [] : PREFIX;
        const archive = path.join(work, `${c.id}.${kind}`);
        const spec: ArchiveSpec = { file: archive, kind, entries: forKind([...prefix, ...c.entries], kind, root) };
        if (c.format !== undefined) spec.format = c.format;
        if (c.globalPax !== undefined) spec.globalPax = c.globalPax;
        specs.push(spec);
        built.push({ c, kind, file: archive });
      }
    });
    await writeArchives(specs);
    const byKind = ALL.map((k) => `${k} ${built.filter((b) => b.kind === k).length}`).join(', ');
    console.log(`      ${built.length} hostile archives (${byKind}) from ${cases.length} cases, each staged as a new build and added into ${EXISTING}`);

    outsideBefore = outsideTree();
    staticBefore = staticTree();
    existingBefore = artifacts();
  });

  after(() => {
    console.log(`      ${calls} stage() calls in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    for (const v of [TMP_VICTIM, ETC_VICTIM, `${TMP_VICTIM}-dir`, `${TMP_VICTIM}-link`]) fs.rmSync(v, { recursive: true, force: true });
    if (root) cleanup(root);
    if (work) cleanup(work);
  });

  it('builds at least 100 hostile archives', () => {
    assert.ok(built.length >= 100, `${built.length} archives`);
    for (const kind of ALL) assert.ok(built.some((b) => b.kind === kind), kind);
  });

  it('the watch on the sandbox sees a file made and removed again outside, and a changed byte inside', () => {
    const probe = path.join(root, 'outside', 'sub', 'probe');
    fs.writeFileSync(probe, 'x');
    fs.rmSync(probe);
    assert.ok(differences(outsideBefore, outsideTree()).some((d) => d.includes(path.join(root, 'outside', 'sub'))));
    outsideBefore = outsideTree();
    const image = path.join(existingDir, 'image.bin');
    const data = fs.readFileSync(image);
    const { atime, mtime } = fs.statSync(image);
    data[100] ^= 1;
    fs.writeFileSync(image, data);
    fs.utimesSync(image, atime, mtime);
    assert.ok(differences(existingBefore, artifacts()).some((d) => d.includes(image)), 'a changed byte under the same size and mtime');
    data[100] ^= 1;
    fs.writeFileSync(image, data);
    fs.utimesSync(image, atime, mtime);
    existingBefore = artifacts();
    staticBefore = staticTree();
  });

  /** Stages one archive one way; returns what went wrong, and puts the sandbox back if anything did. */
  async function attempt(c: HostileCase, kind: FixtureKind, archive: string, mode: 'new' | 'add'): Promise<string[]> {
    const tag = mode === 'new' ? `new/${c.id}-${kindTag(kind)}` : EXISTING;
    const label = `${path.basename(archive)} ${mode === 'new' ? `as ${tag}` : `added into ${EXISTING}`}`;
    const problems: string[] = [];
    calls++;
    const outcome = await stage(staticDir, tag, [archive], mode === 'new' ? {} : { add: true, overwrite: true }).then(
      (r) => ({ staged: r.added.map((a) => a.name) }),
      (err: unknown) => ({ err }),
    );
    const wanted = c.esource !== undefined ? 'ESOURCE' : 'EUNSAFE';
    if ('staged' in outcome) {
      problems.push(`${label}: staged without error (added ${JSON.stringify(outcome.staged)})`);
    } else if (!(outcome.err instanceof StagingError)) {
      problems.push(`${label}: rejected with a ${String(outcome.err)}, not a StagingError`);
    } else {
      const err = outcome.err;
      if (err.code !== wanted) problems.push(`${label}: ${err.code} instead of ${wanted}: ${err.message}`);
      const offender = c.offender.split(ROOT).join(root);
      if (!names(err, offender, kind)) problems.push(`${label}: the message does not name ${JSON.stringify(offender)}: ${err.message}`);
    }

    const outside = differences(outsideBefore, outsideTree());
    if (outside.length > 0) problems.push(`${label}: changed outside the static directory: ${outside.join('; ')}`);
    for (const v of [TMP_VICTIM, ETC_VICTIM, `${TMP_VICTIM}-dir`, `${TMP_VICTIM}-link`]) {
      if (fs.lstatSync(v, { throwIfNoEntry: false }) !== undefined) problems.push(`${label}: wrote ${v}`);
    }
    const inStatic = differences(staticBefore, staticTree());
    if (inStatic.length > 0) problems.push(`${label}: the static directory changed: ${inStatic.slice(0, 8).join('; ')}`);
    if (mode === 'new' && fs.lstatSync(path.join(staticDir, tag), { throwIfNoEntry: false }) !== undefined) problems.push(`${label}: ${tag} was left behind`);
    const art = differences(existingBefore, artifacts());
    if (art.length > 0) problems.push(`${label}: the existing artifacts changed: ${art.join('; ')}`);
    const parts = partsIn(existingDir);
    if (parts.length > 0) problems.push(`${label}: part files left: ${parts.join(', ')}`);
    const trash = path.join(staticDir, META_DIR, TRASH_DIR);
    const trashed = fs.existsSync(trash) ? fs.readdirSync(trash) : [];
    if (trashed.length > 0) problems.push(`${label}: left in the trash: ${trashed.join(', ')}`);
    for (const t of new Set([tag, EXISTING])) {
      const state = (await inspect(staticDir, t)).state;
      if (state !== 'free') problems.push(`${label}: the lock of ${t} is ${state} afterwards`);
    }

    if (problems.length > 0) {
      // Put the sandbox back so that the next archive is judged on its own.
      if (mode === 'new') fs.rmSync(path.join(staticDir, tag), { recursive: true, force: true });
      fs.rmSync(existingDir, { recursive: true, force: true });
      fs.cpSync(pristine, existingDir, { recursive: true, preserveTimestamps: true, verbatimSymlinks: true });
      fs.rmSync(trash, { recursive: true, force: true });
      // The copy has the same content, but link mtimes and sub-millisecond times are not copied.
      outsideBefore = outsideTree();
      staticBefore = staticTree();
      existingBefore = artifacts();
    }
    return problems;
  }

  for (const c of cases) {
    const title = `${c.id}: ${c.what} (${c.kinds.join(', ')})${c.esource !== undefined ? `: ESOURCE, as ${c.esource}` : ''}`;
    it(title, async () => {
      const problems: string[] = [];
      for (const b of built.filter((x) => x.c === c)) {
        problems.push(...(await attempt(c, b.kind, b.file, 'new')));
        problems.push(...(await attempt(c, b.kind, b.file, 'add')));
      }
      // The diffs of a staging that went through can be long: the start says what happened.
      if (problems.length > 0) assert.fail(problems.map((p) => (p.length > 600 ? `${p.slice(0, 600)}…` : p)).join('\n'));
    });
  }

  it('refuses a file written through a link the existing area already holds (the same archive is legal as a new build)', async () => {
    const problems: string[] = [];
    for (const kind of ['tar', 'zip'] as const) {
      const archive = path.join(work, `through-existing.${kind}`);
      await writeArchives([{ file: archive, kind, entries: [file('latest/planted.txt')] }]);
      const c: HostileCase = { id: 'through-existing', what: '', kinds: [kind], entries: [], offender: 'latest/planted.txt' };
      problems.push(...(await attempt(c, kind, archive, 'add')));
      // As a new build, latest is an ordinary directory.
      const fresh = await stage(staticDir, `new/through-existing-${kind}`, [archive]);
      assert.deepEqual(
        fresh.added.map((a) => a.name),
        ['latest/planted.txt'],
      );
      fs.rmSync(path.join(staticDir, 'new', `through-existing-${kind}`), { recursive: true });
      staticBefore = staticTree();
    }
    assert.equal(fs.existsSync(path.join(existingDir, 'sub', 'planted.txt')), false, 'written through the link');
    if (problems.length > 0) assert.fail(problems.join('\n'));
  });

  it('never copies a file from outside into the area through links that are changed before the end (overwrite)', async () => {
    // A chain leads out, a hard link reads through it, then the first link is replaced by one
    // that leads nowhere, so that when the staging ends the chain no longer resolves at all.
    const c = chain('ex', 'outside');
    const entries = [...c.entries, hardlink('exfiltrated.txt', `${c.link}/secret.txt`), symlink('ex/b/c/d/l1', 'nowhere')];
    const problems: string[] = [];
    for (const kind of TAR) {
      const archive = path.join(work, `exfiltrate.${kind}`);
      await writeArchives([{ file: archive, kind, entries }]);
      const hc: HostileCase = { id: 'exfiltrate', what: '', kinds: [kind], entries: [], offender: c.link };
      const tag = `new/exfiltrate-${kindTag(kind)}`;
      calls++;
      const outcome = await stage(staticDir, tag, [archive], { overwrite: true }).then(
        (r) => r.added.map((a) => a.name),
        (err: unknown) => err,
      );
      if (Array.isArray(outcome)) {
        const copy = path.join(staticDir, tag, 'exfiltrated.txt');
        const content = fs.existsSync(copy) ? fs.readFileSync(copy, 'utf8') : '';
        problems.push(`${path.basename(archive)} as ${tag} with overwrite: staged ${JSON.stringify(outcome)}; exfiltrated.txt holds ${JSON.stringify(content)}`);
        fs.rmSync(path.join(staticDir, tag), { recursive: true, force: true });
        staticBefore = staticTree();
      } else if (!(outcome instanceof StagingError) || outcome.code !== 'EUNSAFE') {
        problems.push(`${path.basename(archive)}: ${String(outcome)}`);
      }
      problems.push(...(await attempt(hc, kind, archive, 'add')));
    }
    if (problems.length > 0) assert.fail(problems.join('\n'));
  });

  it('a failed new build under parents that did not exist leaves none of them behind', async () => {
    const archive = built.find((b) => b.c.id === 'slip-up' && b.kind === 'tar.gz')!.file;
    const before = fs.readdirSync(staticDir).sort();
    await assert.rejects(stage(staticDir, 'fresh-board/fresh-branch/R1', [archive]), (e: unknown) => e instanceof StagingError && e.code === 'EUNSAFE');
    const left = fs.readdirSync(staticDir).sort();
    const made = left.filter((n) => !before.includes(n)).map((n) => [...tree(path.join(staticDir, n), { dirMtimes: false }).keys()].map((p) => path.relative(staticDir, p)));
    fs.rmSync(path.join(staticDir, 'fresh-board'), { recursive: true, force: true });
    assert.deepEqual(made, [], 'left behind');
  });
});

// ---------------------------------------------------------------------------------------------

describe('stage() with tricky but legal archives', function () {
  this.timeout(60_000);
  let root: string;
  let staticDir: string;
  let work: string;
  const binary = Buffer.from(Array.from({ length: 20_000 }, (_, i) => (i * 31 + (i >> 7)) & 0xff));

  /** As written in the archive: `./` prefixes, links inside, a hard link to an earlier entry, unicode. */
  const entries = (kind: FixtureKind): EntrySpec[] => [
    file('./top.txt', 'top\n'),
    dir('./nested'),
    dir('nested/deeper'),
    dir('nested/deeper/deepest'),
    { name: 'nested/deeper/deepest/file.bin', base64: binary.toString('base64') },
    symlink('nested/link-up', '../top.txt'),
    symlink('nested/deeper/link', 'deepest/file.bin'),
    symlink('dirlink', 'nested/deeper'),
    symlink('nested/here', '.'),
    ...(kind === 'zip' ? [] : [hardlink('hard.txt', 'top.txt'), hardlink('nested/hard2.bin', './nested/deeper/deepest/file.bin')]),
    file('ünïcödé/日本語.txt', 'unicode\n'),
    file('emoji-🎉.txt', 'party\n'),
    file('a..b/c...txt', 'dots\n'),
    file('.../three-dots.txt', 'three\n'),
    file(`${'s'.repeat(255)}`, '255 bytes\n'),
    file('sub/staged.timestamp', 'only the top-level one is reserved\n'),
    file('empty.txt', ''),
    dir('emptydir'),
  ];

  /** The artifacts each archive must give: name -> [type, content or link target]. */
  const expected = (kind: FixtureKind): Map<string, ['file' | 'symlink', Buffer | string]> => {
    const m = new Map<string, ['file' | 'symlink', Buffer | string]>([
      ['top.txt', ['file', Buffer.from('top\n')]],
      ['nested/deeper/deepest/file.bin', ['file', binary]],
      ['nested/link-up', ['symlink', '../top.txt']],
      ['nested/deeper/link', ['symlink', 'deepest/file.bin']],
      ['dirlink', ['symlink', 'nested/deeper']],
      ['nested/here', ['symlink', '.']],
      ['ünïcödé/日本語.txt', ['file', Buffer.from('unicode\n')]],
      ['emoji-🎉.txt', ['file', Buffer.from('party\n')]],
      ['a..b/c...txt', ['file', Buffer.from('dots\n')]],
      ['.../three-dots.txt', ['file', Buffer.from('three\n')]],
      ['s'.repeat(255), ['file', Buffer.from('255 bytes\n')]],
      ['sub/staged.timestamp', ['file', Buffer.from('only the top-level one is reserved\n')]],
      ['empty.txt', ['file', Buffer.alloc(0)]],
    ]);
    if (kind !== 'zip') {
      m.set('hard.txt', ['file', Buffer.from('top\n')]);
      m.set('nested/hard2.bin', ['file', binary]);
    }
    return m;
  };

  before(() => {
    root = tempDir('dss-benign-');
    work = tempDir('dss-benign-work-');
    staticDir = path.join(root, 'static');
    fs.mkdirSync(staticDir);
  });
  after(() => {
    if (root) cleanup(root);
    if (work) cleanup(work);
  });

  function checkArea(dir: string, archive: string, kind: FixtureKind, extra: readonly string[]): void {
    const manifest = JSON.parse(fs.readFileSync(path.join(dir, MANIFEST_FILE), 'utf8')) as Manifest;
    const want = expected(kind);
    assert.deepEqual(Object.keys(manifest.artifacts).sort(), [...want.keys(), ...extra].sort());
    for (const [name, [type, content]] of want) {
      const entry = manifest.artifacts[name];
      const p = path.join(dir, name);
      assert.equal(entry.type, type, name);
      assert.ok(entry.source.startsWith(`${archive}#`), `${name}: source ${entry.source}`);
      if (type === 'symlink') {
        assert.equal(entry.linkTarget, content, name);
        assert.equal(fs.readlinkSync(p), content, name);
        assert.equal(entry.sha256, sha(content), name);
      } else {
        const data = fs.readFileSync(p);
        assert.ok(fs.lstatSync(p).isFile(), name);
        assert.equal(sha(data), sha(content), name);
        assert.equal(entry.sha256, sha(content), name);
        assert.equal(entry.size, (content as Buffer).length, name);
      }
    }
    if (kind !== 'zip') {
      // A copy, not a second name of the same inode.
      assert.notEqual(fs.statSync(path.join(dir, 'hard.txt')).ino, fs.statSync(path.join(dir, 'top.txt')).ino);
      assert.equal(fs.statSync(path.join(dir, 'hard.txt')).nlink, 1);
    }
    assert.ok(fs.statSync(path.join(dir, 'emptydir')).isDirectory());
    assert.deepEqual(partsIn(dir), []);
  }

  for (const kind of ALL) {
    it(`stages a ${kind} with ./ names, links inside, ${kind === 'zip' ? '' : 'hard links to earlier entries, '}unicode and 255-byte names, new and added`, async () => {
      const archive = path.join(work, `benign.${kind}`);
      await writeArchives([{ file: archive, kind, entries: forKind(entries(kind), kind, root) }]);

      const fresh = await stage(staticDir, `new/${kindTag(kind)}`, [archive]);
      assert.equal(fresh.created, true);
      assert.deepEqual(fresh.added.map((a) => a.name).sort(), [...expected(kind).keys()].sort());
      checkArea(path.join(staticDir, 'new', kindTag(kind)), archive, kind, []);
      assert.equal((await inspect(staticDir, `new/${kindTag(kind)}`)).state, 'free');

      // Added into an area that already holds artifacts: those stay as they were.
      const build = path.join(work, `existing-${kindTag(kind)}`);
      fs.mkdirSync(path.join(build, 'keep'), { recursive: true });
      fs.writeFileSync(path.join(build, 'keep', 'existing.txt'), 'the original\n');
      fs.symlinkSync('keep/existing.txt', path.join(build, 'existing-link'));
      const tag = `board/${kindTag(kind)}`;
      await stage(staticDir, tag, [build]);
      const dir = path.join(staticDir, tag);
      const before = tree(path.join(dir, 'keep'), { dirMtimes: false });
      const added = await stage(staticDir, tag, [archive], { add: true });
      assert.equal(added.created, false);
      assert.deepEqual(added.added.map((a) => a.name).sort(), [...expected(kind).keys()].sort());
      checkArea(dir, archive, kind, ['keep/existing.txt', 'existing-link']);
      assert.deepEqual(tree(path.join(dir, 'keep'), { dirMtimes: false }), before);
      assert.equal(fs.readlinkSync(path.join(dir, 'existing-link')), 'keep/existing.txt');
      assert.equal((await inspect(staticDir, tag)).state, 'free');
    });
  }
});
