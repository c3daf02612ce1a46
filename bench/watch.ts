/**
 * g) What following a static directory costs while nothing happens: 1,000 builds in 10 folders,
 * listed again on the idle polling schedule of a network filesystem, as the extension's view and
 * `devserver-stage watch` do there. Measured here on a local directory with polling forced on, so
 * the figure is the process's own CPU (a network filesystem adds round trips, not CPU).
 */
import * as fs from 'fs';
import * as path from 'path';
import { performance } from 'perf_hooks';
import { LockStates, POLL_IDLE_MS } from '../src/core/watch/states';
import type { Row } from './stats';

const FOLDERS = 10;
const PER_FOLDER = 100;

export async function benchPolling(root: string, rows: Row[], quick: boolean, line: (s?: string) => void): Promise<void> {
  line(`g) idle polling of ${FOLDERS * PER_FOLDER} builds in ${FOLDERS} folders every ${POLL_IDLE_MS} ms (the idle schedule on a network filesystem)`);
  const staticDir = path.join(root, 'polling');
  for (let f = 0; f < FOLDERS; f++) {
    for (let b = 0; b < PER_FOLDER; b++) {
      const dir = path.join(staticDir, `board-${f}`, `R${100 + b}-1.0.0`);
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, 'staged.timestamp'), '');
      // Staged an hour ago, as the builds of a static directory mostly were.
      const hourAgo = new Date(Date.now() - 3600_000);
      fs.utimesSync(dir, hourAgo, hourAgo);
    }
  }
  const states = new LockStates({ staleMs: 10_000, refreshMs: 2_500 }, { warn: () => undefined });
  const seconds = quick ? 6 : 30;
  try {
    states.scan([staticDir]);
    await states.settled();
    states.setPolling(POLL_IDLE_MS);
    const listings0 = states.work.listings;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    const cpu = process.cpuUsage(cpu0);
    const wall = performance.now() - t0;
    const cpuMsPerMin = ((cpu.user + cpu.system) / 1000) * (60_000 / wall);
    const listingsPerMin = (states.work.listings - listings0) * (60_000 / wall);
    line(`   ${cpuMsPerMin.toFixed(0)} ms of CPU per minute (${((cpuMsPerMin / 60_000) * 100).toFixed(2)}% of one core), ${listingsPerMin.toFixed(0)} directory listings per minute, over ${seconds} s`);
    rows.push({ name: 'idle polling, 1,000 builds, CPU per minute', unit: 'ms', median: cpuMsPerMin, p95: cpuMsPerMin, ratioText: `${listingsPerMin.toFixed(0)} listings/min` });
  } finally {
    states.dispose();
  }
  line();
}
