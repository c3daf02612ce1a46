/**
 * devserver-stage: the command line on the lock core, for scripts, CI jobs and other processes.
 * Exit codes: 0 success; 2 usage or bad tag; 3 held by another; 1 anything else (`verify`: a
 * damaged build).
 * `lock` exits with its command's exit code; `stage` exits 128 + the signal when interrupted,
 * and both do so while waiting for the lock. A closed stdout changes no exit code.
 *
 * This file only reads the command line and hands it to the command's own file, which it loads
 * then (src/cli/<name>Command.ts; dist/cli/ when built): a `status` loads neither the staging nor
 * the archive libraries nor commander, which is loaded only for help and usage errors.
 */
import { withCodeCache } from './codeCache';
import type { CommandSpec } from './commands';
import type { CommandArgs, GlobalOptions } from './context';
import { EXIT, formatError, jsonRequested, outputFailed, stderr } from './output';
import { parseCommandLine } from './parse';

function runCommand(command: CommandSpec, globals: GlobalOptions, args: CommandArgs, options: Record<string, unknown>): Promise<number> {
  return withCodeCache(() => command.load()).main(globals, args, options);
}

export async function main(argv: readonly string[]): Promise<number> {
  const parsed = parseCommandLine(argv, process.env);
  if (parsed !== undefined) return runCommand(parsed.command, parsed.globals, parsed.args, parsed.options);
  const { runProgram } = require('./program') as typeof import('./program');
  return runProgram(argv, runCommand);
}

if (require.main === module) {
  const argv = process.argv.slice(2);
  main(argv).then(
    (code) => {
      process.exitCode = outputFailed() ? EXIT.error : code;
    },
    (err: unknown) => {
      const json = jsonRequested(argv);
      stderr.write(json ? formatError(err, true) : `devserver-stage: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exitCode = EXIT.error;
    },
  );
}
