/** What a caller asks of a lock, and the area a lock is being taken in: the types the steps of taking one share. */
import type { Dir } from '../fs/anchored';
import type { HistoryOptions } from '../log/history';
import type { CreatedDir } from '../fs/tags';
import type { Timing } from '../base/types';
import type { OnQueue } from './queue';

export interface AcquireOptions extends Partial<Timing>, HistoryOptions {
  /** The area must not exist yet; it is created by this call (the devserver's default). Default true. */
  createOnce?: boolean;
  /** How long to keep trying while someone else holds the lock, in ms. Default 0: fail at once. */
  waitMs?: number;
  /** What the lock is for, shown to others. */
  purpose?: string;
  /** Identifies this process or editor window to others. */
  clientId?: string;
  /** Aborts a wait for the lock. */
  signal?: AbortSignal;
  /**
   * While waiting: called with this caller's place in line (1: next to enter) and how many wait
   * in all, when it joins the line and each time either changes.
   */
  onQueue?: OnQueue;
  /** @internal A reservation (reserve.ts): the lock's record says it ends this long after it was taken. */
  reserveForMs?: number;
}

/** The area as `acquire` opened it: the lease keeps its descriptors until it ends. */
export interface OpenedLockArea {
  dir: Dir;
  created: CreatedDir[];
  closeParents: () => void;
}
