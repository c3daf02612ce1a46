/**
 * Whether whoever reads the tool's stdout has gone, for a command that runs until stopped
 * (`watch`): `devserver-stage watch | head -1` must end once `head` has its line, not run on for
 * nobody. A write to a pipe without a reader fails with EPIPE, which tells at once; but a watch of
 * a quiet directory may write nothing for hours. Node cannot wait on a descriptor for the error
 * poll(2) reports when a pipe's reader is gone, and GNU tail does exactly that for its own stdout:
 * `tail -f --pid=PID /dev/null` writes nothing, and dies of SIGPIPE within a second of the reader
 * going (or ends with PID). It is started on the same stdout where that is a pipe; where tail is
 * missing or not GNU's (it then exits at once, not by SIGPIPE), the next write tells.
 */
import { spawn, type ChildProcess } from 'child_process';
import * as fs from 'fs';

export interface ReaderWatch {
  /** Resolves once the reader is known to be gone. */
  gone: Promise<void>;
  dispose(): void;
}

export function watchReader(stream: NodeJS.WritableStream, fd: number): ReaderWatch {
  let resolve!: () => void;
  const gone = new Promise<void>((r) => (resolve = r));
  const onError = (err: NodeJS.ErrnoException): void => {
    if (err.code === 'EPIPE') resolve();
  };
  stream.on('error', onError);
  let poller: ChildProcess | undefined;
  if (isPipe(fd)) {
    poller = spawn('tail', ['-f', `--pid=${process.pid}`, '/dev/null'], { stdio: ['ignore', fd, 'ignore'] });
    poller.on('error', () => undefined); // no tail: the next write tells
    poller.on('exit', (_code, signal) => {
      if (signal === 'SIGPIPE') resolve();
    });
    // It ends with this process (--pid) or its reader; it never keeps this one running.
    poller.unref();
  }
  return {
    gone,
    dispose() {
      stream.off('error', onError);
      if (poller?.exitCode === null && poller.signalCode === null) poller.kill();
    },
  };
}

function isPipe(fd: number): boolean {
  try {
    return fs.fstatSync(fd).isFIFO();
  } catch {
    return false;
  }
}
