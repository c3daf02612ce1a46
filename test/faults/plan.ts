/**
 * What the fault checker does next, drawn from its seeded generator: which operation, on which
 * client and tag, waiting how long, with which critical section or artifacts. Contenders are sent
 * to the tags of holders the nemesis keeps stopped, with a wait long enough to take them over.
 */
import { artifactHeader } from './check';
import { newOp, type Client, type Op, type OpKind } from './ops';

export interface PlanOptions {
  clients: Client[];
  /** The builds; `parent` is the folder above them, locked now and then by sections only. */
  tags: string[];
  parent: string;
  staleMs: number;
  /** Named protocol steps to pause at (empty where the core names none). */
  steps: string[];
  /** Whether a tag's area exists now (on the server): a new build needs one that does not. */
  exists: (tag: string) => boolean;
}

const WEIGHTS: [OpKind, number][] = [
  ['hold', 22],
  ['lockcmd', 22],
  ['stage', 16],
  ['add', 16],
  ['destroy', 7],
  ['destroyw', 5],
  ['force', 12],
];

export class Planner {
  private n = 0;

  constructor(
    private readonly rng: () => number,
    private readonly o: PlanOptions,
  ) {}

  private pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.rng() * xs.length)];
  }

  private int(lo: number, hi: number): number {
    return lo + Math.floor(this.rng() * (hi - lo + 1));
  }

  private kind(): OpKind {
    let r = this.rng() * WEIGHTS.reduce((s, [, w]) => s + w, 0);
    for (const [k, w] of WEIGHTS) if ((r -= w) < 0) return k;
    return 'hold';
  }

  /**
   * The next operation. `targets` are tags where a holder is stopped inside its section or a
   * commit was cut off lately: a contender goes there, mostly from the other client.
   */
  next(targets: readonly { tag: string; client: string }[]): Op {
    const id = `o${++this.n}`;
    let kind = this.kind();
    // A new build needs a tag that is not there: take one, or make room for one.
    const absent = this.o.tags.filter((t) => !this.o.exists(t));
    if (kind === 'stage' && absent.length === 0) kind = this.rng() < 0.5 ? 'destroy' : 'destroyw';
    const sectionKind = kind === 'hold' || kind === 'lockcmd';
    const usable = targets.filter((t) => sectionKind || t.tag !== this.o.parent);
    const contend = usable.length > 0 && this.rng() < 0.6;
    const target = contend ? this.pick(usable) : undefined;
    let tag = target !== undefined ? target.tag : kind === 'stage' && this.rng() < 0.8 ? this.pick(absent) : this.pick(this.o.tags);
    if (!contend && sectionKind && this.rng() < 0.08) tag = this.o.parent;
    // Long enough to outlast a stopped holder's stale threshold and take the lock over.
    const waitS = contend ? Math.ceil(this.o.staleMs / 1000) + this.int(3, 6) : this.pick([0, 0, 1, 2, 4, 8]);
    const others = this.o.clients.filter((c) => c.name !== target?.client);
    const op = newOp(id, kind, target !== undefined && others.length > 0 && this.rng() < 0.8 ? this.pick(others) : this.pick(this.o.clients), tag, waitS);
    if (sectionKind || kind === 'destroyw') {
      const writes = kind === 'destroyw' ? 0 : this.int(0, 3);
      op.section = { op: id, tag, writes, gapsMs: Array.from({ length: writes + 1 }, () => this.int(0, 400)), ...(kind === 'destroyw' ? { destroy: true } : {}) };
    }
    // Several entries at the top, so that a commit is several renames that can be cut off between.
    if (kind === 'stage') {
      op.artifacts = { 'image.bin': this.int(1, 256) * 1024, 'kernel.bin': this.int(1, 64) * 1024, 'rootfs/part.bin': this.int(1, 128) * 1024 };
      for (let i = 0; i < 30; i++) op.artifacts[`part${i}.bin`] = this.int(1, 4) * 1024;
    }
    if (kind === 'add') {
      op.artifacts = { [`extra/${id}.bin`]: this.int(1, 32) * 1024 };
      for (let i = 0; i < 8; i++) op.artifacts[`add-${id}-${i}.bin`] = this.int(1, 16) * 1024;
    }
    if (kind === 'destroy') op.force = this.rng() < 0.3;
    if (this.o.steps.length > 0 && this.rng() < 0.15) op.pauseAt = `${this.pick(this.o.steps)}#${this.int(1, 2)}`;
    return op;
  }
}

/** An artifact's bytes: its header (which staging, which name), then a pattern naming both, to `size`. */
export function artifactContent(op: Op, name: string, size: number): Buffer {
  const head = Buffer.from(artifactHeader(op.id, name));
  const unit = Buffer.from(`${op.id}:${name};`);
  const out = Buffer.alloc(Math.max(size, head.length));
  head.copy(out);
  for (let i = head.length; i < out.length; i += unit.length) unit.copy(out, i, 0, Math.min(unit.length, out.length - i));
  return out;
}
