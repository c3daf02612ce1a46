/**
 * `devserver-stage stage TAG SOURCE...`: stage artifacts with progress on stderr, a summary on
 * stdout, and Ctrl-C that stops cleanly.
 */
import { isStagingError } from '../core/base/errors';
import { flushHistory } from '../core/log/history';
import { stage } from '../core/stage/stage';
import type { StageOptions, StageResult } from '../core/stage/types';
import { commandMain } from './context';
import { queueNotice } from './format';
import { Interrupted, STOPPING, jsonText, messageLine, printable, stderr, stdout, useStreams } from './output';
import { StageProgressView, type ProgressOutput } from './progress';
import { cliMessage } from './nextSteps';
import { formatBytes, formatCount, formatRate } from './units';

export type StageCommandOptions = Omit<StageOptions, 'signal' | 'onProgress'>;

/** Where the command writes: the tool's `stdout` and `stderr` (`Output`), which show text as a terminal should. */
export interface StageCommandIo {
  stdout: { write(text: string): unknown };
  stderr: ProgressOutput;
  json: boolean;
}

export const main = commandMain(
  async (ctx, [typed, sources]: readonly [string, readonly string[]], o: { add?: boolean; overwrite?: boolean; maxSize?: number; wait: number; purpose?: string }) => {
    // Progress is drawn on stderr's stream: everything else goes the same way, in order.
    useStreams();
    const tag = ctx.tagArg(typed);
    const onQueue = queueNotice(tag, stderr);
    try {
      return await runStage(
        ctx.staticDir(),
        tag,
        sources,
        {
          ...ctx.coreOptions(),
          add: o.add === true,
          overwrite: o.overwrite === true,
          ...(o.maxSize !== undefined ? { maxBytes: o.maxSize } : {}),
          waitMs: o.wait * 1000,
          ...(o.purpose !== undefined ? { purpose: o.purpose } : {}),
          ...(onQueue !== undefined ? { onQueue } : {}),
        },
        { stdout, stderr, json: ctx.json },
      );
    } finally {
      // Records queued for a network filesystem are written before the process exits.
      await flushHistory();
    }
  },
);

/** Resolves to the exit code; errors are thrown for the caller to report, an interruption as `Interrupted`. */
export async function runStage(staticDir: string, tag: string, sources: readonly string[], options: StageCommandOptions, io: StageCommandIo): Promise<number> {
  const view = new StageProgressView(io.stderr);
  const say = (message: string): void => {
    view.clear();
    io.stderr.write(messageLine(message));
  };
  const controller = new AbortController();
  let stoppedBy: NodeJS.Signals | undefined;
  // Listening keeps this process alive through the signal until the stager has cleaned up.
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stoppedBy === undefined) {
      stoppedBy = signal;
      say(`${signal === 'SIGINT' ? 'Interrupted' : `Got ${signal}`}: stopping and removing what this run wrote…`);
      controller.abort(new Error(`interrupted by ${signal}`));
    } else {
      say('Still cleaning up; wait for it to finish, or what this run wrote may be left behind.');
    }
  };
  for (const s of STOPPING) process.on(s, onSignal);
  const started = Date.now();
  let result: StageResult;
  try {
    result = await stage(staticDir, tag, sources, {
      ...options,
      signal: controller.signal,
      onProgress: (p) => view.update(p),
      // A warning goes on a line of its own, not into the progress line.
      warn: (w) => (options.warn !== undefined ? (view.clear(), options.warn(w)) : say(`warning: ${cliMessage(w)}`)),
    });
  } catch (err) {
    view.clear();
    // Reported by the caller like any error (JSON with --json); the exit code is 128 + the signal.
    if (stoppedBy !== undefined && (isStagingError(err, 'ECANCELED') || controller.signal.aborted)) throw new Interrupted(err, stoppedBy);
    throw err;
  } finally {
    for (const s of STOPPING) process.off(s, onSignal);
  }
  view.clear();
  const ms = Date.now() - started;
  io.stdout.write(io.json ? `${jsonText(result, 2)}\n` : formatStageResult(result, ms));
  return 0;
}

function names(entries: readonly { name: string }[], max = 10): string {
  const shown = entries.slice(0, max).map((e) => printable(e.name));
  return entries.length > max ? `${shown.join(', ')} and ${formatCount(entries.length - max)} more` : shown.join(', ');
}

function rate(bytes: number, ms: number): string {
  const r = formatRate(bytes, ms);
  return r === '-' ? '' : ` (${r})`;
}

export function formatStageResult(r: StageResult, ms: number): string {
  const written = [...r.added, ...r.replaced].reduce((sum, e) => sum + e.size, 0);
  const lines = [
    `Staged ${printable(r.tag)}${r.created ? ' (new build)' : ''}: ${formatCount(r.added.length)} added, ${formatCount(r.skipped.length)} skipped as identical, ${formatCount(r.replaced.length)} replaced.`,
    // Identical artifacts are read (to compare) but not written: say so rather than count them as written.
    `${formatBytes(written)} written${written !== r.bytes ? `, ${formatBytes(r.bytes)} read` : ''} in ${(ms / 1000).toFixed(1)} s${rate(r.bytes, ms)} to ${printable(r.dir)}.`,
  ];
  // Replacing changes what others may already be using: worth naming.
  if (r.replaced.length > 0) lines.push(`Replaced: ${names(r.replaced)}.`);
  return `${lines.join('\n')}\n`;
}
