/**
 * Part `usage` of the benchmark in a real VS Code: the Show Usage page of a folder of 5,000
 * builds with 100,000 events of history (written directly in the on-disk format), computed and
 * rendered, and the command that opens it. Prints figures; asserts nothing.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { performance } from 'perf_hooks';
import * as vscode from 'vscode';
import { DAY_MS, WEEK_MS, historyStats } from '../../src/core/log/history';
import { usagePage } from '../../src/extension/usage/usagePage';
import { usageWords } from '../../src/extension/usage/words';
import { median, p95 } from '../stats';
import { writeUsageHistory } from '../usageHistory';

const FOLDER = 'usage-board';
const ROUNDS = 7;

export async function usagePart(say: (line?: string) => void, figures: Record<string, number>, builds: number, events: number): Promise<void> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dss-bench-usage-'));
  const staticDir = path.join(root, 'static');
  try {
    fs.mkdirSync(staticDir);
    let t = performance.now();
    writeUsageHistory(staticDir, FOLDER, builds, events);
    say(`usage: wrote the history of ${builds.toLocaleString('en')} builds, ${events.toLocaleString('en')} events, in ${((performance.now() - t) / 1000).toFixed(1)} s`);

    // The page computed and rendered as the panel does: both windows in one reading, then the HTML.
    const compute: number[] = [];
    const render: number[] = [];
    let holds = 0;
    let bytes = 0;
    for (let i = 0; i < ROUNDS; i++) {
      t = performance.now();
      const [day, week] = await historyStats(staticDir, { scope: FOLDER, windowsMs: [DAY_MS, WEEK_MS] });
      const t1 = performance.now();
      const html = usagePage({ staticDir, scope: FOLDER, day, week, nonce: 'benchbenchbench0123456', words: usageWords() });
      render.push(performance.now() - t1);
      compute.push(t1 - t);
      holds = week.holds;
      bytes = html.length;
    }
    const total = compute.map((c, i) => c + render[i]);
    say(`usage: ${holds.toLocaleString('en')} holdings in the week, a page of ${(bytes / 1024).toFixed(0)} KiB; ${ROUNDS} rounds (the first with a cold cache of this process, the files in the page cache)`);
    say(`usage: compute ${median(compute).toFixed(0)} ms median (p95 ${p95(compute).toFixed(0)}, first ${compute[0].toFixed(0)}), render ${median(render).toFixed(1)} ms median`);
    say(`usage: compute + render ${median(total).toFixed(0)} ms median (aim: within 1 s)`);
    figures['usage: compute + render, ms'] = median(total);
    figures['usage: render, ms'] = median(render);

    // The command as a user runs it on the folder's row: the panel made, then reused.
    const node = { kind: 'folder', entry: { staticDir, tag: FOLDER } };
    const shown: number[] = [];
    for (let i = 0; i < 5; i++) {
      t = performance.now();
      await vscode.commands.executeCommand('devserverStaging.showUsage', node);
      shown.push(performance.now() - t);
    }
    say(`usage: Show Usage on the folder's row, until the panel has its page: first ${shown[0].toFixed(0)} ms, then ${median(shown.slice(1)).toFixed(0)} ms median (the panel reused)`);
    figures['usage: Show Usage command, ms'] = median(shown.slice(1));
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
  say();
}
