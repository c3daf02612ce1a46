// The unit suite, three files at a time: most files spend their time waiting on processes they
// stopped, heartbeats and thresholds rather than computing, so three of them share the two cores
// a CI runner has. Mocha hands the files out in the order listed: the longest go first, so that
// the lines end close together rather than one finishing a long file alone.
const fs = require('fs');
const path = require('path');

const DIR = path.join('out', 'test', 'unit');
const LONGEST_FIRST = ['attack-pause', 'concurrency', 'faults', 'attack-kills', 'attack-lost-lock', 'tags-fuzz', 'watch-reader', 'attack-line'];

function testFiles(dir) {
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? testFiles(path.join(dir, e.name)) : e.name.endsWith('.test.js') ? [path.join(dir, e.name)] : []))
    .sort();
}

const all = testFiles(DIR);
const first = LONGEST_FIRST.flatMap((name) => all.filter((f) => path.basename(f) === `${name}.test.js`));

module.exports = {
  spec: all.length === 0 ? [`${DIR}/**/*.test.js`] : [...first, ...all.filter((f) => !first.includes(f))],
  parallel: true,
  jobs: 3,
  timeout: 60000,
  slow: 5000,
  reporter: './out/test/reporter.js',
  exit: true,
};
