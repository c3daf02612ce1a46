/**
 * Mocha's spec reporter plus one closing line, `N passed, N failed, N skipped`, that CI systems
 * and humans can read the same way.
 */
import Mocha = require('mocha');

class SpecWithSummary extends Mocha.reporters.Spec {
  constructor(runner: Mocha.Runner, options?: Mocha.MochaOptions) {
    super(runner, options);
    const label = String((options?.reporterOptions as Record<string, string | undefined> | undefined)?.['label'] ?? 'unit');
    runner.once(Mocha.Runner.constants.EVENT_RUN_END, () => {
      const s = runner.stats;
      if (s === undefined) return;
      // Through mocha's own console hook, as the spec reporter prints: inside VS Code the test
      // index points it where the runner can read it.
      Mocha.reporters.Base.consoleLog(`\n${label}: ${s.passes} passed, ${s.failures} failed, ${s.pending} skipped`);
    });
  }
}

export = SpecWithSummary;
