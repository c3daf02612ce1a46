/**
 * A directory's listing for the model, its children watched before they are judged. The model
 * watches a directory before listing it, so that a change between the two is seen; its children's
 * locks change inside the children, so each child is watched before its judgement too. Watched
 * after the listing (as each record is made), a lock taken on one in between would go unseen until
 * its next heartbeat, and a reservation or a Python devserver's lock has none.
 */
import { list } from '../lock/inspect';
import type { ListEntry, Timing } from '../base/types';
import type { AreaRef } from './records';
import type { Watcher } from './watcher';

export interface ListingWanted {
  /** Whether the listing is no longer wanted (a reset, the folder forgotten): nothing is watched or returned then. */
  gone(): boolean;
  /** Whether a child watched for an unwanted listing is to be unwatched again (no record has it). */
  unwatchable(tag: string): boolean;
}

/** Lists `tag` (a root for '') with its children watched first; undefined when `wanted.gone()` says so by its end. */
export async function listWatched(staticDir: string, tag: string, timing: Timing, watcher: Watcher<AreaRef>, wanted: ListingWanted): Promise<ListEntry[] | undefined> {
  let watched: readonly { dir: string; tag: string }[] = [];
  const fresh = await list(staticDir, tag, {
    ...timing,
    beforeJudging: async (children) => {
      if (wanted.gone()) return;
      watched = children;
      for (const c of children) watcher.watch(c.dir, { staticDir, tag: c.tag });
      await watcher.ready();
    },
  });
  if (!wanted.gone()) return fresh;
  for (const c of watched) if (wanted.unwatchable(c.tag)) watcher.unwatch(c.dir);
  return undefined;
}
