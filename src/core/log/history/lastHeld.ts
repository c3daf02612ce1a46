/**
 * Who held an area last, and for how long: a glance at the newest end of its history, for a
 * tooltip.
 */
import type { HistoryActor, HistoryKind, HistoryOptions, HistoryPrevious } from './events';
import { collect } from './read';

/** What ended the last holding of an area, for "last held by … for …". */
export interface LastHeld {
  /** The holder whose holding ended. */
  holder: HistoryActor | HistoryPrevious;
  /** How it ended: released (or destroyed) by its holder, lost, taken over as stale, force-released. */
  kind: 'released' | 'lost' | 'destroyed' | 'taken-over' | 'force-released';
  /** When it ended (ISO 8601, the filesystem's clock). */
  endedAt: string;
  heldMs?: number;
  fence?: number;
}

const ENDS: ReadonlySet<HistoryKind> = new Set(['released', 'lost', 'destroyed', 'taken-over', 'force-released']);

/**
 * Who held `tag` last, and for how long: the newest event that ended a holding, or undefined. A
 * glance, made for a tooltip: the last 64 KiB of the newest segment of each of at most 16 hosts,
 * read asynchronously (never holding the caller's event loop while the disk answers).
 */
export async function lastHeld(staticDir: string, tag: string, options: HistoryOptions = {}): Promise<LastHeld | undefined> {
  const [e] = await collect(staticDir, { ...options, tag, limit: 1 }, ENDS, true);
  if (e === undefined) return undefined;
  const holder = (e.kind === 'taken-over' || e.kind === 'force-released') && e.previous !== undefined ? e.previous : e.holder;
  return {
    holder,
    kind: e.kind as LastHeld['kind'],
    endedAt: e.time,
    ...(e.heldMs !== undefined ? { heldMs: e.heldMs } : {}),
    ...(e.fence !== undefined ? { fence: e.fence } : {}),
  };
}
