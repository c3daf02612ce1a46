/**
 * devserver-stage: the command line on the lock core, for scripts, CI jobs and other processes.
 * Exit codes: 0 success; 2 usage or bad tag; 3 held by another; 1 anything else (`verify`: a
 * damaged build).
 * `lock` exits with its command's exit code; `stage` exits 128 + the signal when interrupted,
 * and both do so while waiting for the lock. A closed stdout changes no exit code.
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { runLocked } from './cli/lockCommand';
import { formatList, formatStatus, queueNotice } from './cli/format';
import { runStage } from './cli/stageCommand';
import { runVerify } from './cli/verifyCommand';
import { runWatch } from './cli/watchCommand';
import { runHistory } from './cli/historyCommand';
import { parseDuration, parseSize } from './cli/units';
import { Interrupted, formatError, guardOutput, jsonRequested, outputFailed, usageError, warner } from './cli/output';
import { formatPrune, formatUsage } from './cli/usageFormat';
import { StagingError, isStagingError } from './core/errors';
import { flushHistory } from './core/history';
import { inspect, list } from './core/inspect';
import { describeHolder } from './core/lock';
import { queueOf, type OnQueue } from './core/queue';
import { DEFAULT_TIMING } from './core/protocol';
import { destroy, forceRelease } from './core/remove';
import { MARGIN_RULE } from './core/stage/space';
import { DEFAULT_MAX_BYTES } from './core/stage/types';
import { prune, usage } from './core/usage';
import type { Timing } from './core/types';

declare const __VERSION__: string | undefined;

export const EXIT = { ok: 0, error: 1, usage: 2, locked: 3 } as const;

interface GlobalOptions {
  staticDir?: string;
  json?: boolean;
  stale?: number;
  refresh?: number;
}

function seconds(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new InvalidArgumentError('expected a number of seconds, such as 30 or 0.5');
  return n;
}

function size(value: string): number {
  const n = parseSize(value);
  if (n === undefined) throw new InvalidArgumentError('expected a size such as 500M, 2G, 1.5GiB or a number of bytes');
  return n;
}

function duration(value: string): number {
  const n = parseDuration(value);
  if (n === undefined) throw new InvalidArgumentError('expected a duration with a unit, such as 30d, 12h, 90m or 1d12h');
  return n;
}

function count(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n)) throw new InvalidArgumentError('expected a whole number, such as 20');
  return n;
}

function exitCodeOf(err: unknown): number {
  if (err instanceof Interrupted) return err.exitCode;
  if (isStagingError(err)) {
    if (err.code === 'EBADTAG' || err.code === 'EBADSTATICDIR') return EXIT.usage;
    if (err.code === 'ELOCKED') return EXIT.locked;
  }
  return EXIT.error;
}

function buildProgram(argv: readonly string[]): Command {
  const program = new Command('devserver-stage');
  // With --json, commander's text for a usage error (it goes to writeErr) is not printed: main reports it as JSON.
  const json = (): boolean => program.opts<GlobalOptions>().json === true || jsonRequested(argv);
  program
    .description('Stage, lock, inspect and clean up staging areas of a devserver static directory.\nEvery command takes the same locks as the Devserver Staging extension and the core library.')
    .version(typeof __VERSION__ === 'string' ? __VERSION__ : 'dev')
    .addOption(new Option('-d, --static-dir <dir>', 'the static directory').env('DEVSERVER_STATIC_DIR'))
    .option('--json', 'print machine-readable JSON (errors as JSON on stderr)')
    .option('--stale <seconds>', `a lock without heartbeat for this long is stale (default ${DEFAULT_TIMING.staleMs / 1000})`, seconds)
    .option('--refresh <seconds>', `how often a held lock's heartbeat is refreshed (default ${DEFAULT_TIMING.refreshMs / 1000})`, seconds)
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({
      outputError: (text, write) => write(text),
      writeErr: (text) => (json() ? undefined : process.stderr.write(text)),
    })
    .addHelpText(
      'after',
      `
Exit codes: 0 success; 2 usage error or bad tag; 3 held by another (holder on stderr); 1 other errors.
'verify' exits 0 when the build is intact and 1 when it is damaged (each problem on stdout).
'lock' exits with the exit code of its command; 'lock' and 'stage' exit 128 + the signal when
stopped by one while waiting or staging: 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP.
With --json every error, usage errors included, is one line of JSON on stderr:
{"error":{"code":"EUSAGE","message":"..."}} (code EUSAGE for usage errors, else the error's code).
Every change to an area is recorded in its history ('history'); a record that cannot be written
is a warning on stderr ({"warning":{...}} with --json) and does not change the exit code.
Output to a reader that has gone away (devserver-stage list | head -1) is dropped quietly;
the exit code stays that of the command.

Examples:
  devserver-stage -d /srv/static list eve-release
  devserver-stage -d /srv/static stage eve-release/R120-15662.0.0 ./out/chromiumos_test_image.bin ./out/autotest.tar.gz
  devserver-stage -d /srv/static lock --create-once eve-release/R120-15662.0.0 -- ./stage.sh
  devserver-stage -d /srv/static verify eve-release/R120-15662.0.0
  devserver-stage -d /srv/static history eve-release/R120-15662.0.0 --since 2d
  devserver-stage -d /srv/static du eve-release
  devserver-stage -d /srv/static --json watch eve-release
  devserver-stage -d /srv/static prune --keep 50 --older-than 30d --dry-run
  DEVSERVER_STATIC_DIR=/srv/static devserver-stage --json status eve-release/R120-15662.0.0`,
    );

  const globals = (): GlobalOptions & { staticDir: string } => {
    const g = program.opts<GlobalOptions>();
    if (g.staticDir === undefined || g.staticDir === '') {
      throw new StagingError('EBADSTATICDIR', 'No static directory given: pass --static-dir DIR or set DEVSERVER_STATIC_DIR.');
    }
    return { ...g, staticDir: g.staticDir };
  };
  // A history record that could not be written does not fail the command: one line on stderr says so.
  let warnOnce: ((w: StagingError) => void) | undefined;
  const warn = (w: StagingError): void => {
    warnOnce ??= warner((line) => process.stderr.write(line), json());
    warnOnce(w);
  };
  /** What every core call takes from the global options: timing, and where warnings go. */
  const coreOptions = (g: GlobalOptions): Partial<Timing> & { warn: (w: StagingError) => void } => ({
    ...(g.stale !== undefined ? { staleMs: g.stale * 1000 } : {}),
    ...(g.refresh !== undefined ? { refreshMs: g.refresh * 1000 } : {}),
    warn,
  });
  const withNotice = (tag: string): { onQueue?: OnQueue } => {
    const onQueue = queueNotice(tag, process.stderr);
    return onQueue !== undefined ? { onQueue } : {};
  };
  const print = (g: GlobalOptions, json: unknown, text: string): void => {
    process.stdout.write(g.json === true ? `${JSON.stringify(json, null, 2)}\n` : text);
  };

  program
    .command('list')
    .description('list the subdirectories of the static directory (or of SUBPATH in it) with their lock states')
    .argument('[subpath]', 'a directory inside the static directory, such as a board', '')
    .action(async (subpath: string) => {
      const g = globals();
      const entries = await list(g.staticDir, subpath, coreOptions(g));
      print(g, entries, formatList(entries));
    });

  program
    .command('status')
    .description('show the lock state of one staging area: free, held, stale or legacy, with its holder, and who waits for it in line')
    .argument('<tag>', 'the staging area, relative to the static directory')
    .action(async (tag: string) => {
      const g = globals();
      const [info, queue] = await Promise.all([inspect(g.staticDir, tag, coreOptions(g)), queueOf(g.staticDir, tag, coreOptions(g))]);
      print(g, { ...info, queue }, formatStatus(info, queue));
    });

  program
    .command('lock')
    .description(
      'run COMMAND while holding the lock of TAG, and exit with its exit code (like flock(1)). ' +
        'If the lock is lost while it runs, COMMAND is stopped (SIGTERM, then SIGKILL after 5 s). ' +
        'COMMAND sees DEVSERVER_STAGING_DIR (the area), DEVSERVER_STAGING_TAG and DEVSERVER_STAGING_FENCE (the lock\'s fencing token). It runs in its own session and process group, ' +
        'and the lock lasts until that whole group has ended, even if this tool is killed (judged by the command\'s pid on this machine). ' +
        'SIGINT (Ctrl-C), SIGTERM, SIGHUP and SIGQUIT are passed on to the group once. A signal while waiting for the lock stops the wait: exit 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP. ' +
        'A tag inside a held area, or one with a held area inside it, cannot be locked (exit 3).',
    )
    .argument('<tag>', 'the staging area, relative to the static directory; created if missing')
    .argument('<command...>', 'the command to run, after --')
    .option('--create-once', 'the area must not exist yet (a new build); fail if it does')
    .option('--wait <seconds>', 'wait up to this long for the lock, in line behind those already waiting (first come, first served)', seconds, 0)
    .option('--purpose <text>', 'what the lock is for, shown to others')
    .option('--destroy-on-failure', 'if COMMAND fails and this run created the area, remove it so a later run can retry')
    .usage('[options] <tag> -- <command> [args...]')
    .action(async (tag: string, command: string[], o: { createOnce?: boolean; wait: number; purpose?: string; destroyOnFailure?: boolean }) => {
      const g = globals();
      const code = await runLocked(
        g.staticDir,
        tag,
        command,
        {
          ...coreOptions(g),
          createOnce: o.createOnce === true,
          waitMs: o.wait * 1000,
          ...(o.purpose !== undefined ? { purpose: o.purpose } : { purpose: command.join(' ').slice(0, 200) }),
          destroyOnFailure: o.destroyOnFailure === true,
          ...withNotice(tag),
        },
        (m) => process.stderr.write(`devserver-stage: ${m}\n`),
      );
      process.exitCode = code;
    });

  program
    .command('stage')
    .summary('stage files, directories, archives or URLs into TAG under its lock, with progress')
    .description(
      'stage artifacts into TAG under its lock: local files and directories, archives or http(s) URLs. ' +
        'A new build by default (TAG must not exist yet); --add adds to an existing one. ' +
        "Each artifact is recorded with its SHA-256 in the area's manifest; one already there with the same content is skipped, " +
        'one with different content is an error unless --overwrite. A run that fails keeps nothing it wrote (a new build is removed). ' +
        'Progress goes to stderr, the summary to stdout. Ctrl-C stops, removes what this run wrote, and exits 130 (SIGTERM: 143, SIGHUP: 129), also while waiting for the lock.',
    )
    .argument('<tag>', 'the staging area, relative to the static directory')
    .argument('<sources...>', 'what to stage: files, directories (their contents), archives (.tar, .tar.gz, .tgz, .tar.xz, .zip: unpacked) or http(s) URLs')
    .option('--add', 'add to an existing build instead of creating a new one')
    .option('--overwrite', 'replace artifacts of the same name whose content differs')
    .option(
      '--max-size <size>',
      `refuse to write more than this in one run: 500M, 2G, 1.5GiB or bytes (default ${DEFAULT_MAX_BYTES / 1024 ** 3}G). ` +
        `Whatever it is, a run also stops before it would leave less free space on the filesystem than a safety margin of ${MARGIN_RULE}, ` +
        'counted from the free space when it starts',
      size,
    )
    .option('--wait <seconds>', 'wait up to this long for the lock, in line behind those already waiting (first come, first served)', seconds, 0)
    .option('--purpose <text>', 'what the lock is for, shown to others (default: the sources)')
    .action(async (tag: string, sources: string[], o: { add?: boolean; overwrite?: boolean; maxSize?: number; wait: number; purpose?: string }) => {
      const g = globals();
      process.exitCode = await runStage(
        g.staticDir,
        tag,
        sources,
        {
          ...coreOptions(g),
          add: o.add === true,
          overwrite: o.overwrite === true,
          ...(o.maxSize !== undefined ? { maxBytes: o.maxSize } : {}),
          waitMs: o.wait * 1000,
          ...(o.purpose !== undefined ? { purpose: o.purpose } : {}),
          ...withNotice(tag),
        },
        { stdout: process.stdout, stderr: process.stderr, json: g.json === true },
      );
    });

  program
    .command('verify')
    .summary('check a staged build against its manifest: every artifact there, with its size and SHA-256')
    .description(
      "check the build TAG against its manifest: every artifact it lists is there with its recorded size and SHA-256 (a link: its target), " +
        'and nothing else is there but the bookkeeping (lock, manifest, staged.timestamp). Links and FIFOs in place of artifacts are reported, never followed or read. ' +
        'It only reads and takes no lock, so it never holds up a staging; a build locked while it is verified is said to be, since its results may change. ' +
        'One line per problem and a summary on stdout; progress on stderr on a terminal. ' +
        'Exit 0 when the build is intact, 1 when it is damaged, has no manifest (ENOMANIFEST) or a damaged one (ECORRUPT).',
    )
    .argument('<tag>', 'the build, relative to the static directory')
    .action(async (tag: string) => {
      const g = globals();
      process.exitCode = await runVerify(g.staticDir, tag, coreOptions(g), { stdout: process.stdout, stderr: process.stderr, json: g.json === true });
    });

  program
    .command('watch')
    .summary('follow lock states as they change, one line per change (JSON lines with --json)')
    .description(
      'print every build of the static directory (or below SUBPATH) with its lock state, then a line for each change as it happens: ' +
        'a lock taken, released, turned stale or force-released, a build staged or removed; until stopped (Ctrl-C: exit 130). ' +
        'With --json each line is a JSON object: time, event (snapshot, change or gone), tag, state, holder (user@host), pid, clientId, purpose, token (the fencing token), staleReason. ' +
        'It follows the directory as the Devserver Staging extension does: inotify on local filesystems, and polling every 0.75 to 1.5 s on network filesystems (NFS, sshfs, SMB), which see no events for what other machines do.',
    )
    .argument('[subpath]', 'a folder or build inside the static directory, such as a board', '')
    .option('--poll <seconds>', 'poll every this many seconds whatever the filesystem (default: only on network filesystems)', seconds)
    .action(async (subpath: string, o: { poll?: number }) => {
      const g = globals();
      process.exitCode = await runWatch(g.staticDir, subpath, coreOptions(g), { stdout: process.stdout, stderr: process.stderr, json: g.json === true, pollMs: (o.poll ?? 0) * 1000 });
    });

  program
    .command('du')
    .summary('show the staging areas with size, artifacts, last use and lock state, oldest first')
    .description(
      'show the staging areas of the static directory (or below SUBPATH) with their size, artifacts, last use and lock state, ' +
        'least recently used first, and the total. An area is a directory with a manifest, a staged.timestamp or a lock; ' +
        'symbolic links are not followed.',
    )
    .argument('[subpath]', 'a directory inside the static directory, such as a board', '')
    .action(async (subpath: string) => {
      const g = globals();
      const areas = await usage(g.staticDir, { ...coreOptions(g), subpath });
      print(g, areas, formatUsage(areas));
    });

  program
    .command('prune')
    .summary('remove the least recently used areas (--keep N, --older-than 30d); never held ones')
    .description(
      'remove the least recently used staging areas: those beyond the N most recently used (--keep), and those not used for DURATION (--older-than); ' +
        'with both, an area goes if either selects it. ' +
        "Last use is the mtime of the area's staged.timestamp (else of the directory). " +
        'Areas that are held, or whose lock is stale or legacy, are never removed; they are listed as skipped ' +
        '(a stale lock may belong to a machine that comes back). ' +
        "Each removal takes the area's lock and is recorded in the audit log; a failed one does not stop the others, and makes the exit code 1.",
    )
    .argument('[subpath]', 'prune only below this directory of the static directory, such as a board', '')
    .option('--keep <n>', 'keep the N most recently used areas', count)
    .option('--older-than <duration>', 'remove areas not used for this long: 30d, 12h, 90m (minutes), 1d12h, 2w', duration)
    .option('--dry-run', 'only show what would be removed')
    .action(async (subpath: string, o: { keep?: number; olderThan?: number; dryRun?: boolean }, command: Command) => {
      if (o.keep === undefined && o.olderThan === undefined) {
        command.error('error: prune needs --keep N or --older-than DURATION (or both)', { exitCode: EXIT.usage, code: 'prune.noRule' });
      }
      const g = globals();
      const result = await prune(g.staticDir, {
        ...coreOptions(g),
        subpath,
        dryRun: o.dryRun === true,
        ...(o.keep !== undefined ? { keep: o.keep } : {}),
        ...(o.olderThan !== undefined ? { olderThan: o.olderThan } : {}),
      });
      print(g, result, formatPrune(result));
      if (result.failed.length > 0) process.exitCode = EXIT.error;
    });

  program
    .command('history')
    .summary('show what happened to a build (or to all): taken, staged, verified, released, lost, removed, by whom, when')
    .description(
      'show the history of TAG, or of every area without it, oldest first: each time it was acquired (and how long the holder waited), ' +
        'released or lost (and how long it was held), taken over from a stale holder, force-released, destroyed, staged (artifacts, bytes) or verified, ' +
        'with who did it, when (UTC) and the fencing token. Every client records it (devserver-stage, the extension, the core library), on the static directory itself. ' +
        'With --json, one JSON object per line (JSON lines), as the history is stored.',
    )
    .argument('[tag]', 'the area, relative to the static directory (it need not exist any more)')
    .option('--since <duration>', 'only events of the last DURATION: 30m, 12h, 2d, 1d12h', duration)
    .option('--limit <n>', 'only the newest N events', count)
    .action(async (tag: string | undefined, o: { since?: number; limit?: number }) => {
      const g = globals();
      const query = {
        warn,
        ...(tag !== undefined ? { tag } : {}),
        ...(o.since !== undefined ? { sinceMs: Date.now() - o.since } : {}),
        ...(o.limit !== undefined ? { limit: o.limit } : {}),
      };
      process.exitCode = await runHistory(g.staticDir, query, { stdout: process.stdout, json: g.json === true });
    });

  program
    .command('force-release')
    .description(
      "remove another holder's lock on TAG (ours or the Python devserver's) and record it in the audit log " +
        '(<static-dir>/.devserver-staging/audit.log) first: if it cannot be recorded, nothing is done. A holder still running learns it lost the lock.',
    )
    .argument('<tag>', 'the staging area, relative to the static directory')
    .action(async (tag: string) => {
      const g = globals();
      const previous = await forceRelease(g.staticDir, tag, coreOptions(g));
      print(g, { released: true, previous }, `Released ${previous.lockPath}, held by ${describeHolder(previous)} (was ${previous.state}).\n`);
    });

  program
    .command('destroy')
    .description('remove the staging area TAG and everything in it, atomically (it vanishes at once), recorded in the audit log first. Refused while someone else holds it, unless --force.')
    .argument('<tag>', 'the staging area, relative to the static directory')
    .option('-f, --force', "force-release another holder's lock first (recorded in the audit log)")
    .action(async (tag: string, o: { force?: boolean }) => {
      const g = globals();
      await destroy(g.staticDir, tag, { ...coreOptions(g), force: o.force === true });
      print(g, { destroyed: true, tag }, `Destroyed ${tag}.\n`);
    });

  return program;
}

export async function main(argv: readonly string[]): Promise<number> {
  const program = buildProgram(argv);
  const json = (): boolean => program.opts<GlobalOptions>().json === true || jsonRequested(argv);
  try {
    await program.parseAsync(argv as string[], { from: 'user' });
    return typeof process.exitCode === 'number' ? process.exitCode : EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and version end up here too, with exit code 0; commander has already printed them.
      if (err.exitCode === 0) return EXIT.ok;
      // Without --json commander has printed the message; with it, it is reported here.
      if (json()) process.stderr.write(formatError(usageError(err.message), true));
      return EXIT.usage;
    }
    process.stderr.write(formatError(err, json()));
    return exitCodeOf(err);
  } finally {
    // Records queued for a network filesystem are written before the process exits.
    await flushHistory();
  }
}

if (require.main === module) {
  guardOutput();
  const argv = process.argv.slice(2);
  main(argv).then(
    (code) => {
      process.exitCode = outputFailed() ? EXIT.error : code;
    },
    (err: unknown) => {
      const json = jsonRequested(argv);
      process.stderr.write(json ? formatError(err, true) : `devserver-stage: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exitCode = EXIT.error;
    },
  );
}
