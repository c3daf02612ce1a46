/**
 * i) Start-up of the command line: `devserver-stage status TAG`, `list` and `lock TAG -- true` on a
 * static directory with a few builds, each a whole process, against `node -e 0` (Node's own
 * start-up, which no Node program can go below), in alternating rounds.
 *
 * Each run is measured by a small Python helper that starts it (posix_spawn, its output into a
 * pipe the helper drains, as a script that reads it would) and reaps it with wait4(2): the CPU time
 * is the kernel's account of the process and every process it waited for (for `lock`, the shell
 * at the gate and `true`), user plus system, to the microsecond; the wall time runs from the spawn
 * to the reaping. Node itself cannot tell a child's resource use, and /usr/bin/time prints it to
 * the hundredth of a second only, a sixth of what is measured here.
 */
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import * as readline from 'readline';
import { runAlone } from './alone';
import { median, p95, type Row } from './stats';

const PYTHON = ['/usr/bin/python3', 'python3'].find((p) => !p.startsWith('/') || fs.existsSync(p))!;

/** Reads one JSON argv a line; runs it; answers one line: wall and CPU seconds, exit status, bytes of output. */
const RUNNER = [
  'import json, os, sys, time',
  'for line in sys.stdin:',
  '    argv = json.loads(line)',
  '    r, w = os.pipe()',
  '    actions = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0), (os.POSIX_SPAWN_DUP2, w, 1), (os.POSIX_SPAWN_DUP2, w, 2)]',
  '    t0 = time.perf_counter()',
  '    pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=actions)',
  '    os.close(w)',
  '    n = 0',
  '    while True:',
  '        b = os.read(r, 65536)',
  '        if not b: break',
  '        n += len(b)',
  '    os.close(r)',
  '    _, status, ru = os.wait4(pid, 0)',
  '    wall = time.perf_counter() - t0',
  '    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)',
  '    print(json.dumps({"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "user": ru.ru_utime, "code": code, "bytes": n, "maxrssKiB": ru.ru_maxrss}), flush=True)',
].join('\n');

export interface Sample {
  wall: number;
  cpu: number;
  user: number;
  code: number;
  bytes: number;
  /** The peak resident memory of the largest process it waited for (Linux: KiB). */
  maxrssKiB?: number;
}

/**
 * The environment of every run: this one without NODE_EXTRA_CA_CERTS. Node reads and parses that
 * file at every start (a system bundle of about 140 certificates took 40 ms of CPU on the machines
 * this was written on, where it is set for all processes), the same for every command measured:
 * with it, `node -e 0` costs three times as much and every ratio looks better than on a machine
 * without it.
 */
function runEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  return env;
}

/** A long-lived helper that runs command lines one at a time and reports each. */
export class Runner {
  private readonly child = spawn(PYTHON, ['-c', RUNNER], { stdio: ['pipe', 'pipe', 'inherit'], env: runEnv() });
  private readonly lines = readline.createInterface({ input: this.child.stdout })[Symbol.asyncIterator]();

  constructor() {
    // Without python3 the helper's output just ends: `run` says so.
    this.child.on('error', () => undefined);
  }

  async run(argv: readonly string[]): Promise<Sample> {
    this.child.stdin.write(`${JSON.stringify(argv)}\n`);
    const next = await this.lines.next();
    if (next.done === true) throw new Error('the measuring helper (python3) ended');
    return JSON.parse(next.value) as Sample;
  }

  close(): void {
    this.child.stdin.end();
  }
}

/** A static directory as a small devserver has it: three boards of three staged builds. */
function makeFixture(staticDir: string): void {
  for (const board of ['eve-release', 'kevin-release', 'octopus-release']) {
    for (const build of ['R118-15604.0.0', 'R119-15633.0.0', 'R120-15662.0.0']) {
      const dir = path.join(staticDir, board, build);
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, 'chromiumos_test_image.bin'), 'image\n');
      fs.writeFileSync(path.join(dir, 'staged.timestamp'), '');
    }
  }
}

const ms = (s: number): string => `${(s * 1000).toFixed(1)} ms`;

const SPAWN_FLOOR = 'spawn floor';
const SPAWN_FLOOR_SCRIPT = [
  "const c = require('child_process').spawn('/bin/sh', ['-c', 'IFS= read -r _ <&3 || exit 125; exec 3<&-; exec \"$@\"', 'floor', 'true'], { stdio: ['inherit', 'inherit', 'inherit', 'pipe'], detached: true });",
  "c.on('exit', (code) => process.exit(code)); c.stdio[3].end('\\n');",
].join(' ');

export async function benchCliStartup(root: string, rows: Row[], quick: boolean, line: (s?: string) => void, cli: string): Promise<void> {
  line('i) command-line start-up: status, list and lock -- true, each a whole process, against node -e 0 (alternating rounds)');
  if (process.env.NODE_EXTRA_CA_CERTS !== undefined) line('   (NODE_EXTRA_CA_CERTS is set here; these runs go without it, as on most machines: see bench/README.md)');
  if (!fs.existsSync(cli)) {
    line(`   skipped: ${cli} is not built (npm run build)`);
    line();
    return;
  }
  const staticDir = path.join(root, 'cli', 'static');
  makeFixture(staticDir);
  const tag = 'eve-release/R120-15662.0.0';
  const tool = (...args: string[]): string[] => [process.execPath, cli, '-d', staticDir, ...args];
  const candidates: { name: string; argv: string[] }[] = [
    { name: 'node -e 0', argv: [process.execPath, '-e', '0'] },
    { name: 'status', argv: tool('status', tag) },
    { name: 'list', argv: tool('list') },
    { name: 'lock -- true', argv: tool('lock', tag, '--', 'true') },
    // What `lock -- true` cannot go below: Node starting a command the way the tool does (a shell
    // that waits at a gate on fd 3, then execs it, in a session of its own) and waiting for it.
    { name: SPAWN_FLOOR, argv: [process.execPath, '-e', SPAWN_FLOOR_SCRIPT] },
  ];
  const samples = new Map<string, Sample[]>(candidates.map((c) => [c.name, []]));
  let runner: Runner;
  try {
    runner = new Runner();
    const first = await runner.run(candidates[1].argv);
    if (first.code !== 0) throw new Error(`status exited ${first.code}`);
  } catch (err) {
    line(`   skipped: could not measure with ${PYTHON}: ${err instanceof Error ? err.message : String(err)}`);
    line();
    return;
  }
  try {
    const warmup = 2;
    const rounds = quick ? 8 : 25;
    for (let round = 0; round < warmup + rounds; round++) {
      for (let k = 0; k < candidates.length; k++) {
        // Rotate who goes first, so that no command always runs right after the same other one.
        const c = candidates[(round + k) % candidates.length];
        const s = await runner.run(c.argv);
        if (s.code !== 0) throw new Error(`${c.name} exited ${s.code}`);
        if (round >= warmup) samples.get(c.name)!.push(s);
      }
    }
  } finally {
    runner.close();
  }
  const base = samples.get('node -e 0')!;
  const baseCpu = median(base.map((s) => s.cpu));
  const baseWall = median(base.map((s) => s.wall));
  for (const c of candidates) {
    const s = samples.get(c.name)!;
    const cpu = median(s.map((x) => x.cpu));
    const wall = median(s.map((x) => x.wall));
    const ratios = c.name === 'node -e 0' ? '' : `   CPU ${(cpu / baseCpu).toFixed(2)}×, wall ${(wall / baseWall).toFixed(2)}×`;
    line(`   ${c.name.padEnd(13)} CPU ${ms(cpu).padStart(8)} (user ${ms(median(s.map((x) => x.user)))})   wall ${ms(wall).padStart(8)}   (${s.length} runs)${ratios}`);
    if (c.name === 'node -e 0') continue;
    for (const [what, values, baseline] of [
      ['CPU', s.map((x) => x.cpu * 1000), baseCpu * 1000],
      ['wall', s.map((x) => x.wall * 1000), baseWall * 1000],
    ] as const) {
      const floor = c.name === SPAWN_FLOOR;
      const row: Row = { name: `cli ${c.name}: ${what}`, unit: 'ms', median: median(values), p95: p95(values), baseline: 'node -e 0', baselineMedian: baseline, aim: floor ? '(context)' : '≤ 1.30×' };
      if (!floor) row.met = row.median / baseline <= 1.3;
      rows.push(row);
    }
  }
  // `lock -- true` against what any Node tool pays to start a command in a session of its own.
  const lock = samples.get('lock -- true')!;
  const spawnFloor = samples.get(SPAWN_FLOOR)!;
  for (const what of ['cpu', 'wall'] as const) {
    const ours = lock.map((x) => x[what] * 1000);
    const floor = median(spawnFloor.map((x) => x[what] * 1000));
    const row: Row = { name: `cli lock -- true vs the spawn floor: ${what === 'cpu' ? 'CPU' : 'wall'}`, unit: 'ms', median: median(ours), p95: p95(ours), baseline: SPAWN_FLOOR, baselineMedian: floor, aim: '≤ 1.15×' };
    row.met = row.median / floor <= 1.15;
    rows.push(row);
    line(`   lock -- true over the spawn floor (${what}): ${(row.median / floor).toFixed(2)}×, ${(row.median - floor).toFixed(1)} ms`);
  }
  line();
}

if (require.main === module) runAlone('cli', (root, rows, quick, line) => benchCliStartup(root, rows, quick, line, path.resolve(__dirname, '..', '..', 'dist', 'cli.js')));
