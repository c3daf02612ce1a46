/**
 * Exchanges two names with renameat2(RENAME_EXCHANGE) in a tight loop, as a co-user racing a
 * command would, without a C compiler: libc's renameat2 is called through koffi, a foreign-function
 * interface whose npm package ships prebuilt binaries.
 *   node exchange.js A B [LIMIT]
 * Stops after LIMIT exchanges, or on SIGTERM; then prints how many it made. Stopped by SIGTERM, it
 * leaves both names as they were (one more exchange, not counted, when the count is odd).
 * `node exchange.js --check` exits 0 when renameat2 can be called here.
 */
interface Koffi {
  load(lib: string): { func(signature: string): (...args: unknown[]) => number };
}

const AT_FDCWD = -100;
const RENAME_EXCHANGE = 2;
/** Calls between two looks at the event loop, where SIGTERM is heard: a few milliseconds' worth. */
const BATCH = 2_000;

function renameat2(): (a: string, b: string) => () => boolean {
  // Loaded by name at run time: a node_modules without koffi must still compile the tests.
  const koffi = require('koffi') as Koffi;
  const call = koffi.load('libc.so.6').func('int renameat2(int olddirfd, const void *oldpath, int newdirfd, const void *newpath, unsigned int flags)');
  return (a, b) => {
    // The paths as C strings once, not at every call: the loop must be as tight as the C one.
    const [ca, cb] = [Buffer.from(`${a}\0`), Buffer.from(`${b}\0`)];
    return () => call(AT_FDCWD, ca, AT_FDCWD, cb, RENAME_EXCHANGE) === 0;
  };
}

function main(): void {
  const args = process.argv.slice(2);
  const exchange = renameat2();
  if (args[0] === '--check') return;
  const [a, b, limitArg] = args as [string, string, string | undefined];
  const once = exchange(a, b);
  const limit = limitArg === undefined ? Infinity : Number(limitArg);
  let n = 0;
  let stopped = false;
  process.on('SIGTERM', () => (stopped = true));
  const batch = (): void => {
    for (let i = 0; i < BATCH && n < limit; i++) if (once()) n++;
    if (!stopped && n < limit) {
      setImmediate(batch);
      return;
    }
    if (stopped && n % 2 === 1) once();
    process.stdout.write(`${n}\n`);
  };
  batch();
}

main();
