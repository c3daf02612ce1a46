/**
 * Locks this window holds: taken on request, refreshed by the core while the window lives,
 * released when the user says so or the window closes. A lost lock is reported to the user.
 */
import * as os from 'os';
import * as vscode from 'vscode';
import type { Configuration } from './config';
import { acquire, explainLoss, keyOf, lossWords, type AreaRef, type Lease, type OnQueue } from '../core';
import { errorMessage } from './errors';
import type { Log } from './log';
import type { Losses } from './model/losses';
import type { InLine } from './model/mine';

/** "Until it is free": a day, which no wait in an editor outlasts. */
const WAIT_FOREVER_MS = 24 * 3600_000;

export class WindowLocks implements vscode.Disposable {
  private readonly leases = new Map<string, { lease: Lease; since: number }>();
  /** Waits in a queue this window is in: the window closing gives each place up. */
  private readonly waits = new Set<AbortController>();
  /** This window's place in the line of each area it waits for, once it has one. */
  private readonly places = new Map<string, InLine>();
  private readonly _onDidChange = new vscode.EventEmitter<AreaRef>();
  /** Fires with the area whose lease or place in line this window took, let go or lost. */
  readonly onDidChange = this._onDidChange.event;
  /** How this window names itself to other holders and in the audit log. */
  readonly clientId = `vscode:${os.hostname()}:${vscode.env.sessionId.slice(0, 8)}:${process.pid}`;

  constructor(
    /** The settings: each lock is taken with the timing in force when it is taken. */
    private readonly config: Pick<Configuration, 'current'>,
    private readonly log: Log,
    /** Where a lock this window lost goes, with who broke it, for the view to tell. */
    private readonly losses: Pick<Losses, 'add'>,
  ) {}

  has(staticDir: string, tag: string): boolean {
    return this.leases.has(keyOf(staticDir, tag));
  }

  /** This window's lease on an area, if it holds one. */
  lease(staticDir: string, tag: string): Lease | undefined {
    return this.leases.get(keyOf(staticDir, tag))?.lease;
  }

  /** This window's lease on an area: its lock's token, and when it was taken (this process's clock). */
  leaseOf(staticDir: string, tag: string): { token: string; since: number } | undefined {
    const held = this.leases.get(keyOf(staticDir, tag));
    return held === undefined ? undefined : { token: held.lease.holder.token, since: held.since };
  }

  /** This window's place in the line for an area it waits for. */
  placeOf(staticDir: string, tag: string): InLine | undefined {
    return this.places.get(keyOf(staticDir, tag));
  }

  get all(): Lease[] {
    return [...this.leases.values()].map((v) => v.lease);
  }

  /**
   * Takes the lock of an existing area for this window. Fails at once (ELOCKED) if it is held,
   * unless `wait` is given: then it waits its turn in the area's queue until the lock is this
   * window's, `wait.signal` aborts, or the window closes (which gives its place up).
   */
  async lock(staticDir: string, tag: string, wait?: { signal?: AbortSignal; onQueue?: OnQueue }): Promise<Lease> {
    const started = Date.now();
    const key = keyOf(staticDir, tag);
    const ref = { staticDir, tag };
    const waiting = new AbortController();
    const stop = (): void => waiting.abort(wait?.signal?.reason);
    const onQueue: OnQueue = (position, count) => {
      this.places.set(key, { position, waiting: count });
      this._onDidChange.fire(ref);
      wait?.onQueue?.(position, count);
    };
    if (wait !== undefined) {
      if (wait.signal?.aborted === true) stop();
      wait.signal?.addEventListener('abort', stop, { once: true });
      this.waits.add(waiting);
    }
    let lease: Lease;
    try {
      lease = await acquire(staticDir, tag, {
        ...this.config.current.timing,
        createOnce: false,
        clientId: this.clientId,
        purpose: vscode.l10n.t('held in VS Code'),
        ...(wait !== undefined ? { waitMs: WAIT_FOREVER_MS, signal: waiting.signal, onQueue } : {}),
      });
    } finally {
      this.waits.delete(waiting);
      wait?.signal?.removeEventListener('abort', stop);
      if (this.places.delete(key)) this._onDidChange.fire(ref);
    }
    this.leases.set(key, { lease, since: Date.now() });
    lease.once('lost', (reason) => {
      if (this.leases.get(key)?.lease === lease) this.leases.delete(key);
      // Nothing to remove (the lock is someone else's now); this lets go of the lease's descriptors.
      lease.release().catch(() => undefined);
      this._onDidChange.fire(ref);
      this.log.warn(`Lost the lock on ${tag}: ${reason.message}`);
      // Who broke it, from the history: the user is told that, never the heartbeat's errno.
      void explainLoss(lease, lease.timing).then((loss) => {
        this.log.warn(`The lock on ${tag} was ${lossWords(loss)}.`);
        this.losses.add(loss);
      });
    });
    this.log.info(`Locked ${tag} in ${staticDir} for this window (took ${Date.now() - started} ms).`);
    this._onDidChange.fire(ref);
    return lease;
  }

  async release(staticDir: string, tag: string): Promise<void> {
    const key = keyOf(staticDir, tag);
    const held = this.leases.get(key);
    if (held === undefined) return;
    this.leases.delete(key);
    this._onDidChange.fire({ staticDir, tag });
    await held.lease.release();
    this.log.info(`Released ${tag} in ${staticDir} (held ${Math.round((Date.now() - held.since) / 1000)} s).`);
  }

  /** The window is closing: let every lock go, so that nobody has to wait for it to turn stale. */
  dispose(): void {
    for (const w of this.waits) w.abort();
    for (const { lease } of this.leases.values()) {
      lease.release().catch((err: unknown) => this.log.warn(`Could not release ${lease.tag}: ${errorMessage(err)}`));
    }
    this.leases.clear();
    this._onDidChange.dispose();
  }
}
