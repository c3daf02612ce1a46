/**
 * A long-lived contender for stale locks, steered trial by trial over IPC.
 * argv[2]: JSON { staticDir, id, staleMs, refreshMs }.
 * { type: 'arm', trial, tag }    → { type: 'armed', trial }
 * { type: 'go', trial }          → one acquire(createOnce: false, waitMs: 0), then
 *                                  { type: 'result', trial, won: true, token, markerClash } or
 *                                  { type: 'result', trial, won: false, code, message }.
 *                                  A winner creates `<staticDir>/trial-<trial>.winner` with O_EXCL
 *                                  and keeps holding the lock.
 * { type: 'release', trial }     → removes its marker, releases, { type: 'released', trial }
 * { type: 'exit' }               → exits.
 * A lost lease sends { type: 'lost', trial }.
 */
import * as fs from 'fs';
import * as path from 'path';
import { acquire, type Lease } from '../../src/core/lock/lock';

interface Args {
  staticDir: string;
  id: number;
  staleMs: number;
  refreshMs: number;
}

interface Msg {
  type: string;
  trial: number;
  tag?: string;
}

const args = JSON.parse(process.argv[2] ?? '{}') as Args;
const send = (m: unknown): void => {
  process.send?.(m);
};
const markerOf = (trial: number): string => path.join(args.staticDir, `trial-${trial}.winner`);

let armed: { trial: number; tag: string } | undefined;
const leases = new Map<number, { lease: Lease; marker: boolean }>();

async function go(trial: number): Promise<void> {
  if (armed === undefined || armed.trial !== trial) {
    send({ type: 'result', trial, won: false, code: 'NOTARMED', message: `not armed for trial ${trial}` });
    return;
  }
  const { tag } = armed;
  armed = undefined;
  let lease: Lease;
  try {
    lease = await acquire(args.staticDir, tag, { createOnce: false, waitMs: 0, staleMs: args.staleMs, refreshMs: args.refreshMs });
  } catch (err) {
    const e = err as { code?: string; message?: string };
    send({ type: 'result', trial, won: false, code: e.code, message: e.message });
    return;
  }
  lease.on('lost', () => send({ type: 'lost', trial }));
  let marker = false;
  let markerClash = false;
  try {
    fs.closeSync(fs.openSync(markerOf(trial), 'wx'));
    marker = true;
  } catch (err) {
    markerClash = (err as NodeJS.ErrnoException).code === 'EEXIST';
  }
  leases.set(trial, { lease, marker });
  send({ type: 'result', trial, won: true, token: lease.holder.token, markerClash });
}

async function releaseTrial(trial: number): Promise<void> {
  const held = leases.get(trial);
  if (held === undefined) {
    send({ type: 'released', trial, error: 'not held' });
    return;
  }
  leases.delete(trial);
  if (held.marker) fs.unlinkSync(markerOf(trial));
  try {
    await held.lease.release();
    send({ type: 'released', trial });
  } catch (err) {
    send({ type: 'released', trial, error: (err as Error).message });
  }
}

process.on('message', (raw) => {
  const m = raw as Msg;
  if (m.type === 'arm') {
    armed = { trial: m.trial, tag: m.tag! };
    send({ type: 'armed', trial: m.trial });
  } else if (m.type === 'go') {
    void go(m.trial);
  } else if (m.type === 'release') {
    void releaseTrial(m.trial);
  } else if (m.type === 'exit') {
    process.disconnect?.();
  }
});
send({ type: 'ready', id: args.id, pid: process.pid });
