/**
 * `devserver-stage watch [SUBPATH]`: the builds of the static directory (or below SUBPATH) as
 * they are, then every change of their lock states as it happens, one line each (JSON lines with
 * --json), until stopped. It follows the directory with the same code as the extension's view:
 * inotify where the filesystem has it, polling where it does not (NFS, sshfs).
 */
import * as os from 'os';
import { StagingError } from '../core/errors';
import { LockStates } from '../core/watch/states';
import { isAtOrBelow, type AreaRecord } from '../core/watch/records';
import type { StateChange } from '../core/watch/states';
import type { Timing } from '../core/types';
import { commandMain } from './context';
import { STOPPING, printable, stderr, stdout, useStreams } from './output';

/** Where the command writes: the tool's `stdout` and `stderr` (`Output`), which show text as a terminal should. */
export interface WatchIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  json: boolean;
  /** Polling every this many ms, whatever the filesystem (0: only where it sends no events). */
  pollMs: number;
}

/** One line of the output: a build as it is now, or that it is gone. */
export interface WatchLine {
  time: string;
  /** `snapshot`: as found at the start; `change`: its lock changed, or it appeared; `gone`: removed. */
  event: 'snapshot' | 'change' | 'gone';
  tag: string;
  state?: string;
  /** `user@host` of the holder, or the Python devserver's host for a legacy lock. */
  holder?: string;
  pid?: number;
  clientId?: string;
  purpose?: string;
  /** The fencing token of the lock. */
  token?: number;
  staleReason?: string;
}

function lineOf(r: AreaRecord | undefined, tag: string, event: WatchLine['event']): WatchLine {
  const out: WatchLine = { time: new Date().toISOString(), event, tag };
  if (r === undefined || event === 'gone') return out;
  const e = r.lock;
  out.state = e?.state ?? 'free';
  if (e?.holder !== undefined && e.state !== 'free') {
    out.holder = `${e.holder.user}@${e.holder.hostname}`;
    out.pid = e.holder.pid;
    out.clientId = e.holder.clientId;
    if (e.holder.purpose !== undefined) out.purpose = e.holder.purpose;
    if (e.holder.fence !== undefined) out.token = e.holder.fence;
  } else if (e?.legacy !== undefined) {
    out.holder = e.legacy.hostname;
    if (e.legacy.pid !== undefined) out.pid = e.legacy.pid;
  }
  if (e?.staleReason !== undefined) out.staleReason = e.staleReason;
  return out;
}

/** What a line shows of a build: when it differs, a line is due. */
const keyOfLine = (l: WatchLine): string => [l.state, l.holder, l.pid, l.clientId, l.token].join('\0');

function text(l: WatchLine): string {
  const parts = [l.time, printable(l.tag), l.event === 'gone' ? 'gone' : (l.state ?? '')];
  if (l.holder !== undefined) parts.push(printable(l.holder) + (l.pid !== undefined ? ` pid ${l.pid}` : ''));
  if (l.token !== undefined) parts.push(`token ${l.token}`);
  if (l.staleReason !== undefined) parts.push(`(${printable(l.staleReason)})`);
  return `${parts.join('  ')}\n`;
}

export const main = commandMain(async (ctx, [subpath]: readonly [string], o: { poll?: number }) => {
  // A reader slower than the changes must not hold the process: lines wait in the stream.
  useStreams();
  return runWatch(ctx.staticDir(), subpath, ctx.coreOptions(), { stdout, stderr, json: ctx.json, pollMs: (o.poll ?? 0) * 1000 });
});

/** Resolves to the exit code once stopped by a signal (128 + the signal); errors at the start reject. */
export async function runWatch(staticDir: string, subpath: string, timing: Partial<Timing>, io: WatchIo): Promise<number> {
  const states = new LockStates({ staleMs: timing.staleMs ?? 10_000, refreshMs: timing.refreshMs ?? 2_500 }, { warn: (m) => io.stderr.write(`devserver-stage: ${m}\n`) });
  const under = subpath.replace(/^\/+|\/+$/g, '');
  const print = (l: WatchLine): void => {
    io.stdout.write(io.json ? `${JSON.stringify(l)}\n` : text(l));
  };
  const last = new Map<string, string>();
  const emit = (tag: string, event: WatchLine['event']): void => {
    const l = lineOf(states.record(staticDir, tag), tag, event);
    const key = event === 'gone' ? '' : keyOfLine(l);
    if (event === 'gone') {
      if (!last.has(tag)) return;
      last.delete(tag);
    } else {
      if (last.get(tag) === key) return;
      last.set(tag, key);
    }
    print(l);
  };
  const onChange = (changes: readonly StateChange[]): void => {
    for (const c of changes) {
      if (c.what === 'state') {
        if (isAtOrBelow(c.tag, under) && states.record(staticDir, c.tag)?.kind === 'build') emit(c.tag, 'change');
        continue;
      }
      // Builds came or went below c.tag.
      const now = new Set(states.buildsUnder(staticDir, c.tag).map((r) => r.tag));
      for (const tag of [...last.keys()]) if (isAtOrBelow(tag, c.tag) && tag !== c.tag && !now.has(tag)) emit(tag, 'gone');
      for (const tag of now) if (isAtOrBelow(tag, under)) emit(tag, 'change');
    }
  };
  let stopping: ((got: NodeJS.Signals) => void) | undefined;
  try {
    // The static directory and SUBPATH must be there: errors now are the command's errors.
    await states.children(staticDir, '');
    states.scan([staticDir]);
    states.setPolling(io.pollMs);
    await states.settled();
    if (under !== '' && states.record(staticDir, under) === undefined) {
      throw new StagingError('ENOENT', `There is no folder or build ${under} in the static directory ${staticDir}.`, { path: `${staticDir}/${under}` });
    }
    // Listening before the snapshot goes out: a script that stops this once it has read the
    // snapshot may signal at once, and until a handler is in place a signal's default action ends
    // the process without a word (seen on a loaded machine: killed by SIGTERM instead of exit 143).
    const stopped = new Promise<NodeJS.Signals>((resolve) => {
      const stop = (got: NodeJS.Signals): void => resolve(got);
      stopping = stop;
      for (const s of STOPPING) process.on(s, stop);
    });
    const found = states.buildsUnder(staticDir, under).sort((a, b) => a.tag.localeCompare(b.tag));
    for (const r of found) {
      const l = lineOf(r, r.tag, 'snapshot');
      last.set(r.tag, keyOfLine(l));
      print(l);
    }
    const subscription = states.onDidChange(onChange);
    // The watches do not keep a process alive (the extension host must be free to end): this does.
    const alive = setInterval(() => undefined, 1 << 30);
    const signal = await stopped;
    clearInterval(alive);
    subscription.dispose();
    return 128 + (os.constants.signals[signal] ?? os.constants.signals.SIGINT);
  } finally {
    if (stopping !== undefined) for (const s of STOPPING) process.off(s, stopping);
    states.dispose();
  }
}
