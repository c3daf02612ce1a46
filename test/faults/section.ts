/**
 * A holder's critical section as the fault checker sees it: a begin entry, some writes and an end
 * entry in the fenced log (log.ts), each made through the holder's work directory. The holder
 * never asks whether it still holds the lock: a process paused for longer than the stale threshold
 * does not know it was taken over, and the fence alone must refuse what it writes after that.
 * Progress goes to stdout as JSON lines, which the test reads to aim its pauses at holders inside
 * their sections.
 */
import { FencedLog, type AppendOutcome, type EntryKind } from './log';

export interface SectionPlan {
  op: string;
  tag: string;
  /** Writes between begin and end. */
  writes: number;
  /** Pause before each write and before the end, in ms (writes + 1 of them). */
  gapsMs: number[];
  /** A destroy's section: one `destroy` entry, then the release with destroy. */
  destroy?: boolean;
}

export interface SectionArgs {
  plan: SectionPlan;
  mountLog: string;
  serverLog: string;
}

/** A line for the test on stdout. */
export function say(m: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(m)}\n`);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function runSection(args: SectionArgs, workDir: string, token: string, fence: number): Promise<void> {
  const { plan } = args;
  const log = new FencedLog(args.mountLog, args.serverLog);
  let seq = 0;
  const write = async (kind: EntryKind): Promise<AppendOutcome> => {
    const r = await log.append(workDir, { tag: plan.tag, kind, token, fence, op: plan.op, seq: seq++ });
    say({ t: 'wrote', kind, ...r });
    return r;
  };
  say({ t: 'in' });
  if (plan.destroy === true) {
    await write('destroy');
  } else {
    await write('begin');
    for (let i = 0; i < plan.writes; i++) {
      await sleep(plan.gapsMs[i] ?? 0);
      await write('write');
    }
    await sleep(plan.gapsMs[plan.writes] ?? 0);
    await write('end');
  }
  say({ t: 'out' });
}
