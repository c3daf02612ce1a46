/**
 * How the command-line tool talks to the streams it was given: errors in one shape (plain text,
 * or one JSON object per error with --json), and a closed stdout or stderr that ends nothing.
 */
import * as fs from 'fs';
import * as os from 'os';
import type { StagingError } from '../core/base/errors';
import { jsonText, messageText, terminalText } from '../core/base/format';
import { cliMessage } from './nextSteps';

/** The code of errors in how the tool was called (unknown command or option, missing or bad argument). */
export const USAGE_CODE = 'EUSAGE';

/** 0 success; 2 usage or bad tag; 3 held by another; 1 anything else. */
export const EXIT = { ok: 0, error: 1, usage: 2, locked: 3 } as const;

/**
 * A command stopped by a signal (while waiting for a lock, or staging): reported as its error,
 * and the tool exits 128 + the signal's number, as a shell reports a process killed by it
 * (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP).
 */
/** The signals that stop a command: it ends with 128 + the signal, as a shell would show. */
export const STOPPING: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

export class Interrupted extends Error {
  constructor(
    readonly error: unknown,
    readonly signal: NodeJS.Signals,
  ) {
    super(error instanceof Error ? error.message : String(error));
  }

  get exitCode(): number {
    return 128 + (os.constants.signals[this.signal] ?? os.constants.signals.SIGINT);
  }
}

/** One error as the tool reports it: `devserver-stage: MESSAGE`, or `{"error":{"code","message",...}}` with --json. */
export function formatError(err: unknown, json: boolean): string {
  if (err instanceof Interrupted) return formatError(err.error, json);
  const e = (typeof err === 'object' && err !== null ? err : {}) as Partial<StagingError> & { message?: unknown };
  const message = typeof e.message === 'string' ? cliMessage({ ...e, message: e.message }) : String(err);
  if (!json) return messageLine(message);
  const body: Record<string, unknown> = { code: typeof e.code === 'string' ? e.code : 'EIO', message };
  if (e.path !== undefined) body.path = e.path;
  if (e.lock !== undefined) body.lock = e.lock;
  if (e.reason !== undefined) body.reason = e.reason;
  if (e.next !== undefined) body.next = e.next;
  return `${jsonText({ error: body })}\n`;
}

/**
 * A message of the tool (an error, a warning, a notice) as one line on stderr: `devserver-stage:
 * MESSAGE`, with whatever a co-user put in the names it holds escaped (`messageText`), so that it
 * stays one line and cannot act on the terminal.
 */
export function messageLine(message: string): string {
  return `devserver-stage: ${messageText(message)}\n`;
}

/**
 * What a command says about something that did not stop it (a history record that could not be
 * written): each distinct warning once, as one line on stderr, `devserver-stage: warning: MESSAGE`
 * or `{"warning":{"code","message","path"}}` with --json.
 */
export function warner(write: (line: string) => void, json: boolean): (warning: StagingError) => void {
  const said = new Set<string>();
  return (w) => {
    const message = cliMessage(w);
    if (said.has(message)) return;
    said.add(message);
    write(json ? `${jsonText({ warning: { code: w.code, message, ...(w.path !== undefined ? { path: w.path } : {}) } })}\n` : messageLine(`warning: ${message}`));
  };
}

/** A usage error as `formatError` takes it; `text` is commander's message ("error: unknown option '--x'"). */
export function usageError(text: string): { code: string; message: string } {
  return { code: USAGE_CODE, message: text.replace(/^error:\s*/, '').trim() };
}

/**
 * Whether --json was asked for, from the arguments alone (before `--`): a usage error can come
 * before commander has parsed the option.
 */
export function jsonRequested(argv: readonly string[]): boolean {
  for (const a of argv) {
    if (a === '--') return false;
    if (a === '--json') return true;
  }
  return false;
}

/**
 * One function per kind of output, used by every command: `printable` for a co-user's text (a name,
 * a holder's field, a reason) in text, `printableTime` for a time read from the disk, `messageLine`
 * for a message, `jsonText` for JSON; `terminalText` is the net under all of them (`Output.write`).
 */
export { jsonText, messageText, parsedTime, printable, printableTime, readPrintable, terminalText } from '../core/base/format';

let writeFailed = false;

/** Whether writing the output failed other than by a reader going away. */
export function outputFailed(): boolean {
  return writeFailed;
}

/**
 * A reader that went away (`devserver-stage list | head -1`, a closed terminal) is not a failure
 * of the command: the write fails with EPIPE, and without a listener Node turns that into an
 * uncaught exception with a stack trace. Here the lost output is dropped and the command ends with
 * the status it would have had anyway (0 for a `list` that completed), as a reader such as
 * `grep -q` in a `set -o pipefail` script expects; staging goes on to its end. Other write errors
 * (a full disk under `> file`) fail the command with exit 1.
 */
export function guardOutput(streams: readonly NodeJS.WriteStream[] = [process.stdout, process.stderr]): void {
  for (const stream of streams) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') return;
      writeFailed = true;
      process.exitCode = 1;
      if (stream !== process.stderr && process.stderr.writable) {
        process.stderr.write(`devserver-stage: could not write the output: ${err.message}\n`);
      }
    });
  }
}

/**
 * The tool's standard output or error. It writes through the descriptor at once: making
 * `process.stdout` a stream costs a short command a tenth of its time where it is a pipe (Node
 * loads its network code for it), and a command that prints a table and ends gains nothing from a
 * stream. The stream is used after all where writing at once cannot go on (a descriptor set
 * non-blocking by whoever opened it, with the pipe full), and for the commands that hand it to
 * others (`useStreams`). Failures are taken as `guardOutput` takes them.
 */
export class Output {
  private viaStream = false;
  private failed = false;

  constructor(
    private readonly fd: number,
    private readonly stream: () => NodeJS.WriteStream,
  ) {}

  /** Writes `text` as a terminal should show it (`terminalText`): no control character but newline and tab. */
  write(text: string): void {
    this.put(terminalText(text));
  }

  /**
   * Writes `text` as it is: only for a progress line redrawn in place, whose carriage return and
   * erase-line sequence are the tool's own and whose names were made `printable`.
   */
  draw(text: string): void {
    this.put(text);
  }

  /** Whether the descriptor is a terminal (progress is redrawn in place only there). */
  get isTTY(): boolean {
    // Loaded here, not for every command: `status` and `list` never ask.
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- see above
    return (require('tty') as typeof import('tty')).isatty(this.fd);
  }

  /** The terminal's width, where the stream is in use and knows it. */
  get columns(): number | undefined {
    return this.viaStream ? this.stream().columns : undefined;
  }

  private put(text: string): void {
    if (this.failed) return;
    if (this.viaStream) {
      this.stream().write(text);
      return;
    }
    const bytes = Buffer.from(text);
    let done = 0;
    while (done < bytes.length) {
      try {
        done += fs.writeSync(this.fd, bytes, done);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'EAGAIN') {
          // The stream waits for the reader without holding the process: the rest goes there, and all after it.
          this.useStream();
          this.stream().write(bytes.subarray(done));
        } else {
          this.failed = true;
          if (code !== 'EPIPE') {
            writeFailed = true;
            process.exitCode = 1;
            if (this !== stderr) stderr.write(`devserver-stage: could not write the output: ${(err as Error).message}\n`);
          }
        }
        return;
      }
    }
  }

  /** From now on through the stream, guarded. */
  useStream(): void {
    if (this.viaStream) return;
    this.viaStream = true;
    guardOutput([this.stream()]);
  }
}

export const stdout = new Output(1, () => process.stdout);
export const stderr = new Output(2, () => process.stderr);

/**
 * For the commands that give `process.stdout` and `process.stderr` to others (progress on a
 * terminal, commander's help): all output through the streams, so that nothing overtakes what
 * they hold.
 */
export function useStreams(): void {
  stdout.useStream();
  stderr.useStream();
}
