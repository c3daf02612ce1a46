/**
 * The fault checker's operations, each a real process on one of the sshfs clients with that
 * client's hostname (`unshare --uts`): the built command-line tool (`stage`, `stage --add`,
 * `destroy`, `force-release`, `lock -- COMMAND` running test/workers/fault-writer.js) and holders
 * using the core library (test/workers/fault-holder.js). Each runs under a deadline that does not
 * count the time the nemesis kept it stopped; one that misses it is reported with where each of its
 * processes waits, then killed.
 */
import { spawn, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { CLI, WORKERS } from '../helpers';
import { logLength } from './log';
import { isRunning, procStat, whereItWaits } from './procs';
import type { SectionArgs, SectionPlan } from './section';

export type OpKind = 'hold' | 'lockcmd' | 'stage' | 'add' | 'destroy' | 'destroyw' | 'force';
export const OP_KINDS: readonly OpKind[] = ['hold', 'lockcmd', 'stage', 'add', 'destroy', 'destroyw', 'force'];

export interface Client {
  /** `a`, `b`: the sshfs client. */
  name: string;
  /** The hostname its processes have. */
  host: string;
  /** Its mount of the export. */
  mount: string;
}

export interface Setting {
  clients: Client[];
  /** The log on the server (for hints and lengths), and its name below each mount. */
  serverLog: string;
  logName: string;
  /** The static directory's name below each mount. */
  staticName: string;
  /** Where staging sources are made (outside the export). */
  sourcesDir: string;
  /** Where Node writes diagnostic reports of processes that missed their deadline. */
  reportDir: string;
  staleMs: number;
  refreshMs: number;
  /** An operation's deadline, beyond its wait for the lock and the time it was kept stopped. */
  deadlineMs: number;
}

/** One process of an operation, as the nemesis sees it. */
export interface Proc {
  op: Op;
  pid: number;
  /** Its start time in /proc: a later process with the same pid is not this one. */
  start: string;
  role: 'worker' | 'cli' | 'writer';
  /** Whether it is inside its critical section (between its `in` and `out` lines). */
  inSection: boolean;
  ended: boolean;
  /** Since when the nemesis keeps it stopped (performance.now), if it does. */
  stoppedSince?: number;
}

export type OpEnd = 'ok' | 'failed' | 'killed' | 'hung';

export interface Op {
  id: string;
  kind: OpKind;
  client: Client;
  tag: string;
  waitS: number;
  /** destroy --force. */
  force?: boolean;
  /** hold, destroyw, lockcmd: the critical section. */
  section?: SectionPlan;
  /** stage, add: the artifacts, name -> size. */
  artifacts?: Record<string, number>;
  /** A named step of the protocol at which the process stops itself (DEVSERVER_STAGING_PAUSE_AT). */
  pauseAt?: string;

  // What happened.
  startedMs: number;
  endedMs: number;
  /** The log's length when it started and when it ended. */
  lo: number;
  hi: number;
  procs: Proc[];
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  end: OpEnd;
  /** The error code it reported. */
  code?: string;
  /** The lock instance and fencing token it was given. */
  token?: string;
  fence?: number;
  /** Entries accepted, refused by the fence, failed otherwise. */
  accepted: number;
  refused: number;
  failed: number;
  lost: boolean;
  killedByNemesis: boolean;
  stoppedMs: number;
  /** Where its processes waited, when it missed its deadline. */
  hang?: string;
  stdout: string;
  stderr: string;
}

const codeIn = (text: string): string | undefined => /"code"\s*:\s*"([A-Z_]+)"/.exec(text)?.[1];

export class OpRunner {
  private readonly live = new Set<Proc>();
  private logSeen = 0;

  constructor(private readonly s: Setting) {}

  /** The processes of running operations that have not ended. */
  procs(): Proc[] {
    return [...this.live].filter((p) => !p.ended);
  }

  logNow(): number {
    this.logSeen = logLength(this.s.serverLog, this.logSeen);
    return this.logSeen;
  }

  /** Where each client's processes find the static directory and the log. */
  private staticDir(c: Client): string {
    return path.join(c.mount, this.s.staticName);
  }

  private sectionArgs(op: Op): SectionArgs {
    return { plan: op.section!, mountLog: path.join(op.client.mount, this.s.logName), serverLog: this.s.serverLog };
  }

  /** Node with diagnostic reports on SIGUSR2, for the deadline's report. */
  private node(): string[] {
    return [process.execPath, '--report-on-signal', `--report-directory=${this.s.reportDir}`];
  }

  private cli(args: string[]): string[] {
    return [...this.node(), CLI, '--stale', String(this.s.staleMs / 1000), '--refresh', String(this.s.refreshMs / 1000), ...args];
  }

  private argv(op: Op): string[] {
    const timing = { staleMs: this.s.staleMs, refreshMs: this.s.refreshMs };
    const wait = ['--wait', String(op.waitS)];
    switch (op.kind) {
      case 'hold':
      case 'destroyw':
        return [...this.node(), path.join(WORKERS, 'fault-holder.js'), JSON.stringify({ staticDir: this.staticDir(op.client), tag: op.tag, ...timing, waitMs: op.waitS * 1000, section: this.sectionArgs(op) })];
      case 'lockcmd':
        return this.cli(['--json', 'lock', op.tag, ...wait, '--', ...this.node(), path.join(WORKERS, 'fault-writer.js'), JSON.stringify(this.sectionArgs(op))]);
      case 'stage':
      case 'add':
        return this.cli(['--json', 'stage', ...(op.kind === 'add' ? ['--add'] : []), op.tag, this.sourceOf(op), ...wait]);
      case 'destroy':
        return this.cli(['--json', 'destroy', op.tag, ...(op.force === true ? ['--force'] : [])]);
      case 'force':
        return this.cli(['--json', 'force-release', op.tag]);
    }
  }

  sourceOf(op: Op): string {
    return path.join(this.s.sourcesDir, `src-${op.id}`);
  }

  /** Runs `op` to its end (or its deadline), filling in what happened. `content(name)` gives each artifact's bytes. */
  async run(op: Op, content: (op: Op, name: string, size: number) => Buffer): Promise<void> {
    if (op.artifacts !== undefined) {
      for (const [name, size] of Object.entries(op.artifacts)) {
        const p = path.join(this.sourceOf(op), name);
        fs.mkdirSync(path.dirname(p), { recursive: true });
        fs.writeFileSync(p, content(op, name, size));
      }
    }
    const argv = this.argv(op);
    const env: NodeJS.ProcessEnv = { ...process.env, DEVSERVER_STATIC_DIR: this.staticDir(op.client) };
    delete env.DEVSERVER_STAGING_PAUSE_AT;
    if (op.pauseAt !== undefined) env.DEVSERVER_STAGING_PAUSE_AT = op.pauseAt;
    op.lo = this.logNow();
    op.startedMs = performance.now();
    // exec keeps one process through unshare and sh, so that signals reach node itself.
    const child = spawn('unshare', ['--uts', 'sh', '-c', `hostname ${op.client.host} && exec "$0" "$@"`, ...argv], { stdio: ['ignore', 'pipe', 'pipe'], env });
    const main = this.track(op, child.pid!, op.kind === 'hold' || op.kind === 'destroyw' ? 'worker' : 'cli');
    let pending = '';
    child.stdout.on('data', (d: Buffer) => {
      op.stdout += d.toString();
      pending += d.toString();
      const lines = pending.split('\n');
      pending = lines.pop()!;
      for (const line of lines) this.onLine(op, main, line);
    });
    child.stderr.on('data', (d: Buffer) => {
      // Its last words (the error, after any progress lines) are what the report needs.
      op.stderr = (op.stderr + d.toString()).slice(-8_000);
    });
    const closed = new Promise<void>((resolve) =>
      child.once('close', (code, signal) => {
        op.exitCode = code;
        op.signal = signal;
        resolve();
      }),
    );
    await this.underDeadline(op, child, closed);
    for (const p of op.procs) {
      p.ended = true;
      this.live.delete(p);
    }
    op.endedMs = performance.now();
    op.hi = this.logNow();
    op.code ??= codeIn(op.stderr);
    if (op.kind === 'stage' || op.kind === 'add') {
      try {
        const r = JSON.parse(op.stdout) as { added?: { fence?: number }[]; skipped?: { fence?: number }[] };
        op.fence = r.added?.[0]?.fence;
      } catch {
        /* it failed or was killed: no summary */
      }
    }
    // A worker exits 0 after a refusal it reported (ELOCKED and the like): that is a failure too.
    op.end = op.hang !== undefined ? 'hung' : op.killedByNemesis ? 'killed' : op.exitCode === 0 && op.code === undefined ? 'ok' : 'failed';
    // Read what it said; keep only its start, for the report of a run of thousands.
    op.stdout = op.stdout.slice(0, 2_000);
    fs.rmSync(this.sourceOf(op), { recursive: true, force: true });
  }

  private track(op: Op, pid: number, role: Proc['role']): Proc {
    const p: Proc = { op, pid, start: procStat(pid)?.start ?? '', role, inSection: false, ended: false };
    op.procs.push(p);
    this.live.add(p);
    return p;
  }

  private onLine(op: Op, main: Proc, line: string): void {
    let m: { t?: string; [k: string]: unknown };
    try {
      m = JSON.parse(line) as typeof m;
    } catch {
      return;
    }
    const writer = op.procs.find((p) => p.role === 'writer');
    switch (m.t) {
      case 'start':
        if (m.role === 'writer' && typeof m.pid === 'number') this.track(op, m.pid, 'writer');
        break;
      case 'acquired':
        op.token = String(m.token);
        op.fence = Number(m.fence);
        break;
      case 'in':
      case 'out':
        // In a `lock -- COMMAND`, the tool holds the lock and the command writes: both are inside.
        for (const p of [main, writer]) if (p !== undefined) p.inSection = m.t === 'in';
        break;
      case 'wrote':
        if (m.outcome === 'accepted') op.accepted++;
        else if (m.outcome === 'refused') op.refused++;
        else op.failed++;
        break;
      case 'lost':
        op.lost = true;
        break;
      case 'error':
      case 'release-error':
      case 'crash':
        op.code ??= typeof m.code === 'string' ? m.code : 'ECRASH';
        break;
    }
  }

  /** Waits for the op to end; past its deadline, says where its processes wait and kills them. */
  private async underDeadline(op: Op, child: ChildProcess, closed: Promise<void>): Promise<void> {
    const limit = this.s.deadlineMs + op.waitS * 1000;
    let done = false;
    void closed.then(() => (done = true));
    while (!done) {
      await Promise.race([closed, new Promise((r) => setTimeout(r, 250))]);
      if (done) break;
      const now = performance.now();
      const stopped = op.stoppedMs + Math.max(0, ...op.procs.map((p) => (p.stoppedSince !== undefined ? now - p.stoppedSince : 0)));
      if (now - op.startedMs - stopped <= limit) continue;
      const where: string[] = [];
      for (const p of op.procs) if (isRunning(p.pid, p.start)) where.push(`${p.role} ${await whereItWaits(p.pid, this.s.reportDir)}`);
      op.hang = `op ${op.id} (${op.kind} ${op.tag} on client ${op.client.name}) had not ended ${Math.round((now - op.startedMs) / 1000)} s after it started (${Math.round(stopped / 1000)} s of it stopped):\n${where.join('\n')}`;
      for (const p of op.procs) {
        if (!isRunning(p.pid, p.start)) continue;
        try {
          // The command of `lock --` leads a process group of its own.
          process.kill(p.role === 'writer' ? -p.pid : p.pid, 'SIGKILL');
        } catch {
          /* gone meanwhile */
        }
        try {
          process.kill(p.pid, 'SIGCONT');
        } catch {
          /* gone */
        }
      }
      child.kill('SIGKILL');
      await closed;
    }
  }
}

/** A new operation record, before it runs. */
export function newOp(id: string, kind: OpKind, client: Client, tag: string, waitS: number): Op {
  return {
    id,
    kind,
    client,
    tag,
    waitS,
    startedMs: 0,
    endedMs: 0,
    lo: 0,
    hi: 0,
    procs: [],
    exitCode: null,
    signal: null,
    end: 'failed',
    accepted: 0,
    refused: 0,
    failed: 0,
    lost: false,
    killedByNemesis: false,
    stoppedMs: 0,
    stdout: '',
    stderr: '',
  };
}
