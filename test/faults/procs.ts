/**
 * What the kernel says of a process: its state (R, S, D, T, Z) and start time from /proc, and, for
 * one that did not end in time, everything that tells where it waits: the wait channel and kernel
 * stack of each thread and, for a Node process started with `--report-on-signal`, its JavaScript
 * stack from a diagnostic report.
 */
import * as fs from 'fs';
import * as path from 'path';

export interface ProcStat {
  state: string;
  /** Start time in clock ticks since boot: tells a pid from its reuse. */
  start: string;
}

export function procStat(pid: number): ProcStat | undefined {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name is in parentheses and may hold spaces: count fields after the last ')'.
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: rest[0], start: rest[19] };
  } catch {
    return undefined;
  }
}

/** Whether the process that had start time `start` still exists and has not exited (a zombie has). */
export function isRunning(pid: number, start: string): boolean {
  const st = procStat(pid);
  return st !== undefined && st.start === start && st.state !== 'Z' && st.state !== 'X';
}

const readOr = (p: string, fallback = '?'): string => {
  try {
    return fs.readFileSync(p, 'utf8').trim();
  } catch (err) {
    return `${fallback} (${(err as NodeJS.ErrnoException).code})`;
  }
};

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Where a process waits, in words: each thread's state and wait channel, the kernel stack of the
 * main thread and, where `reportDir` receives one within a second of SIGUSR2, the JavaScript stack.
 */
export async function whereItWaits(pid: number, reportDir: string | undefined): Promise<string> {
  const lines: string[] = [];
  const cmd = readOr(`/proc/${pid}/cmdline`).split('\0').join(' ').slice(0, 300);
  lines.push(`pid ${pid}: ${cmd}`);
  let tasks: string[] = [];
  try {
    tasks = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    lines.push('  (gone)');
    return lines.join('\n');
  }
  for (const tid of tasks) {
    const st = procStat(Number(tid));
    lines.push(`  thread ${tid} ${readOr(`/proc/${pid}/task/${tid}/comm`)}: state ${st?.state ?? '?'}, wchan ${readOr(`/proc/${pid}/task/${tid}/wchan`)}`);
  }
  lines.push(`  kernel stack:\n${readOr(`/proc/${pid}/stack`).replace(/^/gm, '    ')}`);
  if (reportDir !== undefined && procStat(pid)?.state !== 'T') {
    const before = new Set(fs.existsSync(reportDir) ? fs.readdirSync(reportDir) : []);
    try {
      process.kill(pid, 'SIGUSR2');
    } catch {
      /* gone */
    }
    for (let i = 0; i < 20; i++) {
      await sleep(50);
      const made = (fs.existsSync(reportDir) ? fs.readdirSync(reportDir) : []).find((n) => !before.has(n) && n.includes(`.${pid}.`));
      if (made === undefined) continue;
      try {
        const report = JSON.parse(fs.readFileSync(path.join(reportDir, made), 'utf8')) as { javascriptStack?: { message?: string; stack?: string[] }; libuv?: { type: string; is_active?: boolean }[] };
        const js = report.javascriptStack;
        const frames = (js?.stack ?? []).filter((l) => l.trim() !== '');
        lines.push(frames.length > 0 ? `  JavaScript stack: ${js?.message ?? ''}\n${frames.map((l) => `    ${l}`).join('\n')}` : '  JavaScript stack: none (idle in the event loop, waiting on what the handles below say)');
        const handles = (report.libuv ?? []).filter((h) => h.is_active === true).map((h) => h.type);
        lines.push(`  active handles: ${handles.join(', ')}`);
      } catch {
        continue;
      }
      break;
    }
  }
  return lines.join('\n');
}
