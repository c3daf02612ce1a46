/**
 * The command a `devserver-stage lock TAG -- ...` of the fault checker runs: the same critical
 * section as fault-holder.ts, written through the work directory of the lock the tool holds for it.
 * The tool tells a command its area and fencing token but not its work directory, so it is found
 * by the command record the tool wrote there before letting the command start
 * (`devserver.lock/work.<token>/command.json`, whose pid is this process: the tool's gate execs it).
 * argv[2]: JSON SectionArgs.
 */
import * as fs from 'fs';
import * as path from 'path';
import { runSection, say, type SectionArgs } from '../faults/section';

function ownWorkDir(area: string): { workDir: string; token: string } | undefined {
  const lock = path.join(area, 'devserver.lock');
  let names: string[];
  try {
    names = fs.readdirSync(lock);
  } catch {
    return undefined; // taken away before the command looked
  }
  for (const name of names) {
    if (!name.startsWith('work.')) continue;
    try {
      const rec = JSON.parse(fs.readFileSync(path.join(lock, name, 'command.json'), 'utf8')) as { pid?: number };
      if (rec.pid === process.pid) return { workDir: path.join(lock, name), token: name.slice('work.'.length) };
    } catch {
      /* another lock's, or not written */
    }
  }
  return undefined;
}

async function main(): Promise<void> {
  const a = JSON.parse(process.argv[2] ?? '{}') as SectionArgs;
  say({ t: 'start', pid: process.pid, role: 'writer' });
  const area = process.env.DEVSERVER_STAGING_DIR ?? '';
  const fence = Number(process.env.DEVSERVER_STAGING_FENCE);
  const own = ownWorkDir(area);
  if (own === undefined) {
    say({ t: 'error', code: 'ENOWORKDIR', message: `no work directory of pid ${process.pid} in ${area}/devserver.lock` });
    process.exit(1);
  }
  say({ t: 'acquired', token: own.token, fence });
  await runSection(a, own.workDir, own.token, fence);
}

void main().then(
  () => process.exit(0),
  (err: unknown) => {
    say({ t: 'crash', message: String((err as Error).stack ?? err) });
    process.exit(70);
  },
);
