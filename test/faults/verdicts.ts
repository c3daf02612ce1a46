/**
 * The five checks of a fault run, from what is on the server and what the operations reported
 * (check.ts holds the rules; this gathers what they are applied to). Builds are looked at all
 * along, whenever one is free and whole by the protocol's account (a build destroyed a minute
 * later would otherwise never be seen), and in checkpoints: after each stretch of faults, once
 * every operation has ended and the next holder on each client has taken and released each area,
 * with `devserver-stage verify` and the stagings' ends. The log, the tokens, the outside and the
 * ends of commands are judged once, at the end.
 */
import * as fs from 'fs';
import * as path from 'path';
import { acquire } from '../../src/core/lock/lock';
import { cli } from '../helpers';
import { inspectBuild, quietState } from './builds';
import { checkBuild, checkKept, checkSections, checkTokens, spanOfOp, tokensOfLog, type RemovalSeen, type StagingPlan, type TokenSeen, type Violation } from './check';
import { readLog } from './log';
import type { Op } from './ops';
import { isRunning, procStat } from './procs';
import { STATIC, type FaultWorld } from './world';

/** What `devserver-stage verify` says of a build, run on the server's own path. */
async function verifyOnServer(serverStatic: string, tag: string): Promise<{ ok: boolean; problems: string[] }> {
  // Through a client, what another client changed last may not show for up to 20 s (sshfs's
  // directory cache, see the README on mount options): verify would call it missing.
  const r = await cli(serverStatic, ['--json', 'verify', tag]);
  try {
    const j = JSON.parse(r.stdout) as { ok: boolean; problems: unknown[] };
    return { ok: r.code === 0 && j.ok, problems: j.problems.map((p) => JSON.stringify(p)) };
  } catch {
    return { ok: false, problems: [`exit ${r.code}: ${r.stderr.trim().slice(0, 300)}`] };
  }
}

/** Something that may remove a build: a destroy, or a new-build staging that failed (it removes the area it made). */
const mayRemove = (op: Op): boolean => op.kind === 'destroy' || op.kind === 'destroyw' || (op.kind === 'stage' && op.end !== 'ok');

const isStaging = (op: Op): boolean => op.kind === 'stage' || op.kind === 'add';

function planOf(op: Op): StagingPlan {
  return { op: op.id, kind: op.kind as StagingPlan['kind'], tag: op.tag, names: Object.keys(op.artifacts ?? {}), end: op.end, ...(op.code !== undefined ? { code: op.code } : {}), span: spanOfOp(op.lo, op.hi), startedMs: op.startedMs, endedMs: op.endedMs };
}

export interface Timing {
  staleMs: number;
  refreshMs: number;
}

/** Judges the builds while nothing runs. Violations seen at an earlier checkpoint are not repeated. */
export class Checkpoints {
  readonly violations: Violation[] = [];
  /** The fence each staging's artifacts carry in a manifest, where one was seen. */
  private readonly manifestFences = new Map<string, number>();
  private readonly said = new Set<string>();
  private judged = 0;
  private taken = 0;

  constructor(
    private readonly world: FaultWorld,
    private readonly tags: readonly string[],
    private readonly parent: string,
    private readonly timing: Timing,
  ) {}

  private add(vs: readonly Violation[]): void {
    for (const v of vs) {
      const key = `${v.check} ${v.kind} ${v.detail}`;
      if (this.said.has(key)) continue;
      this.said.add(key);
      this.violations.push(v);
    }
  }

  get count(): number {
    return this.taken;
  }

  private sampled = 0;

  /** How many times a free build was read whole while operations ran. */
  get samples(): number {
    return this.sampled;
  }

  /** Reads each free build as it is now, while operations run (see quietState). */
  async sample(ops: readonly Op[]): Promise<void> {
    const plans = new Map(ops.filter(isStaging).map((op) => [op.id, planOf(op)]));
    for (const tag of this.tags) {
      const area = path.join(this.world.serverStatic, tag);
      const before = quietState(area);
      if (before === undefined) continue;
      // Something that moves while it is read is read again next time.
      const b = await inspectBuild(area, tag).catch(() => undefined);
      if (b === undefined || quietState(area) !== before) continue;
      this.sampled++;
      this.add(checkBuild(b, plans));
    }
  }

  /** `ops`: every operation so far, all ended. */
  async take(ops: readonly Op[]): Promise<void> {
    this.taken++;
    const w = this.world;
    // The next holder on each client takes and releases each area, undoing what was cut off.
    for (const c of w.clients) {
      for (const tag of [...this.tags, this.parent]) {
        if (!fs.existsSync(path.join(w.serverStatic, tag))) continue;
        try {
          const lease = await acquire(path.join(c.mount, STATIC), tag, { createOnce: false, waitMs: 60_000, ...this.timing });
          await lease.release();
        } catch (err) {
          const e = err as { code?: string; message?: string };
          this.add([{ check: 3, kind: 'next-holder-refused', detail: `${tag}: a holder through client ${c.name} could not take and release it: ${e.code}: ${e.message}` }]);
        }
      }
    }
    const plans = new Map(ops.filter(isStaging).map((op) => [op.id, planOf(op)]));
    const present = new Map<string, string[]>();
    for (const tag of this.tags) {
      const area = path.join(w.serverStatic, tag);
      if (!fs.existsSync(area)) continue;
      const b = await inspectBuild(area, tag, (t) => verifyOnServer(w.serverStatic, t));
      this.add(checkBuild(b, plans));
      for (const f of b.files) {
        if (f.op === undefined) continue;
        present.set(f.op, [...(present.get(f.op) ?? []), f.name]);
        const fence = typeof b.manifest === 'object' ? b.manifest[f.name]?.fence : undefined;
        if (fence !== undefined) this.manifestFences.set(f.op, fence);
      }
    }
    // What ended since the last checkpoint must be there (or not) now; later it may be destroyed.
    const removals = ops.filter(mayRemove).map((op): RemovalSeen => ({ tag: op.tag, op: op.id, ...spanOfOp(op.lo, op.hi), startedMs: op.startedMs, endedMs: op.endedMs }));
    this.add(checkKept([...plans.values()].slice(this.judged), present, removals));
    this.judged = plans.size;
  }

  /** Checks 1, 2, 4 and 5, after the last checkpoint; then every violation of the run. */
  finish(ops: readonly Op[]): { violations: Violation[]; logEntries: number } {
    const w = this.world;
    const log = readLog(w.serverLog);
    const out: Violation[] = [];
    if (log.gaps.length > 0 || log.unreadable.length > 0) {
      out.push({ check: 1, kind: 'log-damaged', detail: `the referee's log has gaps ${log.gaps.slice(0, 10).join(',')} and entries not its own ${log.unreadable.slice(0, 10).join(',')}` });
    }
    out.push(...checkSections(log.entries));

    // Tokens: the log's begins, the stagings' summaries and, for a staging that said nothing (it
    // was killed after its commit), the manifest.
    const seen: TokenSeen[] = tokensOfLog(log.entries);
    for (const op of ops.filter(isStaging)) {
      const fence = op.fence ?? this.manifestFences.get(op.id);
      if (fence !== undefined) seen.push({ tag: op.tag, fence, instance: op.id, op: op.id, exact: false, ...spanOfOp(op.lo, op.hi) });
    }
    const removals = ops.filter(mayRemove).map((op) => ({ tag: op.tag, op: op.id, ...spanOfOp(op.lo, op.hi) }));
    out.push(...checkTokens(seen, removals));

    out.push(...w.outside());

    for (const op of ops) if (op.end === 'hung') out.push({ check: 5, kind: 'hang', detail: op.hang ?? op.id });
    for (const op of ops) {
      for (const p of op.procs) {
        if (isRunning(p.pid, p.start)) out.push({ check: 5, kind: 'left-running', detail: `op ${op.id}'s ${p.role} (pid ${p.pid}, state ${procStat(p.pid)?.state}) still runs after the run` });
      }
    }
    this.add(out);
    return { violations: this.violations, logEntries: log.entries.length };
  }
}
