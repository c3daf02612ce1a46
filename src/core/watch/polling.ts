/**
 * When the model polls: the static directories on filesystems that send no events for other
 * machines' changes (or all of them, on the user's word), fast while something changed lately,
 * less when idle, never while nobody looks. Each round is handed back to the model to run.
 */
import { isLocalFilesystem } from '../fs/io';

/**
 * Polling a static directory on a network filesystem, which sends no events for what other
 * machines do: often while something changed lately (a staging, a queue moving), less when idle,
 * so that a lock taken on another host shows within about two seconds either way.
 */
export const POLL_FAST_MS = 750;
export const POLL_IDLE_MS = 1_500;
/** How long after the last change polling stays fast. */
const RECENT_MS = 30_000;

export class Polling {
  private pollTimer: NodeJS.Timeout | undefined;
  /** Set by the user (`pollSeconds`): poll every root this often, whatever its filesystem. */
  private pollOverrideMs = 0;
  /** Roots on filesystems that send no events for other machines' changes. */
  private readonly networkRoots = new Set<string>();
  /** Whether anyone looks: a hidden view needs no polling. */
  private visible = true;
  private lastChangeAt = 0;
  private disposed = false;

  /** `roots`: the static directories followed now; `pollOnce`: one round over those given. */
  constructor(
    private readonly roots: () => readonly string[],
    private readonly pollOnce: (roots: readonly string[]) => void,
  ) {}

  /** Finds out which of the static directories are on a network filesystem. */
  classify(staticDirs: readonly string[]): void {
    for (const d of staticDirs) {
      void isLocalFilesystem(d).then((local) => {
        if (this.disposed || !this.roots().includes(d)) return;
        if (local) this.networkRoots.delete(d);
        else this.networkRoots.add(d);
        this.schedule();
      });
    }
  }

  /**
   * Lists every listed directory again every `ms`, whatever the filesystem (0: only where it
   * sends no events, on its own schedule). Only what changed is reported, as for events.
   */
  setPolling(ms: number): void {
    this.pollOverrideMs = ms;
    this.schedule();
  }

  /** Whether anyone looks at what is known: polling stops while nobody does. */
  setVisible(visible: boolean): void {
    if (this.visible === visible) return;
    this.visible = visible;
    this.schedule();
  }

  /** How polling goes now: which roots, how often (0: not at all). */
  get polling(): { roots: string[]; intervalMs: number } {
    const all = this.roots();
    if (this.pollOverrideMs > 0) return { roots: [...all], intervalMs: this.pollOverrideMs };
    const roots = all.filter((d) => this.networkRoots.has(d));
    if (!this.visible || roots.length === 0) return { roots: [], intervalMs: 0 };
    return { roots, intervalMs: Date.now() - this.lastChangeAt < RECENT_MS ? POLL_FAST_MS : POLL_IDLE_MS };
  }

  private schedule(): void {
    clearTimeout(this.pollTimer);
    this.pollTimer = undefined;
    if (this.disposed) return;
    const { roots, intervalMs } = this.polling;
    if (intervalMs === 0) return;
    this.pollTimer = setTimeout(() => {
      this.pollOnce(roots);
      this.schedule();
    }, intervalMs);
  }

  /** Something changed: poll fast for a while (the next poll picks the shorter interval). */
  changed(): void {
    if (Date.now() - this.lastChangeAt >= RECENT_MS && this.pollTimer !== undefined) {
      this.lastChangeAt = Date.now();
      this.schedule();
    }
    this.lastChangeAt = Date.now();
  }

  dispose(): void {
    this.disposed = true;
    clearTimeout(this.pollTimer);
  }
}
