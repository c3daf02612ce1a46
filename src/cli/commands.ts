/**
 * Every command of devserver-stage, as data: its arguments, options and help, and the file that
 * runs it. The entry (`src/cli/main.ts`) parses against this table and loads only the chosen command's
 * file; the full parser (`program.ts`, commander) builds its help and errors from the same table.
 * A new command is one entry here and one file beside it.
 *
 * This file is loaded on every run: it must stay free of anything heavier than the constants it
 * shows in help.
 */
import { DEFAULT_TIMING, MAX_MANIFEST_BYTES } from '../core/base/protocol';
import { MARGIN_RULE } from '../core/stage/space';
import { DEFAULT_MAX_BYTES } from '../core/stage/types';
import type { CommandMain } from './context';
import { commandWords } from './commandWords';
import { parseDuration, parseSize } from './units';

const MAX_MANIFEST_MIB = MAX_MANIFEST_BYTES / 1024 / 1024;

/** A value an option cannot take; its message says what was expected. */
export class InvalidValue extends Error {}

export interface OptionSpec {
  /** As commander writes them: `-d, --static-dir <dir>`, `--json`. */
  flags: string;
  description: string;
  /** Turns the text given into the value; throws `InvalidValue`. Without it the value is the text. */
  parse?: (text: string) => unknown;
  default?: unknown;
  /** An environment variable that gives the value when the option is not given. */
  env?: string;
}

export interface ArgumentSpec {
  /** `<tag>` (required), `[subpath]` (optional), `<command...>` (one or more). */
  name: string;
  description: string;
  default?: string;
}

export interface CommandSpec {
  name: string;
  /** The line in the tool's list of commands, where the description is too long for it. */
  summary?: string;
  description: string;
  usage?: string;
  arguments: readonly ArgumentSpec[];
  options?: readonly OptionSpec[];
  /** A rule on the options together; the message (without `error:`) when they break it. */
  check?: (options: Readonly<Record<string, unknown>>) => string | undefined;
  /** The command's own file: required only when the command runs. */
  load: () => { main: CommandMain };
}

function seconds(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new InvalidValue('expected a number of seconds, such as 30 or 0.5');
  return n;
}

function words(value: string): string[] {
  try {
    return commandWords(value);
  } catch (err) {
    throw new InvalidValue((err as Error).message);
  }
}

function size(value: string): number {
  const n = parseSize(value);
  if (n === undefined) throw new InvalidValue('expected a size such as 500M, 2G, 1.5GiB or a number of bytes');
  return n;
}

function duration(value: string): number {
  const n = parseDuration(value);
  if (n === undefined) throw new InvalidValue('expected a duration with a unit, such as 30d, 12h, 90m or 1d12h');
  return n;
}

function count(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n)) throw new InvalidValue('expected a whole number, such as 20');
  return n;
}

export const TOOL_NAME = 'devserver-stage';

export const TOOL_DESCRIPTION =
  'Stage, lock, inspect and clean up staging areas of a devserver static directory.\nEvery command takes the same locks as the Devserver Staging extension and the core library.';

export const GLOBAL_OPTIONS: readonly OptionSpec[] = [
  { flags: '-d, --static-dir <dir>', description: 'the static directory', env: 'DEVSERVER_STATIC_DIR' },
  { flags: '--json', description: 'print machine-readable JSON (errors as JSON on stderr)' },
  { flags: '--stale <seconds>', description: `a lock without heartbeat for this long is stale (default ${DEFAULT_TIMING.staleMs / 1000})`, parse: seconds },
  { flags: '--refresh <seconds>', description: `how often a held lock's heartbeat is refreshed (default ${DEFAULT_TIMING.refreshMs / 1000})`, parse: seconds },
];

export const TOOL_HELP_AFTER = `
Exit codes: 0 success; 2 usage error, bad tag or duration; 3 held by another (holder on stderr), or reserved by another user; 1 other errors.
'verify' exits 0 when the build is intact and 1 when it is damaged (each problem on stdout).
'lock' exits with the exit code of its command; 'lock' and 'stage' exit 128 + the signal when
stopped by one while waiting or staging: 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP.
With --json every error, usage errors included, is one line of JSON on stderr:
{"error":{"code":"EUSAGE","message":"..."}} (code EUSAGE for usage errors, else the error's code).
Every change to an area is recorded in its history ('history'); a record that cannot be written
is a warning on stderr ({"warning":{...}} with --json) and does not change the exit code.
Output to a reader that has gone away (devserver-stage list | head -1) is dropped quietly;
the exit code stays that of the command ('watch' then ends, exit 0).
Names and other text from the static directory are printed as they are, or, where one holds a
control or format character (a newline, ESC, a bidi override), a byte that is not UTF-8, or
begins with ", between double quotes with escapes: "R1\\nx", "R\\u202e3", "R\\xff". A TAG or
SUBPATH is given the same way: devserver-stage status '"board/R\\xff"'. An area so named is
listed and looked at (list, status, du, watch); the tool does not lock, stage into or remove it.
With --json, such a name is the same quoted text, times are written anew from their values.

Examples:
  devserver-stage -d /srv/static list eve-release
  devserver-stage -d /srv/static stage eve-release/R120-15662.0.0 ./out/chromiumos_test_image.bin ./out/autotest.tar.gz
  devserver-stage -d /srv/static lock --create-once eve-release/R120-15662.0.0 -- ./stage.sh
  devserver-stage -d /srv/static verify eve-release/R120-15662.0.0
  devserver-stage -d /srv/static history eve-release/R120-15662.0.0 --since 2d
  devserver-stage -d /srv/static history --stats eve-release --since 1w
  devserver-stage -d /srv/static du eve-release
  devserver-stage -d /srv/static --json watch eve-release
  devserver-stage -d /srv/static prune --keep 50 --older-than 30d --dry-run
  DEVSERVER_STATIC_DIR=/srv/static devserver-stage --json status eve-release/R120-15662.0.0`;

const WAIT: OptionSpec = {
  flags: '--wait <seconds>',
  description: 'wait up to this long for the lock, in line behind those already waiting (first come, first served)',
  parse: seconds,
  default: 0,
};

/*
 * Each `load` names its file with a literal require, so that the bundler can leave it out of the
 * entry and the built tool loads it from dist/cli/ beside it (scripts/build.mjs).
 */
export const COMMANDS: readonly CommandSpec[] = [
  {
    name: 'list',
    description: 'list the subdirectories of the static directory (or of SUBPATH in it): builds with their lock states, and folders',
    arguments: [{ name: '[subpath]', description: 'a directory inside the static directory, such as a board', default: '' }],
    load: () => require('./listCommand') as typeof import('./listCommand'),
  },
  {
    name: 'status',
    description: "show the lock state of one staging area: free, held, stale or legacy, with its holder (for a reservation: its end, its note and whether it is yours), and who waits for it in line",
    arguments: [{ name: '<tag>', description: 'the staging area, relative to the static directory' }],
    load: () => require('./statusCommand') as typeof import('./statusCommand'),
  },
  {
    name: 'lock',
    description:
      'run COMMAND while holding the lock of TAG, and exit with its exit code (like flock(1)). ' +
      'If the lock is lost while it runs, COMMAND is stopped (SIGTERM, then SIGKILL after 5 s). ' +
      "COMMAND sees DEVSERVER_STAGING_DIR (the area), DEVSERVER_STAGING_TAG and DEVSERVER_STAGING_FENCE (the lock's fencing token). It runs in its own session and process group, " +
      "and the lock lasts until that whole group has ended, even if this tool is killed (judged by the command's pid on this machine). " +
      'SIGINT (Ctrl-C), SIGTERM, SIGHUP and SIGQUIT are passed on to the group once. A signal while waiting for the lock stops the wait: exit 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP. ' +
      'A tag inside a held area, or one with a held area inside it, cannot be locked (exit 3).',
    usage: '[options] <tag> -- <command> [args...]',
    arguments: [
      { name: '<tag>', description: 'the staging area, relative to the static directory; created if missing' },
      { name: '<command...>', description: 'the command to run, after --' },
    ],
    options: [
      { flags: '--create-once', description: 'the area must not exist yet (a new build); fail if it does' },
      WAIT,
      { flags: '--purpose <text>', description: 'what the lock is for, shown to others' },
      { flags: '--destroy-on-failure', description: 'if COMMAND fails and this run created the area, remove it so a later run can retry' },
    ],
    load: () => require('./lockCommand') as typeof import('./lockCommand'),
  },
  {
    name: 'stage',
    summary: 'stage files, directories, archives or URLs into TAG under its lock, with progress',
    description:
      'stage artifacts into TAG under its lock: local files and directories, archives or http(s) URLs. ' +
      'A new build by default (TAG must not exist yet); --add adds to an existing one. ' +
      "Each artifact is recorded with its SHA-256 in the area's manifest; one already there with the same content is skipped, " +
      'one with different content is an error unless --overwrite. A run that fails keeps nothing it wrote (a new build is removed). ' +
      `A manifest larger than ${MAX_MANIFEST_MIB} MiB is refused (ETOOBIG) before anything is copied: stage such a build as several tags. ` +
      'Progress goes to stderr, the summary to stdout. Ctrl-C stops, removes what this run wrote, and exits 130 (SIGTERM: 143, SIGHUP: 129), also while waiting for the lock.',
    arguments: [
      { name: '<tag>', description: 'the staging area, relative to the static directory' },
      { name: '<sources...>', description: 'what to stage: files, directories (their contents), archives (.tar, .tar.gz, .tgz, .tar.xz, .zip: unpacked) or http(s) URLs' },
    ],
    options: [
      { flags: '--add', description: 'add to an existing build instead of creating a new one' },
      { flags: '--overwrite', description: 'replace artifacts of the same name whose content differs' },
      {
        flags: '--max-size <size>',
        description:
          `refuse to write more than this in one run: 500M, 2G, 1.5GiB or bytes (default ${DEFAULT_MAX_BYTES / 1024 ** 3}G). ` +
          `Whatever it is, a run also stops before it would leave less free space on the filesystem than a safety margin of ${MARGIN_RULE}, ` +
          'counted from the free space when it starts',
        parse: size,
      },
      WAIT,
      { flags: '--purpose <text>', description: 'what the lock is for, shown to others (default: the sources)' },
    ],
    load: () => require('./stageCommand') as typeof import('./stageCommand'),
  },
  {
    name: 'verify',
    summary: 'check a staged build against its manifest: every artifact there, with its size and SHA-256',
    description:
      'check the build TAG against its manifest: every artifact it lists is there with its recorded size and SHA-256 (a link: its target), ' +
      'and nothing else is there but the bookkeeping (lock, manifest, staged.timestamp). Links and FIFOs in place of artifacts are reported, never followed or read. ' +
      'It only reads and takes no lock, so it never holds up a staging; a build locked while it is verified is said to be, since its results may change. ' +
      'One line per problem and a summary on stdout; progress on stderr on a terminal. ' +
      'Exit 0 when the build is intact, 1 when it is damaged, has no manifest (ENOMANIFEST) or a damaged one (ECORRUPT).',
    arguments: [{ name: '<tag>', description: 'the build, relative to the static directory' }],
    load: () => require('./verifyCommand') as typeof import('./verifyCommand'),
  },
  {
    name: 'watch',
    summary: 'follow lock states as they change, one line per change (JSON lines with --json)',
    description:
      'print every build of the static directory (or below SUBPATH) with its lock state, then a line for each change as it happens: ' +
      'a lock or reservation taken, released, force-released or taken over (and by whom, from the history), a reservation extended, a lock turned stale, a build staged, destroyed or removed; until stopped (Ctrl-C: exit 130). ' +
      'With --json each line is a JSON object: time, event (snapshot, change or gone), kind (taken, reserved, extended, released, force-released, taken-over, removed, destroyed, gone, stale, appeared, changed), tag, state, holder (user@host), user, host, pid, clientId, purpose, token (the fencing token), staleReason, reservedUntil (the end of a reservation), ' +
      'by (who force-released, took over or destroyed it: user, host, pid, purpose) and previous (the holder whose lock ended). ' +
      'A reader slower than the changes never makes it hold more than the latest line of each build: those it could not write are coalesced, ' +
      'and once the reader catches up a line says how many (event coalesced, with count) before the latest states. It ends, exit 0, when its reader goes (| head -1). ' +
      'It follows the directory as the Devserver Staging extension does: inotify on local filesystems, and polling every 0.75 to 1.5 s on network filesystems (NFS, sshfs, SMB), which see no events for what other machines do. ' +
      'Each real directory is listed once (a folder that is a link to one listed already is not followed), and a static directory that is /, your home directory or a directory above it is refused.',
    arguments: [{ name: '[subpath]', description: 'a folder or build inside the static directory, such as a board', default: '' }],
    options: [
      { flags: '--poll <seconds>', description: 'poll every this many seconds whatever the filesystem (default: only on network filesystems)', parse: seconds },
      {
        flags: '--exec <command>',
        description:
          'run COMMAND once per event (not for the first listing), one at a time and in order, without a shell: its words are split at blanks, quotes group them and nothing is expanded (write sh -c \'...\' for a shell). ' +
          'The event is in its environment: DSS_EVENT (the kind), DSS_TAG, DSS_STATIC_DIR, DSS_STATE, DSS_HOLDER_USER, DSS_HOLDER_HOST, DSS_HOLDER_PID, DSS_HOLDER_PURPOSE, DSS_BY_USER, DSS_BY_HOST, DSS_BY_PID, ' +
          'DSS_PREVIOUS_USER, DSS_PREVIOUS_HOST, DSS_TOKEN, DSS_RESERVED_UNTIL, DSS_TIME and the whole line as DSS_EVENT_JSON. Its output goes to stderr; a status other than 0 is said there. ' +
          'At most 100 events wait for it: beyond that the oldest waiting is dropped, and said on stderr',
        parse: words,
      },
    ],
    load: () => require('./watchCommand') as typeof import('./watchCommand'),
  },
  {
    name: 'du',
    summary: 'show the staging areas with size, artifacts, last use and lock state, oldest first',
    description:
      'show the staging areas of the static directory (or below SUBPATH) with their size, artifacts, last use and lock state, ' +
      'least recently used first, and the total. An area is a directory with a manifest, a staged.timestamp or a lock; ' +
      'symbolic links are not followed.',
    arguments: [{ name: '[subpath]', description: 'a directory inside the static directory, such as a board', default: '' }],
    load: () => require('./duCommand') as typeof import('./duCommand'),
  },
  {
    name: 'prune',
    summary: 'remove the least recently used areas (--keep N, --older-than 30d); never held ones',
    description:
      'remove the least recently used staging areas: those beyond the N most recently used (--keep), and those not used for DURATION (--older-than); ' +
      'with both, an area goes if either selects it. ' +
      "Last use is the mtime of the area's staged.timestamp (else of the directory). " +
      'Areas that are held, or whose lock is stale or legacy, are never removed; they are listed as skipped ' +
      '(a stale lock may belong to a machine that comes back). ' +
      "Each removal takes the area's lock and is recorded in the audit log; a failed one does not stop the others, and makes the exit code 1.",
    arguments: [{ name: '[subpath]', description: 'prune only below this directory of the static directory, such as a board', default: '' }],
    options: [
      { flags: '--keep <n>', description: 'keep the N most recently used areas', parse: count },
      { flags: '--older-than <duration>', description: 'remove areas not used for this long: 30d, 12h, 90m (minutes), 1d12h, 2w', parse: duration },
      { flags: '--dry-run', description: 'only show what would be removed' },
    ],
    check: (o) => (o.keep === undefined && o.olderThan === undefined ? 'prune needs --keep N or --older-than DURATION (or both)' : undefined),
    load: () => require('./pruneCommand') as typeof import('./pruneCommand'),
  },
  {
    name: 'history',
    summary: 'show what happened to a build (or to all): taken, staged, verified, released, lost, removed, by whom, when',
    description:
      'show the history of TAG, or of every area without it, oldest first: each time it was acquired (and how long the holder waited), ' +
      'released or lost (and how long it was held), taken over from a stale holder, force-released, destroyed, staged (artifacts, bytes) or verified, ' +
      'with who did it, when (UTC) and the fencing token. Every client records it (devserver-stage, the extension, the core library), on the static directory itself. ' +
      'With --json, one JSON object per line (JSON lines), as the history is stored. ' +
      'With --stats, who used what instead, over the last day (or --since): for TAG, a folder of builds or every build, the builds held longest, ' +
      'the most contended (waits of 1 s or more, and how long), the longest waits and the force-releases; with --json one object with every holding of the busiest builds.',
    arguments: [{ name: '[tag]', description: 'the area, relative to the static directory (it need not exist any more); with --stats also a folder of builds' }],
    options: [
      { flags: '--since <duration>', description: 'only events of the last DURATION: 30m, 12h, 2d, 1d12h; with --stats the window: 1d (the default), 1w', parse: duration },
      { flags: '--limit <n>', description: 'only the newest N events', parse: count },
      { flags: '--stats', description: 'who used what: holdings, waits and force-releases per build, busiest and most contended first' },
    ],
    check: (o) => (o.stats === true && o.limit !== undefined ? '--stats and --limit cannot be used together' : undefined),
    load: () => require('./historyCommand') as typeof import('./historyCommand'),
  },
  {
    name: 'reserve',
    summary: 'hold the lock of a build for a person until a time (--for 4h), and return at once',
    description:
      'take the lock of the existing build TAG for a person rather than a process, and return at once: it stays held until DURATION from now, ' +
      'whatever becomes of this process, then it is stale and anyone may take it. ' +
      'It excludes lock, stage, destroy, the extension and the Python devserver exactly as any lock does, and waits in line as lock does (--wait). ' +
      'With --extend, move the end of your own reservation of TAG to DURATION from now instead (one that has ended is reserved anew). ' +
      "Yours means your user owns the reservation's work directory; others can break it only with force-release. Release it with release.",
    arguments: [{ name: '<tag>', description: 'the build, relative to the static directory' }],
    options: [
      { flags: '--for <duration>', description: 'how long it lasts: 90m, 4h, 1d, 1d12h (more than 0, at most 30d)' },
      { flags: '--note <text>', description: 'what it is for, shown to others beside the build (such as: flashing DUT-3)' },
      { flags: '--extend', description: 'move the end of your own reservation of TAG to DURATION from now' },
      WAIT,
    ],
    check: (o) =>
      o.for === undefined ? 'reserve needs --for DURATION, such as --for 4h' : o.extend === true && (o.wait !== 0 || o.note !== undefined) ? '--extend takes only --for' : undefined,
    load: () => require('./reserveCommand') as typeof import('./reserveCommand'),
  },
  {
    name: 'release',
    description: "release your own reservation of TAG (made with reserve). Another user's reservation, or a lock held by a process, is refused: see force-release.",
    arguments: [{ name: '<tag>', description: 'the build, relative to the static directory' }],
    load: () => require('./releaseCommand') as typeof import('./releaseCommand'),
  },
  {
    name: 'force-release',
    summary: "remove another holder's lock on TAG (or, with --line, the line of those waiting for it), recorded in the audit log",
    description:
      "remove another holder's lock on TAG (ours or the Python devserver's) and record it in the audit log " +
      '(<static-dir>/.devserver-staging/audit.log) first: if it cannot be recorded, nothing is done. A holder still running learns it lost the lock. ' +
      "With --line, leave the lock alone and clear TAG's line instead: every ticket of those waiting for it is removed, whatever it looks like " +
      "(planted, unreadable, its heartbeat set in the future, or a live waiter's: that one is named as such, and takes a new place at the end if it still waits), " +
      'recorded in the audit log first in the same way.',
    arguments: [{ name: '<tag>', description: 'the staging area, relative to the static directory' }],
    options: [{ flags: '--line', description: 'clear the line of those waiting for TAG instead of its lock' }],
    load: () => require('./forceReleaseCommand') as typeof import('./forceReleaseCommand'),
  },
  {
    name: 'destroy',
    description: 'remove the staging area TAG and everything in it, atomically (it vanishes at once), recorded in the audit log first. Refused while someone else holds it, unless --force.',
    arguments: [{ name: '<tag>', description: 'the staging area, relative to the static directory' }],
    options: [{ flags: '-f, --force', description: "force-release another holder's lock first (recorded in the audit log)" }],
    load: () => require('./destroyCommand') as typeof import('./destroyCommand'),
  },
];
