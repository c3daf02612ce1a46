/**
 * The worker threads the core starts (the copying workers, the hashers, the watches): each runs a
 * file of its own, in TypeScript like the rest, and speaks a protocol typed on both sides, in a
 * file beside it. Code handed to a thread as a string would escape the compiler and the linter.
 *
 * Where the worker files are: scripts/build.mjs bundles each to dist/<name>.js, once, beside the
 * bundles that start them (the extension's, the library's); the command line's per-command bundles
 * in dist/cli/ are built with `__WORKERS_DIR__` set to '..'. Compiled by tsc (out/, the unit
 * tests), a worker's file is beside the module that starts it.
 */
import * as path from 'path';
import { parentPort, Worker, type WorkerOptions } from 'worker_threads';

declare const __WORKERS_DIR__: string | undefined;

/** The worker file `name`.js, for a module whose `__dirname` is `dir`. */
export function workerFile(dir: string, name: string): string {
  return path.join(dir, typeof __WORKERS_DIR__ === 'string' ? __WORKERS_DIR__ : '.', `${name}.js`);
}

/** A worker thread that is sent `To` (its answers go to the listener given to `startThread`). */
export type Thread<To> = Omit<Worker, 'postMessage'> & { postMessage(message: To): void };

/** Starts the worker `script`; `onMessage` hears its answers, `From`. */
export function startThread<To, From>(script: string, onMessage: (message: From) => void, options?: WorkerOptions): Thread<To> {
  const worker = new Worker(script, options);
  worker.on('message', onMessage);
  return worker;
}

/** A worker's end of its protocol: it is sent `To` and answers `From`. */
export interface ThreadPort<To, From> {
  post(message: From): void;
  onMessage(listener: (message: To) => void): void;
}

/** The end of the protocol in this thread, which must be the worker `name` (started by `startedBy`). */
export function threadPort<To, From>(name: string, startedBy: string): ThreadPort<To, From> {
  const port = parentPort;
  if (port === null) throw new Error(`${name}.js runs as a worker thread of ${startedBy}.`);
  return {
    post: (message) => port.postMessage(message),
    onMessage: (listener) => void port.on('message', listener),
  };
}
