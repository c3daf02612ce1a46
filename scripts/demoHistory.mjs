// The demo static directory's last week of history, as its co-users' tools would have recorded
// it (docs/protocol.md, History): holdings of several builds by several people and CI, waits for
// the busy ones, a force-release and an expired lock taken over. Written directly in the on-disk
// format, so that Show Usage and `history --stats` have something to show in the demo.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

const people = {
  alice: { user: 'alice', hostname: 'ws-alice', purpose: 'flash and test' },
  bob: { user: 'bob', hostname: 'ws-bob', purpose: 'bisect R119' },
  ci: { user: 'chrome-bot', hostname: 'buildbot-3', purpose: 'nightly stage' },
  carol: { user: 'carol', hostname: 'ws-carol', purpose: 'autotest run' },
  admin: { user: 'root', hostname: 'devserver-1' },
};

/** The holdings: [tag, who, start (hours ago), held (hours), waited (minutes), how it ended, by]. */
const HOLDINGS = [
  ['eve-release/R119-15633.0.0', 'ci', 150, 1.5, 0, 'released'],
  ['eve-release/R119-15633.0.0', 'alice', 146, 5, 12, 'released'],
  ['eve-release/R119-15633.0.0', 'bob', 140, 9, 40, 'force-released', 'admin'],
  ['eve-release/R119-15633.0.0', 'carol', 130.5, 3, 25, 'released'],
  ['eve-release/R119-15633.0.0', 'ci', 126, 1.5, 0, 'released'],
  ['eve-release/R119-15633.0.0', 'alice', 100, 6, 0, 'released'],
  ['eve-release/R119-15633.0.0', 'bob', 93.5, 4, 35, 'released'],
  ['eve-release/R119-15633.0.0', 'ci', 78, 1.5, 0, 'released'],
  ['eve-release/R119-15633.0.0', 'carol', 52, 7, 8, 'taken-over', 'alice'],
  ['eve-release/R119-15633.0.0', 'alice', 44.5, 3, 0, 'released'],
  ['eve-release/R119-15633.0.0', 'ci', 30, 1.5, 0, 'released'],
  ['eve-release/R119-15633.0.0', 'bob', 20, 4, 0, 'released'],
  ['eve-release/R119-15633.0.0', 'alice', 15.5, 2.5, 50, 'released'],
  ['eve-release/R119-15633.0.0', 'carol', 12.5, 3, 20, 'force-released', 'admin'],
  ['eve-release/R119-15633.0.0', 'ci', 6, 1.5, 0, 'released'],
  ['eve-release/R118-15474.0.0', 'ci', 160, 2, 0, 'released'],
  ['eve-release/R118-15474.0.0', 'carol', 110, 20, 0, 'released'],
  ['eve-release/R118-15474.0.0', 'bob', 21, 5, 0, 'released'],
  ['eve-release/R118-15474.0.0', 'alice', 9, 2, 15, 'released'],
  ['eve-release/R10-12871.0.0', 'ci', 72, 1, 0, 'released'],
  ['eve-release/R10-12871.0.0', 'bob', 18, 3, 0, 'released'],
  ['eve-release/R10-12871.0.0', 'carol', 4, 1, 0, 'released'],
  ['eve-release/R9-12739.0.0', 'alice', 60, 8, 0, 'destroyed'],
  ['eve-release/R9-12739.0.0', 'ci', 40, 2, 0, 'released'],
  ['octopus-release/R120-15662.0.0', 'ci', 120, 2, 0, 'released'],
  ['octopus-release/R120-15662.0.0', 'carol', 23, 10, 30, 'released'],
  ['octopus-release/R120-15662.0.0', 'bob', 8, 2, 0, 'lost'],
];

const hostName = (h) => h.replace(/[^A-Za-z0-9._-]/g, '_');

/** Appends the demo's week to the history of `staticDir`, ending `nowMs`. */
export function writeDemoHistory(staticDir, nowMs = Date.now()) {
  const lines = new Map();
  const add = (tag, host, event) => {
    const key = `${tag}\0${host}`;
    if (!lines.has(key)) lines.set(key, []);
    lines.get(key).push(`${JSON.stringify(event)}\n`);
  };
  let pid = 31000;
  for (const [tag, name, agoH, heldH, waitedMin, end, byName] of HOLDINGS) {
    const p = people[name];
    const holder = { ...p, pid: ++pid, clientId: `${p.hostname}:${pid}` };
    const start = nowMs - agoH * HOUR;
    const heldMs = heldH * HOUR;
    const time = (ms) => new Date(ms).toISOString();
    add(tag, p.hostname, { tag, kind: 'acquired', holder, waitedMs: waitedMin * 60_000 + 40, time: time(start) });
    if (end === 'force-released' || end === 'taken-over') {
      const b = people[byName];
      const by = { ...b, pid: ++pid, clientId: `${b.hostname}:${pid}` };
      add(tag, b.hostname, { tag, kind: end, holder: by, heldMs, previous: holder, time: time(start + heldMs) });
    } else {
      add(tag, p.hostname, { tag, kind: end, holder, heldMs, time: time(start + heldMs) });
    }
  }
  for (const [key, ls] of lines) {
    const [tag, host] = key.split('\0');
    const h = createHash('sha256').update(tag).digest('hex');
    const dir = path.join(staticDir, '.devserver-staging', 'history', h.slice(0, 2), h);
    fs.mkdirSync(dir, { recursive: true });
    fs.appendFileSync(path.join(dir, `${hostName(host)}.0.jsonl`), ls.join(''));
  }
}
