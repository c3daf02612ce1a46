/**
 * A co-user who grows a file the moment another process starts reading it:
 *   node grow.js FILE SIZE
 * prints `ready` once it watches FILE (inotify, IN_ACCESS), and when a reader first reads FILE,
 * makes it SIZE bytes (sparse) and prints `grown`; on SIGTERM it puts the old size back and exits.
 * inotify is reached through koffi, an npm package with prebuilt binaries: no compiler needed.
 * `node grow.js --check` exits 0 when that works here.
 */
import * as fs from 'fs';

interface Koffi {
  load(lib: string): { func(signature: string): (...args: unknown[]) => number };
}

const IN_ACCESS = 0x1;

function inotify(): { init(): number; watch(fd: number, file: string, mask: number): number } {
  // Loaded by name at run time: a node_modules without koffi must still compile the tests.
  const koffi = require('koffi') as Koffi;
  const libc = koffi.load('libc.so.6');
  const init = libc.func('int inotify_init(void)');
  const watch = libc.func('int inotify_add_watch(int fd, const char *pathname, uint32_t mask)');
  return { init: () => init(), watch: (fd, file, mask) => watch(fd, file, mask) };
}

function main(): void {
  const args = process.argv.slice(2);
  const api = inotify();
  if (args[0] === '--check') return;
  const [file, size] = args as [string, string];
  const fd = fs.openSync(file, fs.constants.O_WRONLY);
  const before = fs.fstatSync(fd).size;
  // Heard once the blocking read below has returned: the file is put back however early it came.
  process.on('SIGTERM', () => {
    fs.ftruncateSync(fd, before);
    process.exit(0);
  });
  const watcher = api.init();
  if (watcher < 0 || api.watch(watcher, file, IN_ACCESS) < 0) process.exit(1);
  process.stdout.write('ready\n');
  // Blocks this process until the first read of the file: nothing else is to be done meanwhile.
  if (fs.readSync(watcher, Buffer.alloc(4096)) <= 0) process.exit(1);
  fs.ftruncateSync(fd, Number(size));
  process.stdout.write('grown\n');
  // Wait for SIGTERM.
  setInterval(() => undefined, 1 << 30);
}

main();
