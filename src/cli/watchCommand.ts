/**
 * `devserver-stage watch [SUBPATH]`: the builds of the static directory (or below SUBPATH) as
 * they are, then every change of their lock states as it happens, one line each (JSON lines with
 * --json), until stopped. It follows the directory with the same code as the extension's view:
 * inotify where the filesystem has it, polling where it does not (NFS, sshfs).
 */
import * as os from 'os';
import { StagingError } from '../core/base/errors';
import { LockStates } from '../core/watch/states';
import { isAtOrBelow } from '../core/watch/records';
import type { StateChange } from '../core/watch/records';
import type { Timing } from '../core/base/types';
import { commandMain } from './context';
import { EXIT, STOPPING, messageLine, printable, stderr, terminalText, useStreams } from './output';
import { watchReader } from './readerGone';
import { ExecQueue } from './watchExec';
import { classify, withHistory } from './watchKinds';
import { WatchQueue, keyOfLine, lineOf, type LineSink, type WatchLine } from './watchLines';

export type { WatchLine } from './watchLines';

/** Where the command writes, and how it learns that its reader has gone. */
export interface WatchIo {
  /** The lines (see `WatchQueue`): a stream that says when its reader is behind. */
  stdout: LineSink;
  stderr: { write(text: string): unknown };
  json: boolean;
  /** Polling every this many ms, whatever the filesystem (0: only where it sends no events). */
  pollMs: number;
  /** Resolves once the reader of stdout has gone (a closed pipe): the watch then ends, exit 0. */
  readerGone?: Promise<void>;
  /** `--exec`: the command's words, run once per event (see watchExec.ts). */
  exec?: readonly string[];
  /** How long to wait for the history to say how a lock ended (default 2000 ms). */
  historyWaitMs?: number;
}

/** Lines waiting for the history beyond this are looked up once, without waiting for its record. */
const PATIENT_LOOKUPS = 16;
/** Beyond this many, the history is not read at all: the lines take their kind from the states alone, and the backlog drains. */
const MAX_LOOKUPS = 10_000;

export const main = commandMain(async (ctx, [subpath]: readonly [string], o: { poll?: number; exec?: string[] }) => {
  // Messages go through stderr's stream, in order with what node itself may write there.
  useStreams();
  const out = process.stdout;
  const reader = watchReader(out, 1);
  // Written as a terminal should show it, like everything the tool writes (`Output`).
  const sink: LineSink = { write: (text) => out.write(terminalText(text)), once: (event, listener) => out.once(event, listener) };
  try {
    const code = await runWatch(ctx.staticDir(), ctx.tagArg(subpath), ctx.coreOptions(), { stdout: sink, stderr, json: ctx.json, pollMs: (o.poll ?? 0) * 1000, readerGone: reader.gone, ...(o.exec !== undefined ? { exec: o.exec } : {}) });
    // Stopped by a signal, it ends even where a reader that stopped reading has output waiting
    // (stdout, or stderr with the commands' output): that output would keep it running for good.
    if (code > 128) setTimeout(() => process.exit(code), STUCK_OUTPUT_MS).unref();
    return code;
  } finally {
    reader.dispose();
  }
});

/** How long output may take to reach its reader once the watch is stopped. */
const STUCK_OUTPUT_MS = 1_000;

/**
 * Resolves to the exit code once stopped by a signal (128 + the signal), or 0 once the reader has
 * gone; errors at the start reject.
 */
export async function runWatch(staticDir: string, subpath: string, timing: Partial<Timing>, io: WatchIo): Promise<number> {
  const states = new LockStates({ staleMs: timing.staleMs ?? 10_000, refreshMs: timing.refreshMs ?? 2_500 }, { warn: (m) => io.stderr.write(messageLine(m)) });
  const under = subpath.replace(/^\/+|\/+$/g, '');
  const queue = new WatchQueue(io.stdout, io.json);
  const exec = io.exec !== undefined ? new ExecQueue(io.exec, staticDir, io.stderr) : undefined;
  const print = (l: WatchLine): void => queue.put(l);
  /** What the reader was last sent (or has waiting) of each build. */
  const last = new Map<string, WatchLine>();
  /** The changes in order, each after the history has said what it was (see watchKinds.ts). */
  let inOrder = Promise.resolve();
  let lookups = 0;
  const emit = (tag: string, event: 'change' | 'gone'): void => {
    const l = lineOf(states.record(staticDir, tag), tag, event);
    const before = last.get(tag);
    if (event === 'gone') {
      if (before === undefined) return;
      last.delete(tag);
    } else {
      if (before !== undefined && keyOfLine(before) === keyOfLine(l)) return;
      last.set(tag, l);
    }
    const c = classify(before, l);
    const waiting = ++lookups;
    const waitMs = waiting > MAX_LOOKUPS ? -1 : waiting > PATIENT_LOOKUPS ? 0 : (io.historyWaitMs ?? 2_000);
    inOrder = inOrder.then(async () => {
      const told = await withHistory(staticDir, l, c, waitMs);
      lookups--;
      print(told);
      exec?.put(told);
    }).catch((err: unknown) => void io.stderr.write(messageLine(`Could not print a change of ${printable(tag)}: ${String(err)}`)));
  };
  const onChange = (changes: readonly StateChange[]): void => {
    for (const c of changes) {
      // Sizes are measured only on request, which watch never makes.
      if (c.what === 'usage') continue;
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
      throw new StagingError('ENOENT', `There is no folder or build ${printable(under)} in the static directory ${staticDir}.`, { path: `${staticDir}/${under}` });
    }
    // Listening before the snapshot goes out: a script that stops this once it has read the
    // snapshot may signal at once, and until a handler is in place a signal's default action ends
    // the process without a word (seen on a loaded machine: killed by SIGTERM instead of exit 143).
    const stopped = new Promise<NodeJS.Signals | 'reader gone'>((resolve) => {
      const stop = (got: NodeJS.Signals): void => resolve(got);
      stopping = stop;
      for (const s of STOPPING) process.on(s, stop);
      void io.readerGone?.then(() => resolve('reader gone'));
    });
    const found = states.buildsUnder(staticDir, under).sort((a, b) => a.tag.localeCompare(b.tag));
    for (const r of found) {
      const l = lineOf(r, r.tag, 'snapshot');
      last.set(r.tag, l);
      print(l);
    }
    const subscription = states.onDidChange(onChange);
    // The watches do not keep a process alive (the extension host must be free to end): this does.
    const alive = setInterval(() => undefined, 1 << 30);
    const signal = await stopped;
    clearInterval(alive);
    subscription.dispose();
    // A reader that has gone ends the watch as it ends any command: with the status it had, 0.
    if (signal === 'reader gone') return EXIT.ok;
    return 128 + (os.constants.signals[signal] ?? os.constants.signals.SIGINT);
  } finally {
    if (stopping !== undefined) for (const s of STOPPING) process.off(s, stopping);
    exec?.stop();
    states.dispose();
  }
}
