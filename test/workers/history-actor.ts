/**
 * A process that acts on areas when a test says so, for the history tests: several of them make
 * the transitions of the same areas, each recorded by the core in its own process.
 * argv[2]: JSON { staticDir, staleMs?, refreshMs? }. Sends { type: 'ready', pid }.
 * In:  { id, op: 'acquire' | 'release' | 'stage' | 'verify' | 'force-release' | 'destroy', tag, source? }
 *      { id, op: 'append', tag, count, pad }: `count` records through the core's writer, one after
 *      the other, each with `fence` = its sequence number and a purpose of `pad` characters;
 *      waits for { op: 'go' } first when `gated`.
 * Out: { type: 'done', id, ok, code?, message? }; a lost lease sends { type: 'lost', tag, atMs };
 *      a history warning { type: 'warning', message }.
 */
import { flushHistory, recordHistory } from '../../src/core/log/history';
import { acquire, type Lease } from '../../src/core/lock/lock';
import { destroy, forceRelease } from '../../src/core/remove';
import { stage } from '../../src/core/stage/stage';
import { verify } from '../../src/core/verify';

interface Args {
  staticDir: string;
  staleMs?: number;
  refreshMs?: number;
}

interface Command {
  id: number;
  op: string;
  tag: string;
  source?: string;
  count?: number;
  pad?: number;
  gated?: boolean;
}

const args = JSON.parse(process.argv[2] ?? '{}') as Args;
const send = (m: unknown): void => {
  process.send?.(m);
};
const warn = (w: Error): void => send({ type: 'warning', message: w.message });
const timing = {
  ...(args.staleMs !== undefined ? { staleMs: args.staleMs } : {}),
  ...(args.refreshMs !== undefined ? { refreshMs: args.refreshMs } : {}),
  warn,
};
const leases = new Map<string, Lease>();
let go: () => void = () => undefined;
const started = new Promise<void>((resolve) => (go = resolve));

async function append(c: Command): Promise<void> {
  if (c.gated === true) await started;
  const purpose = 'p'.repeat(c.pad ?? 0);
  for (let seq = 0; seq < (c.count ?? 0); seq++) {
    await recordHistory(args.staticDir, { tag: c.tag, kind: 'staged', holder: { user: 'test', hostname: 'h', pid: process.pid, clientId: `appender-${process.pid}`, purpose }, fence: seq }, warn);
  }
  // On a network filesystem the records are queued: done means written.
  await flushHistory();
}

async function perform(c: Command): Promise<void> {
  switch (c.op) {
    case 'acquire': {
      const lease = await acquire(args.staticDir, c.tag, { ...timing, createOnce: false });
      lease.on('lost', () => send({ type: 'lost', tag: c.tag, atMs: Date.now() }));
      leases.set(c.tag, lease);
      return;
    }
    case 'release':
      await leases.get(c.tag)!.release();
      return;
    case 'stage':
      await stage(args.staticDir, c.tag, [c.source!], timing);
      return;
    case 'verify':
      await verify(args.staticDir, c.tag, timing);
      return;
    case 'force-release':
      await forceRelease(args.staticDir, c.tag, timing);
      return;
    case 'destroy':
      await destroy(args.staticDir, c.tag, timing);
      return;
    case 'append':
      return append(c);
    default:
      throw new Error(`unknown op ${c.op}`);
  }
}

process.on('message', (m: Command | 'exit') => {
  if (m === 'exit') {
    process.disconnect?.();
    return;
  }
  if (m.op === 'go') {
    go();
    return;
  }
  perform(m).then(
    () => send({ type: 'done', id: m.id, ok: true }),
    (err: { code?: string; message?: string }) => send({ type: 'done', id: m.id, ok: false, code: err.code, message: err.message }),
  );
});
send({ type: 'ready', pid: process.pid });
