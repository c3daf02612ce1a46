/**
 * The thread that holds the extension's watches (see threadWatcher.ts): a `DirectoryWatcher` run
 * from the model's messages, its news sent back a batch per turn of this thread's event loop.
 */
import { threadPort } from '../base/threads';
import { DirectoryWatcher } from './watcher';
import { NewsBatch, type FromWatches, type ToWatches } from './watchProtocol';

const port = threadPort<ToWatches, FromWatches>('watchWorker', 'the model (threadWatcher.ts)');
const post = (m: FromWatches): void => port.post(m);
let news: NewsBatch | undefined;

function send(): void {
  const batch = news;
  news = undefined;
  if (batch !== undefined) post({ events: batch.events });
}

const watcher = new DirectoryWatcher<undefined>(
  ({ dir, name, kind }) => {
    if (news === undefined) {
      news = new NewsBatch();
      setImmediate(send);
    }
    news.add({ dir, name, kind });
  },
  (dir, err) => {
    const code = (err as { code?: unknown } | undefined)?.code;
    post({ failed: { dir, message: err instanceof Error ? err.message : String(err), ...(typeof code === 'string' ? { code } : {}) } });
  },
  (dir) => post({ dropped: dir }),
);

port.onMessage((m) => {
  if (m.clear === true) watcher.unwatchAll();
  for (const op of m.ops) {
    if (op.startsWith('+')) watcher.watch(op.slice(1), undefined);
    else watcher.unwatch(op.slice(1));
  }
  if (m.sync !== undefined) post({ synced: m.sync });
});
