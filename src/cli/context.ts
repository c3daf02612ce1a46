/**
 * What every command gets from the tool's global options, and the one way a command ends: its
 * exit code, with its error reported on stderr (as JSON with --json). Each command's file runs
 * itself through `commandMain`, so that what it throws, and what it failed to write, is judged by
 * the same code that made it: the built tool loads each command from a bundle of its own, with its
 * own copy of the modules it shares with the entry.
 */
import { StagingError, isStagingError } from '../core/base/errors';
import type { Timing } from '../core/base/types';
import { EXIT, Interrupted, formatError, jsonText, outputFailed, readPrintable, stderr, stdout, warner } from './output';

export interface GlobalOptions {
  staticDir?: string;
  json?: boolean;
  stale?: number;
  refresh?: number;
}

/** A command's arguments, in the order its entry in commands.ts declares them. */
export type CommandArgs = readonly (string | readonly string[] | undefined)[];

/** Runs one command and resolves to the tool's exit code; never rejects for the command's own errors. */
export type CommandMain = (globals: GlobalOptions, args: CommandArgs, options: Readonly<Record<string, unknown>>) => Promise<number>;

export class CommandContext {
  private warnOnce: ((w: StagingError) => void) | undefined;

  constructor(readonly globals: GlobalOptions) {}

  get json(): boolean {
    return this.globals.json === true;
  }

  /** The static directory, which every command but `--help` needs. */
  staticDir(): string {
    const dir = this.globals.staticDir;
    if (dir === undefined || dir === '') {
      throw new StagingError('EBADSTATICDIR', 'No static directory given.', { reason: 'no-static-dir', next: [{ kind: 'give-static-dir' }] });
    }
    return dir;
  }

  /** A history record that could not be written does not fail the command: one line on stderr says so, once per cause. */
  readonly warn = (w: StagingError): void => {
    this.warnOnce ??= warner((line) => stderr.write(line), this.json);
    this.warnOnce(w);
  };

  /** What every core call takes from the global options: timing, and where warnings go. */
  coreOptions(): Partial<Timing> & { warn: (w: StagingError) => void } {
    const g = this.globals;
    return {
      ...(g.stale !== undefined ? { staleMs: g.stale * 1000 } : {}),
      ...(g.refresh !== undefined ? { refreshMs: g.refresh * 1000 } : {}),
      warn: this.warn,
    };
  }

  /** The result on stdout: `json` with --json (see `jsonText`), else `text`. */
  print(json: unknown, text: string): void {
    stdout.write(this.json ? `${jsonText(json, 2)}\n` : text);
  }

  /**
   * A tag or subpath as typed: as it is, or, between double quotes, with the escapes the output
   * shows a name with (`"board/R\xff"`, `"R1\nx"`: see `printable`), since a name with a control
   * character or bytes that are not UTF-8 can be typed no other way.
   */
  tagArg(text: string): string;
  tagArg(text: string | undefined): string | undefined;
  tagArg(text: string | undefined): string | undefined {
    if (text === undefined) return undefined;
    const name = readPrintable(text);
    if (name === undefined) {
      throw new StagingError(
        'EBADTAG',
        `Invalid tag ${text}: a tag that begins with a double quote is read as the output shows names, between double quotes with \\\\, \\", \\n, \\t, \\uXXXX and \\xNN escapes.`,
      );
    }
    return name;
  }
}

function exitCodeOf(err: unknown): number {
  if (err instanceof Interrupted) return err.exitCode;
  if (isStagingError(err)) {
    if (err.code === 'EBADTAG' || err.code === 'EBADSTATICDIR' || err.code === 'EBADDURATION') return EXIT.usage;
    if (err.code === 'ELOCKED' || err.code === 'ENOTOWNER') return EXIT.locked;
  }
  return EXIT.error;
}

/** A command's `main`: runs `run` and turns what it throws into a message on stderr and an exit code. */
export function commandMain<A extends CommandArgs, O extends object>(run: (ctx: CommandContext, args: A, options: O) => Promise<number | void>): CommandMain {
  return async (globals, args, options) => {
    const ctx = new CommandContext(globals);
    let code: number;
    try {
      code = (await run(ctx, args as A, options as O)) ?? EXIT.ok;
    } catch (err) {
      stderr.write(formatError(err, ctx.json));
      code = exitCodeOf(err);
    }
    // Output that could not be written (not for a reader gone away) fails the command. Asked here:
    // the command's file keeps its own account of what it wrote.
    return outputFailed() ? EXIT.error : code;
  };
}
