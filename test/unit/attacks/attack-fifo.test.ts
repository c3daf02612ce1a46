/**
 * Records that cannot hang: a FIFO planted as an owner record (`devserver.lock/owner.json`), as the
 * manifest, as `audit.log`, as `staged.timestamp` and as the clock probe names. Each command that
 * reads, writes or removes that record (status, list, force-release, `lock --wait`, `stage --add`,
 * du, destroy) must end on its own within the deadline, with the exit code and words of having
 * reached the FIFO: a run that stopped before it proves nothing, and fails. The kernel says when
 * the FIFO was reached (inotify: opened, moved, removed; the clock probe is measured, with
 * `DEVSERVER_STAGING_CLOCK_PROBE=1`, and its sweep removes the planted names, made an hour old).
 * Each such command is run a second time, stopped (SIGSTOP) by the watcher the moment it reaches
 * the FIFO, sent SIGTERM there and continued: it must then end within the grace. A command still
 * running at the deadline is SIGTERMed, then SIGKILLed 3 s later, and the failure says which.
 */
import { strict as assert } from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { cliTimed, describeRun, hasTool, nextPids, pool, processState, watchReach, type Timed } from '../../attack';
import { cleanup, cli, report, tempDir } from '../../helpers';

const DEADLINE_MS = 10_000;
const TAG = 'board/f1';
/** Tries at stopping a command at the FIFO before it ends (a run can end between the event and the stop). */
const STOP_TRIES = 3;

type Position = 'owner.json' | 'manifest' | 'audit.log' | 'staged.timestamp' | 'clock probes';

interface Reach {
  code: number;
  /** In stdout + stderr, with the sandbox's root written as `<root>`. */
  says: RegExp;
  /** Whether the kernel sees it reach the FIFO (an open, a rename, a removal); false: it is refused on a look (lstat) alone. */
  seen: boolean;
}

const FIFO_REFUSED = 'it is a FIFO, not a file this tool wrote';
const names = (rel: string): RegExp => new RegExp(`<root>/static/${rel.replace(/\./g, '\\.')}: ${FIFO_REFUSED}`);
const OWNER = names(`${TAG}/devserver.lock/owner.json`);
const MANIFEST = names(`${TAG}/.devserver-staging.manifest.json`);
const AUDIT = new RegExp(`could not record it in <root>/static/\\.devserver-staging/audit\\.log: ${FIFO_REFUSED}`);

const COMMANDS = {
  status: () => ['status', TAG],
  list: () => ['list', 'board'],
  'force-release': () => ['force-release', TAG],
  'lock --wait 3': () => ['lock', '--wait', '3', TAG, '--', 'true'],
  'stage --add': (src: string) => ['stage', '--add', TAG, src],
  du: () => ['du'],
  'destroy --force': () => ['destroy', '--force', TAG],
} as const;
type Command = keyof typeof COMMANDS;

/** For each position, the commands that reach it, and what reaching it gives. */
const REACHES: Record<Position, Partial<Record<Command, Reach>>> = {
  'owner.json': {
    status: { code: 0, says: OWNER, seen: true },
    list: { code: 0, says: /held\s+board\/f1\s+\?/, seen: true },
    'force-release': { code: 0, says: new RegExp(`Released <root>/static/board/f1/devserver\\.lock[\\s\\S]*${OWNER.source}`), seen: true },
    'lock --wait 3': { code: 3, says: OWNER, seen: true },
    'stage --add': { code: 3, says: OWNER, seen: true },
    du: { code: 0, says: /board\/f1 .* held/, seen: true },
    'destroy --force': { code: 0, says: /Destroyed board\/f1/, seen: true },
  },
  manifest: {
    'stage --add': { code: 1, says: MANIFEST, seen: true },
    du: { code: 0, says: MANIFEST, seen: true },
    'destroy --force': { code: 0, says: /Destroyed board\/f1/, seen: true },
  },
  // With a stale lock in the area, so that removing it must be recorded first.
  'audit.log': {
    'force-release': { code: 1, says: AUDIT, seen: false },
    'destroy --force': { code: 1, says: AUDIT, seen: false },
  },
  'staged.timestamp': {
    // The last staging's token, a floor for the next.
    'lock --wait 3': { code: 0, says: /^/, seen: true },
    'stage --add': { code: 0, says: /Staged board\/f1: 1 added/, seen: true },
    'destroy --force': { code: 0, says: /Destroyed board\/f1/, seen: true },
  },
  // Every command that judges a lock measures the filesystem's clock (status of a free area judges none).
  'clock probes': {
    list: { code: 0, says: /free\s+board\/f1/, seen: true },
    'force-release': { code: 1, says: /board\/f1 is not locked/, seen: true },
    'lock --wait 3': { code: 0, says: /^/, seen: true },
    'stage --add': { code: 0, says: /Staged board\/f1: 1 added/, seen: true },
    du: { code: 0, says: /board\/f1 .* free/, seen: true },
    'destroy --force': { code: 0, says: /Destroyed board\/f1/, seen: true },
  },
};

function mkfifo(paths: string[]): void {
  for (let i = 0; i < paths.length; i += 500) {
    const r = spawnSync('mkfifo', paths.slice(i, i + 500), { encoding: 'utf8' });
    assert.equal(r.status, 0, `mkfifo: ${r.stderr}`);
  }
}

describe('attack: FIFOs in every record position', function () {
  this.timeout(600_000);
  let template = '';

  before(async function () {
    if (process.platform !== 'linux' || !hasTool('mkfifo')) {
      console.log('      skipped: needs Linux and mkfifo');
      this.skip();
    }
    template = tempDir('dss-attack-fifo-template-');
    const src = path.join(template, 'src');
    fs.mkdirSync(src);
    fs.writeFileSync(path.join(src, 'extra.bin'), 'more\n');
    fs.mkdirSync(path.join(template, 'static'));
    const first = path.join(template, 'first');
    fs.mkdirSync(first);
    fs.writeFileSync(path.join(first, 'a.bin'), 'a\n');
    const r = await cli(path.join(template, 'static'), ['stage', TAG, first]);
    assert.equal(r.code, 0, r.stderr);
  });
  after(() => template && cleanup(template));

  /** A copy of the template with a FIFO at `pos`: what to watch (files, and names in a directory). */
  function sandbox(pos: Position): { root: string; staticDir: string; src: string; files: string[]; names: [string, string][] } {
    const root = tempDir('dss-attack-fifo-');
    fs.cpSync(template, root, { recursive: true, verbatimSymlinks: true });
    const staticDir = path.join(root, 'static');
    const area = path.join(staticDir, TAG);
    const meta = path.join(staticDir, '.devserver-staging');
    fs.mkdirSync(meta, { recursive: true });
    const old = new Date(Date.now() - 3600_000);
    let fifo: string | undefined;
    switch (pos) {
      case 'owner.json':
        fs.mkdirSync(path.join(area, 'devserver.lock'));
        fifo = path.join(area, 'devserver.lock', 'owner.json');
        break;
      case 'manifest':
        fifo = path.join(area, '.devserver-staging.manifest.json');
        fs.rmSync(fifo);
        break;
      case 'audit.log': {
        fifo = path.join(meta, 'audit.log');
        fs.rmSync(fifo, { force: true });
        // A stale lock: removing it must be recorded in the log first.
        const lock = path.join(area, 'devserver.lock');
        fs.mkdirSync(lock);
        fs.writeFileSync(path.join(lock, 'owner.json'), JSON.stringify({ pid: 999_999, hostname: 'gone.example', user: 'x', clientId: 'x', acquiredAt: 0, token: 'dead', staleMs: 10_000, refreshMs: 2_500, tool: 'test' }));
        fs.utimesSync(lock, old, old);
        break;
      }
      case 'staged.timestamp':
        fifo = path.join(area, 'staged.timestamp');
        fs.rmSync(fifo);
        break;
      case 'clock probes': {
        const probes = nextPids(1500).map((p) => path.join(meta, `clock.${p}`));
        mkfifo(probes);
        for (const p of probes) fs.utimesSync(p, old, old);
        return { root, staticDir, src: path.join(root, 'src'), files: [], names: [[meta, 'clock\\.[0-9]+$']] };
      }
    }
    mkfifo([fifo]);
    return { root, staticDir, src: path.join(root, 'src'), files: [fifo], names: [] };
  }

  /** Runs `cmd` against a FIFO at `pos`; with `term`, stopped where it reaches the FIFO and sent SIGTERM there. */
  async function runOnce(pos: Position, cmd: Command, term: boolean): Promise<{ r: Timed; events: string[]; missed: boolean; root: string }> {
    const s = sandbox(pos);
    try {
      const watch = await watchReach(s.files, s.names);
      let pid = 0;
      let missed = false;
      // SIGTERM only where the watcher stopped it at the FIFO: a process that ended first is a zombie, not stopped.
      // (A signal stops a process once the kernel next schedules it: look until it has.)
      const atFifo = new Promise<void>((resolve) => {
        void watch.stopped.then(async () => {
          for (;;) {
            const state = processState(pid);
            if (state === 'T' || state === 't') return resolve();
            if (state === undefined || state === 'Z' || state === 'X') return void (missed = true);
            await new Promise((r) => setImmediate(r));
          }
        });
      });
      const r = await cliTimed(s.staticDir, COMMANDS[cmd](s.src), {
        timeoutMs: DEADLINE_MS,
        env: { DEVSERVER_STAGING_CLOCK_PROBE: '1' },
        onSpawn: (p) => {
          pid = p;
          watch.start(term ? p : 0);
        },
        ...(term ? { termOn: atFifo } : {}),
      });
      const events = await watch.end();
      return { r, events, missed: term && !r.termSent ? true : missed, root: s.root };
    } finally {
      cleanup(s.root);
    }
  }

  for (const pos of Object.keys(REACHES) as Position[]) {
    const commands = Object.keys(REACHES[pos]) as Command[];
    const stoppable = commands.filter((c) => REACHES[pos][c]!.seen);
    const title = `${commands.join(', ')} reach it and none hangs${stoppable.length > 0 ? ', and each stops on SIGTERM there' : ' (each is refused on a look, before any open)'}`;
    it(`a FIFO as ${pos}: ${title}`, async () => {
      const problems: string[] = [];
      const lines: string[] = [];
      let reached = 0;
      let seen = 0;
      let termed = 0;
      let retries = 0;
      const jobs: { cmd: Command; term: boolean }[] = [];
      for (const cmd of commands) {
        jobs.push({ cmd, term: false });
        if (REACHES[pos][cmd]!.seen) jobs.push({ cmd, term: true });
      }
      await pool(jobs, 4, async ({ cmd, term }) => {
        const want = REACHES[pos][cmd]!;
        let run = await runOnce(pos, cmd, term);
        for (let tries = 1; term && run.missed && tries < STOP_TRIES; tries++) {
          retries++;
          run = await runOnce(pos, cmd, term);
        }
        const { r, events } = run;
        const what = `${cmd}${term ? ' (SIGTERM where it reached the FIFO)' : ''} with a FIFO as ${pos}`;
        const words = `${r.stdout}\n${r.stderr}`.split(run.root).join('<root>');
        const line = `${describeRun(what, r).split(run.root).join('<root>')}; ${events.length} events on the FIFO`;
        lines.push(line);
        if (r.hung) problems.push(`HANG: ${line}`);
        else if (term) {
          if (run.missed) problems.push(`NOT STOPPED AT THE FIFO in ${STOP_TRIES} tries (it ended first): ${line}`);
          else if (r.stoppedOnTerm !== true) problems.push(`IGNORES SIGTERM: ${line}`);
          else termed++;
        } else {
          const reachedIt = r.code === want.code && want.says.test(words) && (!want.seen || events.length > 0);
          if (events.length > 0) seen++;
          if (reachedIt) reached++;
          else problems.push(`DID NOT REACH THE FIFO (expected exit ${want.code}, words ${want.says}${want.seen ? ', an event on it' : ''}): ${line}\n    ${words.trim().split('\n').slice(-3).join('\n    ')}`);
        }
      });
      report(
        `FIFO as ${pos}: ${reached} of ${commands.length} commands reached it (by their exit code and words; the kernel saw ${seen} reach it), ` +
          `${termed} of ${stoppable.length} stopped there, sent SIGTERM and ended (${retries} more runs: ended before they could be stopped), ${problems.length} problems`,
      );
      assert.ok(problems.length === 0, `a FIFO as ${pos}:\n  ${problems.join('\n  ')}\nall runs:\n  ${lines.join('\n  ')}`);
      assert.equal(reached, commands.length, 'every command reached the FIFO');
      assert.equal(termed, stoppable.length, 'every command the kernel sees reach it was sent SIGTERM there');
    });
  }
});
