/**
 * A hashing worker thread (hasher.ts hands it files, in the messages of hashProtocol.ts). The
 * file is read through the stager's own descriptor, shared by the process's threads, at explicit
 * offsets (the copy reads the same descriptor), with one fixed buffer, and left open for the
 * stager to close.
 */
import * as crypto from 'crypto';
import * as fs from 'fs';
import { threadPort } from '../base/threads';
import type { HashJob, HashReply } from './hashProtocol';

/** Read at a time. */
const BUFFER = 4 * 1024 * 1024;
/** Progress is sent each time this many bytes more are hashed. */
const PROGRESS_EVERY = 16 * 1024 * 1024;

const port = threadPort<HashJob, HashReply>('hashWorker', 'the hasher (hasher.ts)');
const buf = Buffer.allocUnsafe(BUFFER);

port.onMessage(({ id, fd, limit }) => {
  try {
    const st = fs.fstatSync(fd);
    const hash = crypto.createHash('sha256');
    let size = 0;
    for (;;) {
      const n = fs.readSync(fd, buf, 0, Math.min(buf.length, limit - size), size);
      if (n === 0) break;
      hash.update(buf.subarray(0, n));
      size += n;
      if (size % PROGRESS_EVERY === 0) port.post({ id, progress: size });
    }
    port.post({ id, size, sha256: hash.digest('hex'), opened: { ino: st.ino, size: st.size, mtimeMs: st.mtimeMs } });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException | undefined)?.code;
    port.post({ id, error: String((err as Error | undefined)?.message ?? err), ...(typeof code === 'string' ? { code } : {}) });
  }
});
