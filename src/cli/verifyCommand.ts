/**
 * `devserver-stage verify TAG`: a staged build against its manifest. One line per problem and a
 * summary on stdout (the result as JSON with --json), progress on stderr when it is a terminal.
 * Exit 0 when the build is intact, 1 when it is damaged.
 */
import { flushHistory, type HistoryOptions } from '../core/log/history';
import type { Timing } from '../core/base/types';
import { describeEntryType, verify, type VerifyProblem, type VerifyResult } from '../core/verify';
import { commandMain } from './context';
import { jsonText, messageText, printable, stderr, stdout, useStreams } from './output';
import { VerifyProgressView, type ProgressOutput } from './progress';
import { formatBytes, formatCount as count } from './units';

/** Where the command writes: the tool's `stdout` and `stderr` (`Output`), which show text as a terminal should. */
export interface VerifyCommandIo {
  stdout: { write(text: string): unknown };
  stderr: ProgressOutput;
  json: boolean;
}

/**
 * Resolves to the exit code; errors (no such build, no manifest, a damaged one) are thrown for the
 * caller to report. Signals keep their default: verifying writes nothing, so a Ctrl-C that ends
 * the process at once leaves nothing behind.
 */
export async function runVerify(staticDir: string, tag: string, options: Partial<Timing> & HistoryOptions, io: VerifyCommandIo): Promise<number> {
  const view = new VerifyProgressView(io.stderr);
  let result: VerifyResult;
  try {
    result = await verify(staticDir, tag, {
      ...options,
      onProgress: (p) => view.update(p),
      ...(options.warn !== undefined ? { warn: (w) => (view.clear(), options.warn!(w)) } : {}),
    });
  } finally {
    view.clear();
  }
  io.stdout.write(io.json ? `${jsonText(result, 2)}\n` : formatVerifyResult(result));
  return result.ok ? 0 : 1;
}

export const main = commandMain(async (ctx, [tag]: readonly [string]) => {
  // Progress is drawn on stderr's stream: everything else goes the same way, in order.
  useStreams();
  try {
    return await runVerify(ctx.staticDir(), ctx.tagArg(tag), ctx.coreOptions(), { stdout, stderr, json: ctx.json });
  } finally {
    // The `verified` record is written before the process exits, on a network filesystem too.
    await flushHistory();
  }
});


const bytes = (n: number | undefined): string => `${count(n ?? 0)} byte${n === 1 ? '' : 's'}`;
const short = (sha: string | undefined): string => (sha === undefined ? '?' : `${printable(sha.slice(0, 12))}…`);
/** A link's target, always quoted (an empty one too): `printable` quotes only what needs it. */
const linkText = (target: string | undefined): string => {
  if (target === undefined) return '?';
  const shown = printable(target);
  return shown.startsWith('"') ? shown : `"${shown}"`;
};

/** One problem as a line: what, where, and what was found against what was recorded. */
export function formatProblem(p: VerifyProblem): string {
  const kind = p.kind.replace(/-/g, ' ');
  const what = ((): string => {
    switch (p.kind) {
      case 'truncated':
        return `${bytes(p.actual?.size)} of ${bytes(p.expected?.size)}`;
      case 'grown':
        return `${bytes(p.actual?.size)}, recorded ${bytes(p.expected?.size)}`;
      case 'changed':
        return p.expected?.type === 'symlink'
          ? `leads to ${linkText(p.actual?.linkTarget)}, recorded ${linkText(p.expected.linkTarget)}`
          : `sha256 ${short(p.actual?.sha256)}, recorded ${short(p.expected?.sha256)} (same size)`;
      case 'not-a-file':
      case 'not-a-link':
      case 'unlisted':
        return `${describeEntryType(p.actual?.type ?? 'unknown')}${p.detail !== undefined ? `; ${messageText(p.detail)}` : ''}`;
      default:
        return messageText(p.detail ?? '');
    }
  })();
  return `${kind.padEnd(11)} ${printable(p.path)}${what !== '' ? `: ${what}` : ''}`;
}

/** The problems, a note when the build was locked (it may be being staged), and the summary line. */
export function formatVerifyResult(r: VerifyResult): string {
  const lines = r.problems.map(formatProblem);
  if (r.state !== 'free') {
    lines.push(`note: ${printable(r.tag)} was ${r.state === 'held' ? 'held' : `locked (${r.state})`} while it was verified: it may be being staged, and these results may change.`);
  }
  const n = r.problems.length;
  const verdict = r.ok ? 'OK' : `DAMAGED: ${count(n)} problem${n === 1 ? '' : 's'}`;
  lines.push(`${printable(r.tag)}: ${count(r.checkedFiles)} file${r.checkedFiles === 1 ? '' : 's'}, ${formatBytes(r.checkedBytes)} verified, ${verdict}`);
  return `${lines.join('\n')}\n`;
}
