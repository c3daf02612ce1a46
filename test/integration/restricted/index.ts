/** Loaded by VS Code's extension host in Restricted Mode: runs this folder's suites (see ../run.mjs). */
import { runSuites } from '../index';

export function run(): Promise<void> {
  return runSuites(__dirname, 'restricted');
}
