/**
 * Loaded by VS Code's extension host when it runs the integration tests: runs every suite in
 * this folder with mocha and settles with the result. (restricted/index.ts runs its folder's the
 * same way, in a workspace that is not trusted.)
 */
import * as fs from 'fs';
import * as path from 'path';
import * as util from 'util';
import Mocha = require('mocha');

/**
 * What the reporter prints is marked, so that the runner outside can tell it from the
 * workbench's own console output, which arrives on the same channel.
 */
const MARK = '::test:: ';

export function run(): Promise<void> {
  return runSuites(__dirname, 'integration');
}

/** Runs the suites (`*.test.js`) of `dir`; the closing line is labelled `label`. */
export async function runSuites(dir: string, label: string): Promise<void> {
  Mocha.reporters.Base.consoleLog = (...args: unknown[]) => console.log(MARK + util.format(...args).split('\n').join(`\n${MARK}`));
  const mocha = new Mocha({
    ui: 'bdd',
    color: false,
    timeout: 30_000,
    slow: 2_000,
    reporter: path.join(__dirname, '..', 'reporter.js'),
    reporterOptions: { label },
  });
  const grep = process.env['DEVSERVER_STAGING_TEST_GREP'];
  if (grep) mocha.grep(grep);
  for (const f of fs.readdirSync(dir).sort()) if (f.endsWith('.test.js')) mocha.addFile(path.join(dir, f));
  const failures = await new Promise<number>((resolve) => mocha.run(resolve));
  if (failures > 0) throw new Error(`${failures} ${label} test(s) failed.`);
}
