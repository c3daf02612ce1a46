/**
 * What a fault run prints: the seed, the operations per kind and how each ended, the fenced log,
 * the nemesis's actions, client crashes, and each violation with the operations it names (their
 * client, tag, wait, place in the log, times, ending, token, entries, and what the nemesis did to
 * them): enough to find the same moments when the seed is replayed. The whole record can be
 * written as JSON too.
 */
import * as fs from 'fs';
import type { Violation } from './check';
import type { NemesisAction } from './nemesis';
import { OP_KINDS, type Op } from './ops';
import type { Crash } from './world';

export interface RunRecord {
  seed: number;
  ops: readonly Op[];
  /** When the faults began (performance.now), and how long they lasted. */
  t0: number;
  faultsMs: number;
  /** How many times the builds were looked at: in checkpoints, and free ones while operations ran. */
  checkpoints: number;
  samples: number;
  logEntries: number;
  nemesis: { actions: readonly NemesisAction[]; summary: Record<string, number> };
  crashes: readonly Crash[];
  violations: readonly Violation[];
}

/** Violations counted by check and kind, as `check 2 token-repeated: 3`. */
export function violationCounts(violations: readonly Violation[]): string[] {
  const m = new Map<string, number>();
  for (const v of violations) m.set(`check ${v.check} ${v.kind}`, (m.get(`check ${v.check} ${v.kind}`) ?? 0) + 1);
  return [...m].sort(([a], [b]) => a.localeCompare(b)).map(([k, n]) => `${k}: ${n}`);
}

function describeOp(r: RunRecord, id: string): string {
  const op = r.ops.find((o) => o.id === id);
  if (op === undefined) return id;
  const acts = r.nemesis.actions
    .filter((a) => a.op === id)
    .map((a) => `${a.action}${a.role !== undefined ? ` ${a.role}` : ''}${a.inSection === true ? ' in section' : ''}${a.atCommit === true ? ' in commit' : ''} at ${a.atMs} ms${a.heldMs !== undefined ? ` for ${a.heldMs} ms` : ''}`);
  const ms = (t: number): number => Math.round(t - r.t0);
  return (
    `${id}: ${op.kind} ${op.tag} on client ${op.client.name}, wait ${op.waitS} s, log ${op.lo}..${op.hi}, ${ms(op.startedMs)}..${ms(op.endedMs)} ms, ${op.end}` +
    `${op.code !== undefined ? ` ${op.code}` : ''}, fence ${op.fence ?? '-'}, entries accepted/refused/failed ${op.accepted}/${op.refused}/${op.failed}${acts.length > 0 ? `; nemesis: ${acts.join(', ')}` : ''}`
  );
}

/**
 * Holders that lost their lock though the nemesis never stopped them and no force-release or
 * `destroy --force` of the tag ran meanwhile: live locks taken from them (or heartbeats late on a busy
 * machine, which is why this is a figure and not a violation).
 */
export function unexplainedLosses(r: RunRecord): Op[] {
  const stopped = new Set(r.nemesis.actions.filter((a) => a.action === 'stop' || a.action === 'step-stop').map((a) => a.op));
  return r.ops.filter(
    (o) =>
      (o.lost || o.code === 'ECOMPROMISED') &&
      !stopped.has(o.id) &&
      !r.ops.some((x) => (x.kind === 'force' || (x.kind === 'destroy' && x.force === true)) && x.tag === o.tag && x.startedMs < o.endedMs && x.endedMs > o.startedMs),
  );
}

/** The report's lines. */
export function reportLines(r: RunRecord, shownPerKind = 5): string[] {
  const out: string[] = [];
  const first = r.ops.filter((o) => o.id.startsWith('w')).length;
  out.push(`${r.ops.length} operations (${first} of them a first round, unharmed), ${Math.round(r.faultsMs / 1000)} s of faults, ${r.checkpoints} checkpoints of the builds and ${r.samples} looks at free builds meanwhile:`);
  for (const kind of OP_KINDS) {
    const list = r.ops.filter((o) => o.kind === kind);
    const codes = new Map<string, number>();
    for (const o of list.filter((x) => x.end === 'failed')) codes.set(o.code ?? `exit ${o.exitCode}`, (codes.get(o.code ?? `exit ${o.exitCode}`) ?? 0) + 1);
    const n = (end: Op['end']): number => list.filter((o) => o.end === end).length;
    out.push(`  ${kind}: ${list.length} (ok ${n('ok')}, failed ${n('failed')}${codes.size > 0 ? ` [${[...codes].map(([c, k]) => `${c} ${k}`).join(', ')}]` : ''}, killed ${n('killed')}, hung ${n('hung')})`);
  }
  const sum = (f: (o: Op) => number): number => r.ops.reduce((s, o) => s + f(o), 0);
  const fullDisk = r.ops.filter((o) => o.code === 'ETOOBIG' || /ENOSPC|no space|is full/i.test(o.stderr)).length;
  out.push(
    `  fenced log: ${r.logEntries} entries accepted; writes the fence refused ${sum((o) => o.refused)}, that failed otherwise ${sum((o) => o.failed)}; ` +
      `holders told they lost the lock ${r.ops.filter((o) => o.lost).length}; operations that met the full disk ${fullDisk}`,
  );
  const losses = unexplainedLosses(r);
  if (losses.length > 0) out.push(`  holders that lost their lock unstopped, with no force-release or destroy --force of the tag meanwhile: ${losses.length} (${losses.slice(0, 10).map((o) => o.id).join(', ')})`);
  out.push(`  nemesis: ${Object.entries(r.nemesis.summary).map(([k, v]) => `${k} ${v}`).join(', ')}`);
  if (r.crashes.length > 0) out.push(`  sshfs clients that crashed and were mounted again: ${r.crashes.map((c) => `${c.client} at ${c.atMs} ms (${c.what})`).join('; ')}`);
  out.push(`  violations: ${r.violations.length}${r.violations.length > 0 ? ` (${violationCounts(r.violations).join('; ')})` : ''}`);
  const shown = new Map<string, number>();
  for (const v of r.violations) {
    const key = `${v.check} ${v.kind}`;
    shown.set(key, (shown.get(key) ?? 0) + 1);
    if (shown.get(key)! > shownPerKind) continue;
    out.push(`  [check ${v.check} ${v.kind}] ${v.detail.split('\n').join('\n        ')}`);
    for (const id of new Set(v.detail.match(/\b[ow]\d+\b/g) ?? [])) out.push(`      ${describeOp(r, id)}`);
  }
  return out;
}

/** The whole record as JSON, for a closer look or a replay. */
export function writeRecord(file: string, r: RunRecord, extra: Record<string, unknown>): void {
  const ms = (t: number): number => Math.round(t - r.t0);
  const ops = r.ops.map((o) => ({ ...o, client: o.client.name, procs: o.procs.map((p) => ({ pid: p.pid, role: p.role })), startedMs: ms(o.startedMs), endedMs: ms(o.endedMs), }));
  fs.writeFileSync(file, JSON.stringify({ ...extra, seed: r.seed, violations: r.violations, crashes: r.crashes, nemesis: r.nemesis.actions, ops }, null, 1));
}
