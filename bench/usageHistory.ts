/**
 * A static directory's history as many hosts would have written it, made directly in the on-disk
 * format (docs/protocol.md, History): `builds` builds of one folder, `events` events in all over
 * the last week, holdings by several users, released or now and then force-released, some after
 * a wait. For the usage page's figures (bench/vscode/usage.ts).
 */
import * as fs from 'fs';
import * as path from 'path';
import { HISTORY_DIR, META_DIR, historyDirOf, historySegmentName } from '../src/core/base/protocol';

const USERS = ['alice', 'bob', 'carol', 'dave', 'erin', 'ci'];
const HOSTS = ['ws1', 'ws2', 'build3'];

/** Writes the history; returns the builds' tags. Deterministic (a fixed sequence, no Math.random). */
export function writeUsageHistory(staticDir: string, folder: string, builds: number, events: number, nowMs = Date.now()): string[] {
  const perBuild = Math.max(2, Math.floor(events / builds / 2) * 2);
  const week = 7 * 86_400_000;
  const tags: string[] = [];
  let seed = 12345;
  const next = (n: number): number => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    // The high bits: the low ones of this generator repeat with a short period.
    return Math.floor((seed / 2 ** 31) * n);
  };
  for (let b = 0; b < builds; b++) {
    const tag = `${folder}/R${100 + (b % 50)}-${15000 + b}.0.0`;
    tags.push(tag);
    const dir = path.join(staticDir, META_DIR, HISTORY_DIR, ...historyDirOf(tag));
    fs.mkdirSync(dir, { recursive: true });
    const holdings = perBuild / 2;
    const step = week / holdings;
    const lines: string[] = [];
    for (let i = 0; i < holdings; i++) {
      const user = USERS[next(USERS.length)];
      const hostname = HOSTS[next(HOSTS.length)];
      const pid = 1000 + next(30000);
      const holder = { user, hostname, pid, clientId: `${hostname}:${pid}`, purpose: `stage ${tag}` };
      const start = nowMs - week + i * step + next(Math.floor(step / 4));
      const heldMs = 1_000 + next(Math.floor(step / 2));
      const waitedMs = next(4) === 0 ? 1_000 + next(600_000) : next(40);
      const fence = i + 1;
      lines.push(JSON.stringify({ tag, kind: 'acquired', holder, fence, waitedMs, time: new Date(start).toISOString() }));
      const end = new Date(start + heldMs).toISOString();
      if (next(20) === 0) {
        const by = { user: 'admin', hostname: 'ws1', pid: 4242, clientId: 'ws1:4242' };
        lines.push(JSON.stringify({ tag, kind: 'force-released', holder: by, fence, heldMs, previous: holder, time: end }));
      } else {
        lines.push(JSON.stringify({ tag, kind: 'released', holder, fence, heldMs, time: end }));
      }
    }
    fs.writeFileSync(path.join(dir, historySegmentName(HOSTS[b % HOSTS.length], 0)), `${lines.join('\n')}\n`);
  }
  return tags;
}
