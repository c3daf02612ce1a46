/**
 * The command line as most runs give it, read without loading commander: loading commander and
 * defining every command was the largest part of what a whole `status` adds to Node's own
 * start-up (bench/README.md, part i, has the figures).
 *
 * This reads the grammar of commands.ts the way commander reads it (the tool's options anywhere
 * before `--`, the command's own options anywhere after its name and before `--`, `--opt value`,
 * `--opt=value`, `-dVALUE`), and returns what commander would hand the command. Whatever it is not
 * sure of (help, the version, an unknown or malformed option, a bad value, a missing or extra
 * argument, a grouped short flag, a value that starts with `-`), it leaves to commander by
 * returning undefined, so that every message and help text still comes from one place. A unit
 * test runs both on the same command lines and compares.
 */
import { COMMANDS, GLOBAL_OPTIONS, type CommandSpec, type OptionSpec } from './commands';
import type { CommandArgs, GlobalOptions } from './context';

export interface ParsedCommandLine {
  command: CommandSpec;
  globals: GlobalOptions;
  args: CommandArgs;
  options: Record<string, unknown>;
}

export interface Flag {
  short?: string;
  long: string;
  /** Whether it takes a value (`<value>`); a flag without one is a switch. */
  takesValue: boolean;
  /** The property it sets, as commander names it: `--static-dir` sets `staticDir`. */
  key: string;
  spec: OptionSpec;
}

/** `-d, --static-dir <dir>` -> short `-d`, long `--static-dir`, a value, key `staticDir`. */
export function flagOf(spec: OptionSpec): Flag {
  const m = /^(?:(-[A-Za-z]), )?(--[a-z][a-z-]*)(?: <[a-z-]+>)?$/.exec(spec.flags);
  if (m === null) throw new Error(`flags the command line cannot read: ${spec.flags}`);
  const key = m[2].slice(2).replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
  return { ...(m[1] !== undefined ? { short: m[1] } : {}), long: m[2], takesValue: spec.flags.endsWith('>'), key, spec };
}

/** Not one of these flags. */
const NOT_MINE = 0;
/** One of them, but given in a way best left to commander. */
const DECLINE = -1;

/** Sets the option `arg` (with `next` after it) names in `into`: how many arguments it took, NOT_MINE or DECLINE. */
function take(arg: string, next: string | undefined, flags: readonly Flag[], into: Record<string, unknown>): number {
  for (const f of flags) {
    let value: string | undefined;
    let used: number;
    if (arg === f.long || arg === f.short) {
      if (!f.takesValue) {
        into[f.key] = true;
        return 1;
      }
      // commander takes the next argument whatever it is; one that looks like an option is left to it.
      if (next === undefined || next.startsWith('-')) return DECLINE;
      value = next;
      used = 2;
    } else if (f.takesValue && arg.startsWith(`${f.long}=`)) {
      value = arg.slice(f.long.length + 1);
      used = 1;
    } else if (f.takesValue && f.short !== undefined && arg.startsWith(f.short) && !arg.startsWith('--')) {
      value = arg.slice(2);
      used = 1;
    } else {
      continue;
    }
    if (f.spec.parse === undefined) {
      into[f.key] = value;
      return used;
    }
    try {
      into[f.key] = f.spec.parse(value);
      return used;
    } catch {
      return DECLINE; // commander says what was expected
    }
  }
  return NOT_MINE;
}

/** The command's arguments as commander passes them to its action: one value per declared argument. */
function argumentsOf(command: CommandSpec, operands: readonly string[]): CommandArgs | undefined {
  const args: (string | readonly string[] | undefined)[] = [];
  let i = 0;
  for (const a of command.arguments) {
    const required = a.name.startsWith('<');
    if (a.name.endsWith('...>') || a.name.endsWith('...]')) {
      const rest = operands.slice(i);
      if (required && rest.length === 0) return undefined;
      args.push(rest);
      i = operands.length;
      continue;
    }
    if (i < operands.length) args.push(operands[i++]);
    else if (required) return undefined;
    else args.push(a.default);
  }
  return i < operands.length ? undefined : args;
}

const GLOBAL_FLAGS = GLOBAL_OPTIONS.map(flagOf);

/**
 * What commander would run for `argv` (the arguments after the script), or undefined where it
 * should decide: help, the version, and every command line it would refuse.
 */
export function parseCommandLine(argv: readonly string[], env: NodeJS.ProcessEnv, commands: readonly CommandSpec[] = COMMANDS): ParsedCommandLine | undefined {
  const globals: Record<string, unknown> = {};
  const options: Record<string, unknown> = {};
  const operands: string[] = [];
  let command: CommandSpec | undefined;
  let flags: readonly Flag[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--') {
      if (command === undefined) return undefined;
      for (const operand of argv.slice(i + 1)) operands.push(operand);
      break;
    }
    if (arg.length > 1 && arg.startsWith('-')) {
      // The tool's options first, wherever they are, as commander reads them.
      let used = take(arg, argv[i + 1], GLOBAL_FLAGS, globals);
      if (used === NOT_MINE) used = take(arg, argv[i + 1], flags, options);
      if (used <= 0) return undefined;
      i += used - 1;
      continue;
    }
    if (command === undefined) {
      command = commands.find((c) => c.name === arg);
      if (command === undefined) return undefined; // `help`, or no such command
      flags = (command.options ?? []).map(flagOf);
      continue;
    }
    operands.push(arg);
  }
  if (command === undefined) return undefined;
  const args = argumentsOf(command, operands);
  if (args === undefined) return undefined;
  for (const f of flags) if (!(f.key in options) && f.spec.default !== undefined) options[f.key] = f.spec.default;
  if (command.check?.(options) !== undefined) return undefined;
  for (const f of GLOBAL_FLAGS) {
    if (!(f.key in globals) && f.spec.env !== undefined && env[f.spec.env] !== undefined) globals[f.key] = env[f.spec.env];
  }
  return { command, globals: globals, args, options };
}
