/**
 * The fault checker's verdicts, as pure functions of what the run recorded: the fenced log (the
 * server's order of accepted writes, log.ts), what each operation reported, and the builds found on
 * the server at the end. test/unit/lock/faults.test.ts says what each check means; its first suite feeds
 * these functions made-up runs to show that each one fires.
 *
 * Time is never read from a clock here. A moment is placed by the log: an entry at number `p`
 * happened at `p`; an operation that started when the log held `lo` entries and ended when it held
 * `hi` acted somewhere in the open span (lo, hi + 1). "A may have come before B" is then
 * `A.min < B.max`, which is what the server's order allows and no more.
 */
import type { LogEntry } from './log';

export interface Violation {
  /** Which check: 1 sections, 2 tokens, 3 builds, 4 outside, 5 every command ended; 0: an operation failed alone, unharmed. */
  check: 0 | 1 | 2 | 3 | 4 | 5;
  kind: string;
  detail: string;
}

/** Where in the server's order something happened: an entry (min = max = its number) or a span. */
export interface Span {
  min: number;
  max: number;
}

export const spanOfEntry = (at: number): Span => ({ min: at, max: at });
export const spanOfOp = (lo: number, hi: number): Span => ({ min: lo, max: hi + 1 });

const mayPrecede = (a: Span, b: Span): boolean => a.min < b.max;
/** Whether d may have happened after a and before b. */
const mayBeBetween = (a: Span, d: Span, b: Span): boolean => a.min < d.max && d.min < b.max && a.min < b.max;

/** Holding an area covers everything below it: these two tags' sections must not overlap. */
export function tagsConflict(a: string, b: string): boolean {
  return a === b || a.startsWith(`${b}/`) || b.startsWith(`${a}/`);
}

// ---------------------------------------------------------------------------------------------
// 1. Critical sections never overlap.

/**
 * Each lock instance's accepted entries must form one unbroken run among the entries of every tag
 * it conflicts with: an entry of another instance between a holder's first and last accepted entry
 * means both wrote while each believed it held the lock, and the server accepted both.
 */
export function checkSections(entries: readonly LogEntry[]): Violation[] {
  const first = new Map<string, LogEntry>();
  const last = new Map<string, LogEntry>();
  for (const e of entries) {
    if (!first.has(e.token)) first.set(e.token, e);
    last.set(e.token, e);
  }
  const out: Violation[] = [];
  const reported = new Set<string>();
  const open = new Map<string, LogEntry>(); // token -> its first entry, while its run lasts
  for (const e of entries) {
    if (first.get(e.token) === e && last.get(e.token) !== e) open.set(e.token, e);
    for (const [token, begin] of open) {
      if (token === e.token || !tagsConflict(begin.tag, e.tag)) continue;
      const end = last.get(token)!;
      if (!(begin.at < e.at && e.at < end.at)) continue;
      const key = `${token} ${e.token}`;
      if (reported.has(key)) continue;
      reported.add(key);
      out.push({
        check: 1,
        kind: 'sections-overlap',
        detail:
          `${begin.tag}: op ${begin.op} (token ${token}, fence ${begin.fence}) wrote entries ${begin.at}..${end.at}, ` +
          `and op ${e.op} (token ${e.token}, fence ${e.fence}) had its ${e.kind} #${e.seq} on ${e.tag} accepted at ${e.at} in between`,
      });
    }
    if (last.get(e.token) === e) open.delete(e.token);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// 2. Fencing tokens only grow, and none is handed out twice.

/** One lock instance and the token it was handed, placed in the server's order. */
export interface TokenSeen extends Span {
  tag: string;
  fence: number;
  /** The lock instance (a holder token), or the operation that held it where only that is known. */
  instance: string;
  op: string;
  /** Whether `min` is exactly when the section began (a log entry), not a span around it. */
  exact: boolean;
}

/** Something that may have removed an area (and with it, today, its count), placed in the server's order. */
export interface DestroySeen extends Span {
  tag: string;
  op: string;
}

/** The begins of sections in the log, as tokens seen. */
export function tokensOfLog(entries: readonly LogEntry[]): TokenSeen[] {
  return entries
    .filter((e) => e.kind === 'begin' || e.kind === 'destroy')
    .map((e) => ({ tag: e.tag, fence: e.fence, instance: e.token, op: e.op, exact: true, ...spanOfEntry(e.at) }));
}

export function checkTokens(seen: readonly TokenSeen[], destroys: readonly DestroySeen[]): Violation[] {
  const out: Violation[] = [];
  const byTag = new Map<string, TokenSeen[]>();
  for (const s of seen) byTag.set(s.tag, [...(byTag.get(s.tag) ?? []), s]);
  const destroyBetween = (tag: string, a: Span, b: Span): DestroySeen | undefined => destroys.find((d) => d.tag === tag && mayBeBetween(a, d, b));
  const describe = (s: TokenSeen): string => `op ${s.op} (${s.instance === s.op ? 'its lock' : `token ${s.instance}`}, fence ${s.fence}, ${s.exact ? `log entry ${s.min}` : `log span ${s.min}..${s.max - 1}`})`;
  const verdict = (tag: string, a: TokenSeen, b: TokenSeen, what: string): void => {
    const d = destroyBetween(tag, a, b);
    out.push(
      d === undefined
        ? { check: 2, kind: what, detail: `${tag}: ${describe(a)} then ${describe(b)}, with no destroy of ${tag} possible in between` }
        : { check: 2, kind: `${what}-after-destroy`, detail: `${tag}: ${describe(a)} then ${describe(b)}; op ${d.op} may have destroyed ${tag} in between (log span ${d.min}..${d.max - 1})` },
    );
  };
  for (const [tag, list] of byTag) {
    // Growth in the order sections began: consecutive exact begins, and every span against the
    // exact begins surely before and after it.
    const exact = list.filter((s) => s.exact).sort((x, y) => x.min - y.min);
    for (let i = 1; i < exact.length; i++) {
      if (exact[i].fence <= exact[i - 1].fence) verdict(tag, exact[i - 1], exact[i], 'token-not-growing');
    }
    for (const s of list.filter((x) => !x.exact)) {
      const before = exact.filter((x) => !mayPrecede(s, x)).at(-1);
      const after = exact.find((x) => !mayPrecede(x, s));
      if (before !== undefined && before.fence >= s.fence) verdict(tag, before, s, 'token-not-growing');
      if (after !== undefined && after.fence <= s.fence) verdict(tag, s, after, 'token-not-growing');
    }
    // Never twice: per token, every two lock instances.
    const byFence = new Map<number, TokenSeen[]>();
    for (const s of list) byFence.set(s.fence, [...(byFence.get(s.fence) ?? []), s]);
    for (const same of byFence.values()) {
      const instances = [...new Map(same.map((s) => [s.instance, s])).values()].sort((x, y) => x.min - y.min);
      for (let i = 1; i < instances.length; i++) verdict(tag, instances[i - 1], instances[i], 'token-repeated');
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// 3. Every build is whole stagings: one base staging at most, each staging all there or not at all.

export interface StagingPlan {
  op: string;
  kind: 'stage' | 'add';
  tag: string;
  /** The artifacts it brings, relative to the area. */
  names: string[];
  /** How it ended: exit 0, another exit, killed by the nemesis, or not at all. */
  end: 'ok' | 'failed' | 'killed' | 'hung';
  /** The error code it reported, where it failed. */
  code?: string;
  span: Span;
  startedMs: number;
  endedMs: number;
}

/** An artifact found on the server, and what its first line says. */
export interface FileFound {
  name: string;
  /** The staging that wrote it and the name it gave it, from the file's own first line. */
  op?: string;
  namedAs?: string;
}

/** What the manifest says of an artifact. */
export interface ManifestSays {
  source: string;
  fence?: number;
}

export interface BuildFound {
  tag: string;
  files: FileFound[];
  /** Undefined when there is no manifest; a string when it could not be read. */
  manifest?: Record<string, ManifestSays> | string;
  /** What an independent check of the manifest against the files found (hashes, names). */
  manifestProblems: string[];
  /** What `devserver-stage verify` said, where it was asked. */
  verify?: { ok: boolean; problems: string[] };
}

/** The first line of every artifact the run stages: which staging wrote it, under which name. */
export const artifactHeader = (op: string, name: string): string => `dss-fault ${op} ${name}\n`;

export function parseHeader(firstLine: string): { op: string; name: string } | undefined {
  const m = /^dss-fault (\S+) (\S+)$/.exec(firstLine);
  return m === null ? undefined : { op: m[1], name: m[2] };
}

/** The staging's own directory name in its sources, which the manifest records as the source. */
export const sourceDirName = (op: string): string => `src-${op}`;

export function checkBuild(build: BuildFound, plans: ReadonlyMap<string, StagingPlan>): Violation[] {
  const out: Violation[] = [];
  const v = (kind: string, detail: string): void => void out.push({ check: 3, kind, detail: `${build.tag}: ${detail}` });
  const byOp = new Map<string, string[]>();
  for (const f of build.files) {
    if (f.op === undefined || !plans.has(f.op)) {
      v('foreign-file', `${f.name} was written by no staging of this run`);
      continue;
    }
    if (f.namedAs !== f.name) v('misplaced-file', `${f.name} holds staging ${f.op}'s ${f.namedAs}`);
    if (plans.get(f.op)!.tag !== build.tag) v('misplaced-file', `${f.name} is staging ${f.op}'s, which staged into ${plans.get(f.op)!.tag}`);
    byOp.set(f.op, [...(byOp.get(f.op) ?? []), f.name]);
  }
  for (const [op, names] of byOp) {
    const plan = plans.get(op)!;
    const missing = plan.names.filter((n) => !names.includes(n));
    // How it ended is shown with the operation (it may not have ended yet when a free build is read).
    if (missing.length > 0) v('partial-staging', `staging ${op} (${plan.kind}) left ${names.join(', ')} without ${missing.join(', ')}`);
  }
  const bases = [...byOp.keys()].filter((op) => plans.get(op)!.kind === 'stage');
  if (bases.length > 1) v('mixed-build', `artifacts of ${bases.length} new-build stagings in one build: ${bases.map((op) => `${op} (${byOp.get(op)!.join(', ')})`).join('; ')}`);
  if (typeof build.manifest === 'string') {
    v('manifest-unreadable', build.manifest);
  } else if (build.manifest === undefined) {
    if (build.files.length > 0) v('manifest-missing', `${build.files.length} artifacts and no manifest`);
  } else {
    for (const p of build.manifestProblems) v('manifest-disagrees', p);
    const fences = new Map<string, Set<number | undefined>>();
    for (const f of build.files) {
      const said = build.manifest[f.name];
      if (said === undefined || f.op === undefined) continue;
      if (!said.source.includes(`/${sourceDirName(f.op)}/`)) v('manifest-other-staging', `${f.name} holds staging ${f.op}'s bytes; the manifest says it came from ${said.source}`);
      fences.set(f.op, (fences.get(f.op) ?? new Set()).add(said.fence));
    }
    for (const [op, set] of fences) if (set.size > 1) v('fence-split', `staging ${op}'s artifacts are recorded under fences ${[...set].join(', ')}`);
    const base = bases.length === 1 ? [...(fences.get(bases[0]) ?? [])][0] : undefined;
    for (const [op, set] of fences) {
      const f = [...set][0];
      if (plans.get(op)!.kind === 'add' && base !== undefined && f !== undefined && f <= base) {
        out.push({ check: 2, kind: 'token-not-growing', detail: `${build.tag}: staging ${op} added under fence ${f} to a build staged under fence ${base}` });
      }
    }
  }
  const clean = build.manifestProblems.length === 0 && typeof build.manifest !== 'string';
  if (build.verify !== undefined && build.verify.ok !== clean) {
    v('verify-disagrees', `devserver-stage verify says ${build.verify.ok ? 'intact' : `damaged (${build.verify.problems.slice(0, 3).join('; ')})`}, the checker ${clean ? 'found it intact' : `found ${build.manifestProblems.slice(0, 3).join('; ')}`}`);
  }
  return out;
}

/** Something that may remove a build: a destroy, or a new-build staging that failed (it removes the area it created). */
export interface RemovalSeen extends DestroySeen {
  startedMs: number;
  endedMs: number;
}

/**
 * A staging that succeeded is there at the end unless something may have removed it afterwards;
 * one that failed (it was not killed) kept nothing. `present` maps a staging to the names of it found.
 */
export function checkKept(plans: readonly StagingPlan[], present: ReadonlyMap<string, readonly string[]>, removals: readonly RemovalSeen[]): Violation[] {
  const out: Violation[] = [];
  for (const p of plans) {
    const found = present.get(p.op) ?? [];
    if (p.end === 'ok' && found.length === 0) {
      // A removal may have followed the commit only if it ended after the staging started, in the
      // order this process saw them, and after it in the server's order.
      const after = removals.find((r) => r.tag === p.tag && r.op !== p.op && r.endedMs > p.startedMs && mayPrecede(p.span, r));
      if (after === undefined) out.push({ check: 3, kind: 'staging-lost', detail: `${p.tag}: staging ${p.op} (${p.kind}) succeeded, and nothing that could remove it ran after it; none of ${p.names.join(', ')} is there` });
    }
    if (p.end === 'failed' && found.length > 0) {
      out.push({ check: 3, kind: 'failed-staging-kept', detail: `${p.tag}: staging ${p.op} (${p.kind}) failed (${p.code ?? 'no code'}), yet ${found.join(', ')} of it are in the build` });
    }
  }
  return out;
}
