/**
 * Mocha's spec reporter plus one closing line, `N passed, N failed, N skipped`, that CI systems
 * and humans can read the same way.
 */
import Mocha = require('mocha');

class SpecWithSummary extends Mocha.reporters.Spec {
  constructor(runner: Mocha.Runner, options?: Mocha.MochaOptions) {
    super(runner, options);
    runner.once(Mocha.Runner.constants.EVENT_RUN_END, () => {
      const s = runner.stats;
      if (s === undefined) return;
      process.stdout.write(`\nunit: ${s.passes} passed, ${s.failures} failed, ${s.pending} skipped\n`);
    });
  }
}

export = SpecWithSummary;
