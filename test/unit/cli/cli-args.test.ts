/**
 * The command line is read twice over: quickly (src/cli/parse.ts, for every run) and by commander
 * (src/cli/program.ts, for help and usage errors). Whatever the quick reading accepts, commander
 * must read the same way; what commander refuses, the quick reading must leave to it.
 */
import { strict as assert } from 'assert';
import { Option } from 'commander';
import { COMMANDS, GLOBAL_OPTIONS } from '../../../src/cli/commands';
import type { CommandArgs, GlobalOptions } from '../../../src/cli/context';
import { flagOf, parseCommandLine } from '../../../src/cli/parse';
import { buildProgram } from '../../../src/cli/program';

interface Reading {
  command: string;
  globals: GlobalOptions;
  args: CommandArgs;
  options: Record<string, unknown>;
}

const ENV = 'DEVSERVER_STATIC_DIR';

/** What commander runs for `argv`, or the exit code it refuses it with. */
async function commanderReads(argv: readonly string[], env: string | undefined): Promise<Reading | { refused: number }> {
  const saved = process.env[ENV];
  if (env === undefined) delete process.env[ENV];
  else process.env[ENV] = env;
  let reading: Reading | undefined;
  try {
    const program = buildProgram(
      argv,
      async (command, globals, args, options) => {
        reading = { command: command.name, globals: { ...globals }, args, options: { ...options } };
        return 0;
      },
      { code: 0 },
    );
    program.configureOutput({ writeOut: () => undefined, writeErr: () => undefined, outputError: () => undefined });
    for (const c of program.commands) c.configureOutput({ writeOut: () => undefined, writeErr: () => undefined, outputError: () => undefined });
    await program.parseAsync(argv, { from: 'user' });
    return reading ?? { refused: 0 };
  } catch (err) {
    return { refused: (err as { exitCode?: number }).exitCode ?? -1 };
  } finally {
    if (saved === undefined) delete process.env[ENV];
    else process.env[ENV] = saved;
  }
}

function quickReads(argv: readonly string[], env: string | undefined): Reading | undefined {
  const parsed = parseCommandLine(argv, env === undefined ? {} : { [ENV]: env });
  return parsed === undefined ? undefined : { command: parsed.command.name, globals: parsed.globals, args: parsed.args, options: parsed.options };
}

/** Command lines scripts and people type: the quick reading must take every one of them. */
const COMMON: string[][] = [
  ['status', 'eve/R1'],
  ['-d', '/srv/static', 'status', 'eve/R1'],
  ['--static-dir=/srv/static', '--json', 'status', 'eve/R1'],
  ['-d/srv/static', 'list'],
  ['list'],
  ['list', 'eve-release', '--json'],
  ['--stale', '30', '--refresh', '0.5', 'list'],
  ['lock', 'eve/R1', '--', 'true'],
  ['lock', '--create-once', '--destroy-on-failure', '--purpose', 'nightly eve', 'eve/R1', '--', './stage.sh', '-x', '--json'],
  ['lock', '--wait', '60', 'eve/R1', '--', 'sh', '-c', 'exit 3'],
  ['lock', '--wait=0.5', 'eve/R1', 'make'],
  ['stage', 'eve/R1', 'a.bin', 'b.tar.gz', '--max-size', '2G', '--add', '--overwrite'],
  ['stage', '--wait', '10', '--purpose', 'ci', 'eve/R1', 'https://example.com/x.zip'],
  ['verify', 'eve/R1'],
  ['--json', 'watch', 'eve', '--poll', '2'],
  ['du'],
  ['du', 'eve'],
  ['prune', '--keep', '50', '--older-than', '30d', '--dry-run'],
  ['prune', 'eve', '--older-than=12h'],
  ['history'],
  ['history', 'eve/R1', '--since', '2d', '--limit', '20'],
  ['force-release', 'eve/R1'],
  ['destroy', '--force', 'eve/R1'],
  ['destroy', '-f', 'eve/R1'],
];

/** Command lines commander must decide: help, the version, and its errors. */
const LEFT_TO_COMMANDER: string[][] = [
  [],
  ['--help'],
  ['-h'],
  ['help'],
  ['help', 'status'],
  ['status', '--help'],
  ['lock', '-h', 'x', '--', 'true'],
  ['-V'],
  ['--version'],
  ['frobnicate'],
  ['status'],
  ['status', 'a', 'b'],
  ['list', '--bogus'],
  ['--bogus', 'list'],
  ['--json=1', 'list'],
  ['--stale', 'soon', 'list'],
  ['--stale', '-1', 'list'],
  ['-d'],
  ['-d', '--json', 'list'],
  ['lock', 'eve/R1'],
  ['lock', 'eve/R1', '--'],
  ['lock', '--wait', 'x', 'eve/R1', '--', 'true'],
  ['prune'],
  ['prune', '--dry-run'],
  ['prune', '--keep', 'many'],
  ['history', '--limit', '-3'],
  ['destroy', '-fd', '/x', 'eve/R1'],
  ['status', '-5'],
  ['--', 'list'],
  ['--wait', '5', 'lock', 'x', '--', 'true'],
];

/** Random command lines from the pieces of the grammar, valid and not, the same ones every run. */
function* randomCommandLines(count: number): Generator<string[]> {
  let seed = 20261123;
  const next = (n: number): number => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  const pick = <T>(xs: readonly T[]): T => xs[next(xs.length)];
  const values = ['5', '0.5', '-1', 'x', '2G', '30d', '', 'eve/R1', '--', '-d', '--json'];
  const words = ['eve/R1', 'eve', 'a b', '-', '--', 'true', 'list', 'status', 'help', '-x', '--json', '-h', '-f', '-d', '-dX'];
  for (let i = 0; i < count; i++) {
    const argv: string[] = [];
    const command = pick(COMMANDS);
    const flags = [...GLOBAL_OPTIONS, ...(command.options ?? [])].map(flagOf);
    const length = 1 + next(7);
    const at = next(length);
    for (let j = 0; j < length; j++) {
      if (j === at) argv.push(next(10) === 0 ? pick(COMMANDS).name : command.name);
      const r = next(4);
      if (r === 0) {
        const f = pick(flags);
        const form = next(3);
        if (!f.takesValue) argv.push(form === 0 && f.short !== undefined ? f.short : f.long);
        else if (form === 0) argv.push(f.long, pick(values));
        else if (form === 1) argv.push(`${f.long}=${pick(values)}`);
        else argv.push(f.short !== undefined ? `${f.short}${pick(values)}` : f.long);
      } else {
        argv.push(pick(words));
      }
    }
    yield argv;
  }
}

describe('the command line, read quickly and by commander', () => {
  it('reads each option as commander does: short and long flag, whether it takes a value, its key', () => {
    for (const spec of [...GLOBAL_OPTIONS, ...COMMANDS.flatMap((c) => c.options ?? [])]) {
      const ours = flagOf(spec);
      const theirs = new Option(spec.flags, spec.description);
      assert.deepEqual([ours.short, ours.long, ours.takesValue, ours.key], [theirs.short, theirs.long, theirs.required, theirs.attributeName()], spec.flags);
    }
  });

  it('takes the common command lines itself, reading each as commander does', async () => {
    for (const argv of COMMON) {
      for (const env of [undefined, '/env/static']) {
        const quick = quickReads(argv, env);
        assert.ok(quick !== undefined, `left to commander: ${argv.join(' ')}`);
        assert.deepEqual(quick, await commanderReads(argv, env), argv.join(' '));
      }
    }
  });

  it('leaves help, the version and every usage error to commander', async () => {
    for (const argv of LEFT_TO_COMMANDER) {
      assert.equal(quickReads(argv, '/srv/static'), undefined, argv.join(' '));
    }
  });

  it('on 5,000 random command lines, never reads one otherwise than commander, nor takes one it refuses', async () => {
    let taken = 0;
    for (const argv of randomCommandLines(5_000)) {
      const env = argv.length % 2 === 0 ? '/env/static' : undefined;
      const quick = quickReads(argv, env);
      if (quick === undefined) continue;
      taken++;
      assert.deepEqual(quick, await commanderReads(argv, env), JSON.stringify(argv));
    }
    // The generator must reach both sides, or this test proves nothing.
    assert.ok(taken > 300, `only ${taken} of 5,000 taken`);
  });
});
