/**
 * Runs one part of the benchmark by itself (`node out/bench/list.js`, `node out/bench/stage.js`):
 * a fresh temporary root, removed afterwards, and the part's table.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { formatTable, type Row } from './stats';

export type Part = (root: string, rows: Row[], quick: boolean, line: (s?: string) => void) => Promise<void>;

export function runAlone(name: string, part: Part): void {
  void (async () => {
    const out = (s = ''): void => void process.stdout.write(`${s}\n`);
    const root = fs.mkdtempSync(path.join(os.tmpdir(), `dss-bench-${name}-`));
    const rows: Row[] = [];
    try {
      out(`${name} bench: node ${process.version}, load ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}, tmp ${os.tmpdir()}`);
      await part(root, rows, process.argv.includes('--quick'), out);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
    out(formatTable(rows));
  })().catch((err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  });
}
