/**
 * All five checks of a finished fault run, from what is on the server and what the operations
 * reported (check.ts holds the rules; this gathers what they are applied to).
 */
import * as fs from 'fs';
import * as path from 'path';
import { cli } from '../helpers';
import { inspectBuild } from './builds';
import {
  checkBuild,
  checkKept,
  checkSections,
  checkTokens,
  spanOfOp,
  tokensOfLog,
  type BuildFound,
  type RemovalSeen,
  type StagingPlan,
  type TokenSeen,
  type Violation,
} from './check';
import { readLog, type LogEntry } from './log';
import type { Op } from './ops';
import { isRunning, procStat } from './procs';
import type { FaultWorld } from './world';

export interface Verdicts {
  violations: Violation[];
  log: LogEntry[];
  builds: BuildFound[];
}

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

export async function judgeRun(world: FaultWorld, ops: readonly Op[], tags: readonly string[], before: readonly Violation[]): Promise<Verdicts> {
  const violations: Violation[] = [...before];

  // 1: sections, in the server's order of accepted writes.
  const log = readLog(world.serverLog);
  if (log.gaps.length > 0 || log.unreadable.length > 0) {
    violations.push({ check: 1, kind: 'log-damaged', detail: `the referee's log has gaps ${log.gaps.slice(0, 10).join(',')} and entries not its own ${log.unreadable.slice(0, 10).join(',')}` });
  }
  violations.push(...checkSections(log.entries));

  // 3: the builds.
  const stagings = ops.filter((op) => op.kind === 'stage' || op.kind === 'add');
  const plans = new Map<string, StagingPlan>(
    stagings.map((op) => [
      op.id,
      { op: op.id, kind: op.kind as StagingPlan['kind'], tag: op.tag, names: Object.keys(op.artifacts ?? {}), end: op.end, ...(op.code !== undefined ? { code: op.code } : {}), span: spanOfOp(op.lo, op.hi), startedMs: op.startedMs, endedMs: op.endedMs },
    ]),
  );
  const present = new Map<string, string[]>();
  const builds: BuildFound[] = [];
  for (const tag of tags) {
    const area = path.join(world.serverStatic, tag);
    if (!fs.existsSync(area)) continue;
    const b = await inspectBuild(area, tag, (t) => verifyOnServer(world.serverStatic, t));
    builds.push(b);
    violations.push(...checkBuild(b, plans));
    for (const f of b.files) if (f.op !== undefined) present.set(f.op, [...(present.get(f.op) ?? []), f.name]);
  }
  const removals: RemovalSeen[] = ops.filter(mayRemove).map((op) => ({ tag: op.tag, op: op.id, ...spanOfOp(op.lo, op.hi), startedMs: op.startedMs, endedMs: op.endedMs }));
  violations.push(...checkKept([...plans.values()], present, removals));

  // 2: tokens, from the log's begins, the stagings' summaries and, for a staging that said
  // nothing (it was killed after its commit), the manifest.
  const seen: TokenSeen[] = tokensOfLog(log.entries);
  const asSeen = (op: Op, fence: number): TokenSeen => ({ tag: op.tag, fence, instance: op.id, op: op.id, exact: false, ...spanOfOp(op.lo, op.hi) });
  for (const op of stagings) if (op.fence !== undefined) seen.push(asSeen(op, op.fence));
  for (const b of builds) {
    if (typeof b.manifest !== 'object') continue;
    for (const f of b.files) {
      const op = stagings.find((o) => o.id === f.op);
      const fence = b.manifest[f.name]?.fence;
      if (op !== undefined && op.fence === undefined && fence !== undefined && !seen.some((s) => s.instance === op.id)) seen.push(asSeen(op, fence));
    }
  }
  violations.push(...checkTokens(seen, removals));

  // 4: outside the static directory.
  violations.push(...world.outside());

  // 5: every command ended.
  for (const op of ops) if (op.end === 'hung') violations.push({ check: 5, kind: 'hang', detail: op.hang ?? op.id });
  for (const op of ops) {
    for (const p of op.procs) {
      if (isRunning(p.pid, p.start)) violations.push({ check: 5, kind: 'left-running', detail: `op ${op.id}'s ${p.role} (pid ${p.pid}, state ${procStat(p.pid)?.state}) still runs after the run` });
    }
  }
  return { violations, log: log.entries, builds };
}
