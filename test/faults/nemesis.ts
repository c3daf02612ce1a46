/**
 * The nemesis of the fault checker: while operations run, it SIGKILLs their processes, SIGSTOPs
 * them for longer than the stale threshold (preferring holders inside their critical sections) and
 * continues them, continues those that stopped themselves at a named protocol step, and fills the
 * disk under the export to the last block and frees it. Every action is recorded with what proves
 * it happened: a kill is seen when the kernel no longer runs the process, a stop when /proc shows it
 * in state T, a full disk when a write got ENOSPC.
 */
import * as fs from 'fs';
import * as path from 'path';
import type { SmallDisk } from '../disk';
import type { OpRunner, Proc } from './ops';
import { isRunning, procStat, sleep } from './procs';

export interface NemesisAction {
  /** ms since the run began. */
  atMs: number;
  action: 'kill' | 'stop' | 'step-stop' | 'fill' | 'free';
  op?: string;
  role?: Proc['role'];
  pid?: number;
  inSection?: boolean;
  /** Aimed at a stager while the server showed its commit record (it was inside its commit). */
  atCommit?: boolean;
  /** The operation's tag and client. */
  tag?: string;
  client?: string;
  /** A contender for a lock whose holder was stopped at the time. */
  contender?: boolean;
  /** kill: seen dead; stop: seen in state T; fill: ENOSPC seen. */
  seen?: boolean;
  /** The process was gone before the signal reached it. */
  raced?: boolean;
  /** How long a stop lasted, in ms. */
  heldMs?: number;
  freeAfter?: number;
}

export interface NemesisOptions {
  staleMs: number;
  /** Mean pause between two actions, ms. */
  everyMs: number;
  /** Relative weights of kill, stop and fill. */
  weights: { kill: number; stop: number; fill: number };
  /** The static directory on the server and its builds: where commits in progress are watched for. */
  serverStatic: string;
  tags: string[];
  /** The share of commits seen in progress that are cut off (half by SIGKILL, half by SIGSTOP). */
  commitShare: number;
}

export class Nemesis {
  readonly actions: NemesisAction[] = [];
  private running = false;
  /** Processes that stop themselves at a step are continued until `end`, after the last operation. */
  private ended = false;
  private steps: Promise<void> | undefined;
  private readonly pending = new Set<Promise<void>>();
  private loop: Promise<void> | undefined;
  /** When it was made (performance.now): its actions are timed from here. */
  readonly t0 = performance.now();
  private readonly aimedAt = new Set<string>();

  constructor(
    private readonly rng: () => number,
    private readonly runner: OpRunner,
    private readonly disk: SmallDisk,
    private readonly o: NemesisOptions,
  ) {}

  private now(): number {
    return Math.round(performance.now() - this.t0);
  }

  /** Tags of holders it keeps stopped inside their sections: contenders there meet a lock to take over. */
  private stoppedTags(): string[] {
    return [...new Set(this.runner.procs().filter((p) => p.stoppedSince !== undefined && p.inSection).map((p) => p.op.tag))];
  }

  /**
   * Where a contender should go now, and from which client it should not come: the tags of holders
   * stopped inside their sections, and of stagers cut off inside their commit lately (the next
   * holder, from the other client, meets what they left).
   */
  targets(): { tag: string; client: string }[] {
    const stopped = this.runner.procs().filter((p) => p.stoppedSince !== undefined && (p.inSection || this.aimedAt.has(p.op.id)));
    const since = this.now() - this.o.staleMs - 4_000;
    const cut = this.actions.filter((a) => a.atCommit === true && a.atMs >= since && a.tag !== undefined && a.client !== undefined);
    return [...stopped.map((p) => ({ tag: p.op.tag, client: p.op.client.name })), ...cut.map((a) => ({ tag: a.tag!, client: a.client! }))];
  }

  /** Starts (again, after `end`). */
  start(): void {
    this.running = true;
    this.ended = false;
    this.loop = Promise.all([this.run(), this.watchCommits()]).then(() => undefined);
    this.steps = this.watchSteps();
  }

  /** Stops its blows; resolves once every process it stopped is continued and the disk is free. */
  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    while (this.pending.size > 0) await Promise.all([...this.pending]);
    if (this.disk.full) this.free();
  }

  /** After the last operation ended: no more processes to continue. */
  async end(): Promise<void> {
    await this.stop();
    this.ended = true;
    await this.steps;
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }

  /** Continues, after the stale threshold, those that stopped themselves at a protocol step. */
  private async watchSteps(): Promise<void> {
    while (!this.ended) {
      for (const p of this.runner.procs()) {
        if (p.stoppedSince === undefined && p.op.pauseAt !== undefined && procStat(p.pid)?.state === 'T' && isRunning(p.pid, p.start)) {
          this.spawn(this.hold(p, 'step-stop', true));
        }
      }
      await sleep(100);
    }
  }

  private spawn(p: Promise<void>): void {
    this.pending.add(p);
    void p.finally(() => this.pending.delete(p));
  }

  private pick<T>(xs: readonly T[]): T | undefined {
    return xs.length === 0 ? undefined : xs[Math.floor(this.rng() * xs.length)];
  }

  private async run(): Promise<void> {
    while (this.running) {
      await sleep(Math.round(this.o.everyMs * (0.25 + 1.5 * this.rng())));
      if (!this.running) break;
      const { kill, stop, fill } = this.o.weights;
      const r = this.rng() * (kill + stop + fill);
      if (r < kill) this.kill();
      else if (r < kill + stop) this.stopOne();
      else if (!this.disk.full) this.spawn(this.fillAndFree());
    }
  }

  /**
   * A commit is a few renames, over in milliseconds: random signals rarely land inside one. The
   * server shows when one is under way (`commit.json` in the holder's work directory, named by the
   * lock's `owner.json`, whose pid is the stager's), so some are cut off right there.
   */
  private async watchCommits(): Promise<void> {
    while (this.running) {
      await sleep(5);
      for (const tag of this.o.tags) {
        const stagers = this.candidates().filter((p) => p.op.tag === tag && (p.op.kind === 'stage' || p.op.kind === 'add') && !this.aimedAt.has(p.op.id));
        if (stagers.length === 0) continue;
        const lock = path.join(this.o.serverStatic, tag, 'devserver.lock');
        let pid: number | undefined;
        let committing = false;
        try {
          pid = (JSON.parse(fs.readFileSync(path.join(lock, 'owner.json'), 'utf8')) as { pid?: number }).pid;
          committing = fs.readdirSync(lock).some((n) => n.startsWith('work.') && fs.existsSync(path.join(lock, n, 'commit.json')));
        } catch {
          continue;
        }
        const p = stagers.find((s) => s.pid === pid);
        if (p === undefined || !committing) continue;
        this.aimedAt.add(p.op.id);
        if (this.rng() >= this.o.commitShare) continue;
        if (this.rng() < 0.5) this.kill(p, true);
        else this.spawn(this.hold(p, 'stop', false, true));
      }
    }
  }

  private candidates(): Proc[] {
    return this.runner.procs().filter((p) => p.stoppedSince === undefined && p.start !== '' && isRunning(p.pid, p.start));
  }

  private kill(target?: Proc, atCommit = false): void {
    const p = target ?? this.pick(this.candidates());
    if (p === undefined) return;
    const a: NemesisAction = { atMs: this.now(), action: 'kill', op: p.op.id, tag: p.op.tag, client: p.op.client.name, role: p.role, pid: p.pid, inSection: p.inSection, ...(atCommit ? { atCommit } : {}) };
    this.actions.push(a);
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      a.raced = true;
      return;
    }
    p.op.killedByNemesis = true;
    this.spawn(
      (async () => {
        for (let i = 0; i < 100 && isRunning(p.pid, p.start); i++) await sleep(50);
        a.seen = !isRunning(p.pid, p.start);
      })(),
    );
  }

  /**
   * Stops a process for longer than the stale threshold: mostly a holder inside its critical
   * section, or a contender for a lock whose holder is stopped now (it is judging that lock stale
   * and taking it over: a pause there resumes a takeover of a lock that someone else may hold by then).
   */
  private stopOne(): void {
    const all = this.candidates();
    const inside = all.filter((p) => p.inSection);
    const stopped = new Set(this.stoppedTags());
    const contenders = all.filter((p) => !p.inSection && p.role !== 'writer' && stopped.has(p.op.tag));
    const r = this.rng();
    const p = this.pick(r < 0.3 && contenders.length > 0 ? contenders : r < 0.85 && inside.length > 0 ? inside : all);
    if (p !== undefined) this.spawn(this.hold(p, 'stop', false));
  }

  private async hold(p: Proc, action: 'stop' | 'step-stop', stoppedItself: boolean, atCommit = false): Promise<void> {
    const a: NemesisAction = { atMs: this.now(), action, op: p.op.id, tag: p.op.tag, client: p.op.client.name, role: p.role, pid: p.pid, inSection: p.inSection, ...(atCommit ? { atCommit } : {}) };
    if (!p.inSection && this.stoppedTags().includes(p.op.tag)) a.contender = true;
    this.actions.push(a);
    const since = performance.now();
    p.stoppedSince = since;
    try {
      if (!stoppedItself) {
        try {
          process.kill(p.pid, 'SIGSTOP');
        } catch {
          a.raced = true;
          return;
        }
      }
      // A process inside a system call that cannot be interrupted (a FUSE request) stops when it returns.
      for (let i = 0; i < 100 && procStat(p.pid)?.state !== 'T' && isRunning(p.pid, p.start); i++) await sleep(20);
      a.seen = procStat(p.pid)?.state === 'T';
      if (!a.seen) a.raced = !isRunning(p.pid, p.start);
      await sleep(this.o.staleMs + 1_000 + Math.round(this.rng() * 2_500));
    } finally {
      if (isRunning(p.pid, p.start)) {
        try {
          process.kill(p.pid, 'SIGCONT');
        } catch {
          /* gone */
        }
      }
      a.heldMs = Math.round(performance.now() - since);
      p.op.stoppedMs += performance.now() - since;
      p.stoppedSince = undefined;
    }
  }

  private async fillAndFree(): Promise<void> {
    const a: NemesisAction = { atMs: this.now(), action: 'fill' };
    this.actions.push(a);
    const r = await this.disk.fill();
    a.seen = r.enospc;
    a.freeAfter = r.freeAfter;
    await sleep(1_000 + Math.round(this.rng() * 4_000));
    this.free();
  }

  private free(): void {
    this.disk.free();
    this.actions.push({ atMs: this.now(), action: 'free', freeAfter: this.disk.freeBytes() });
  }

  /** Counts for the report and the checks that the attacks happened. */
  summary(): Record<string, number> {
    const n = (f: (a: NemesisAction) => boolean): number => this.actions.filter(f).length;
    return {
      kills: n((a) => a.action === 'kill'),
      killsSeen: n((a) => a.action === 'kill' && a.seen === true),
      killsRaced: n((a) => a.action === 'kill' && a.raced === true),
      killsInSection: n((a) => a.action === 'kill' && a.inSection === true),
      stops: n((a) => a.action === 'stop'),
      stopsSeenT: n((a) => a.action === 'stop' && a.seen === true),
      stopsRaced: n((a) => a.action === 'stop' && a.raced === true),
      stopsInSection: n((a) => a.action === 'stop' && a.inSection === true && a.seen === true),
      stopsOfContenders: n((a) => a.action === 'stop' && a.contender === true && a.seen === true),
      cutInCommit: n((a) => a.atCommit === true && a.seen === true),
      stopsPastStale: n((a) => (a.action === 'stop' || a.action === 'step-stop') && a.seen === true && (a.heldMs ?? 0) > this.o.staleMs),
      stepStops: n((a) => a.action === 'step-stop' && a.seen === true),
      fills: n((a) => a.action === 'fill'),
      fillsEnospc: n((a) => a.action === 'fill' && a.seen === true),
      frees: n((a) => a.action === 'free'),
    };
  }
}
