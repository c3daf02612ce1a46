/**
 * A holder of the fault checker that uses the core library: takes the lock, runs its critical
 * section in the fenced log through `lease.workDir` (test/faults/section.ts), and releases (with
 * destroy for a destroy's section). argv[2]: JSON { staticDir, tag, staleMs, refreshMs, waitMs,
 * section }. Reports on stdout as JSON lines; an expected refusal (ELOCKED, ...) is not a failure.
 */
import { acquire } from '../../src/core/lock/lock';
import { flushHistory } from '../../src/core/log/history';
import { runSection, say, type SectionArgs } from '../faults/section';

interface Args {
  staticDir: string;
  tag: string;
  staleMs: number;
  refreshMs: number;
  waitMs: number;
  section: SectionArgs;
}

async function main(): Promise<void> {
  const a = JSON.parse(process.argv[2] ?? '{}') as Args;
  say({ t: 'start', pid: process.pid });
  let lease;
  try {
    lease = await acquire(a.staticDir, a.tag, { createOnce: false, waitMs: a.waitMs, staleMs: a.staleMs, refreshMs: a.refreshMs, clientId: a.section.plan.op });
  } catch (err) {
    const e = err as { code?: string; message?: string };
    say({ t: 'error', code: e.code ?? 'EUNKNOWN', message: e.message });
    return;
  }
  lease.on('lost', (reason) => say({ t: 'lost', code: reason.code }));
  say({ t: 'acquired', token: lease.holder.token, fence: lease.fence });
  await runSection(a.section, lease.workDir, lease.holder.token, lease.fence);
  try {
    await lease.release(a.section.plan.destroy === true ? { destroy: true } : {});
    say({ t: 'released' });
  } catch (err) {
    const e = err as { code?: string; message?: string };
    say({ t: 'release-error', code: e.code ?? 'EUNKNOWN', message: e.message });
  }
}

void main()
  .then(flushHistory)
  .then(
    () => process.exit(0),
    (err: unknown) => {
      say({ t: 'crash', message: String((err as Error).stack ?? err) });
      process.exit(70);
    },
  );
