'use strict';
// What signal-exit (loaded by proper-lockfile) takes from Node's `assert`: one `equal`, to check
// that a handler is a function. Node's `assert` costs a command about 1 ms to load, and on
// loading makes `process.stderr` a stream to learn whether it may use colours.
function equal(actual, expected, message) {
  // Loose, as assert.equal compares.
  if (actual != expected) {
    const err = new Error(message ?? `${String(actual)} == ${String(expected)}`);
    err.code = 'ERR_ASSERTION';
    throw err;
  }
}
module.exports = { equal };
