/**
 * The full command line, on commander: help, the version, and every command line the quick
 * reading in parse.ts leaves to it (usage errors above all), built from the table in commands.ts.
 * Loaded only when needed.
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { COMMANDS, GLOBAL_OPTIONS, InvalidValue, TOOL_DESCRIPTION, TOOL_HELP_AFTER, TOOL_NAME, type CommandSpec, type OptionSpec } from './commands';
import type { CommandArgs, GlobalOptions } from './context';
import { EXIT, formatError, jsonRequested, usageError, useStreams } from './output';

declare const __VERSION__: string | undefined;

/** Runs a command once parsed, resolving to the exit code. */
export type Runner = (command: CommandSpec, globals: GlobalOptions, args: CommandArgs, options: Record<string, unknown>) => Promise<number>;

function optionOf(spec: OptionSpec): Option {
  const option = new Option(spec.flags, spec.description);
  const parse = spec.parse;
  if (parse !== undefined) {
    option.argParser((value: string) => {
      try {
        return parse(value);
      } catch (err) {
        throw err instanceof InvalidValue ? new InvalidArgumentError(err.message) : err;
      }
    });
  }
  if (spec.default !== undefined) option.default(spec.default);
  if (spec.env !== undefined) option.env(spec.env);
  return option;
}

/** The program; each command's action hands what it parsed to `run` and keeps the exit code in `exit.code`. */
export function buildProgram(argv: readonly string[], run: Runner, exit: { code: number }): Command {
  const program = new Command(TOOL_NAME);
  // With --json, commander's text for a usage error (it goes to writeErr) is not printed: runProgram reports it as JSON.
  const json = (): boolean => program.opts<GlobalOptions>().json === true || jsonRequested(argv);
  program
    .description(TOOL_DESCRIPTION)
    .version(typeof __VERSION__ === 'string' ? __VERSION__ : 'dev')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({
      outputError: (text, write) => write(text),
      writeErr: (text) => (json() ? undefined : process.stderr.write(text)),
    })
    .addHelpText('after', TOOL_HELP_AFTER);
  for (const spec of GLOBAL_OPTIONS) program.addOption(optionOf(spec));

  for (const spec of COMMANDS) {
    const command = program.command(spec.name);
    if (spec.summary !== undefined) command.summary(spec.summary);
    command.description(spec.description);
    for (const a of spec.arguments) command.argument(a.name, a.description, a.default);
    for (const o of spec.options ?? []) command.addOption(optionOf(o));
    if (spec.usage !== undefined) command.usage(spec.usage);
    command.action(async (...params: unknown[]) => {
      // commander passes the arguments, then the options, then the command.
      const options = params[params.length - 2] as Record<string, unknown>;
      const problem = spec.check?.(options);
      if (problem !== undefined) command.error(`error: ${problem}`, { exitCode: EXIT.usage, code: `${spec.name}.invalid` });
      exit.code = await run(spec, program.opts<GlobalOptions>(), params.slice(0, -2) as CommandArgs, options);
    });
  }
  return program;
}

/** Parses `argv` with commander and runs what it names; usage errors, help and the version end here. */
export async function runProgram(argv: readonly string[], run: Runner): Promise<number> {
  // commander writes help and errors to process.stdout and process.stderr.
  useStreams();
  const exit = { code: EXIT.ok as number };
  const program = buildProgram(argv, run, exit);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return exit.code;
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    // Help and version end up here too, with exit code 0; commander has already printed them.
    if (err.exitCode === 0) return EXIT.ok;
    // Without --json commander has printed the message; with it, it is reported here.
    if (program.opts<GlobalOptions>().json === true || jsonRequested(argv)) process.stderr.write(formatError(usageError(err.message), true));
    return EXIT.usage;
  }
}
