/**
 * Copying and hashing local files in worker threads.
 *
 * Staging a build copies thousands of small files and a few large ones, and hashes every byte.
 * On the main thread each small file cost a dozen calls in sequence (open, read, create, write,
 * close, and the hash between them) and held the event loop for all of it; a large one went
 * through the thread pool chunk by chunk while another thread read it a second time to hash it.
 * Here each worker takes a file (or a batch of small ones, so that one message carries many),
 * opens it once, reads each chunk once, hashes it and writes it to its place in the work
 * directory, all with synchronous calls of microseconds: two workers copy two files at a time,
 * and the main thread only walks the source and keeps the books.
 *
 * The rules of copy.ts hold in the worker: the source is opened without following a link and
 * without waiting on a FIFO, must be the regular file the source saw (device and inode), is read
 * through that one descriptor, and a file that changes while it is read is refused. The
 * destination is created with `O_EXCL | O_NOFOLLOW`: nothing in its place is ever written through.
 */
import * as os from 'os';
import * as path from 'path';
import { Worker } from 'worker_threads';
import type { TreeSize } from './types';

/** What the source saw of a local file when it looked at it (its directory walk). */
export interface SeenFile {
  dev: number;
  ino: number;
  size: number;
  mtimeMs: number;
}

export interface CopyTask {
  /** The source file. */
  src: string;
  /** Where the copy goes: created, never replaced. */
  dest: string;
  /** The file the source saw; without it (a copy of a file of this staging), any regular file is taken. */
  seen?: SeenFile;
  /** Its size as far as known: how the pool schedules it (a large file has a worker to itself). */
  size: number;
  /**
   * The work directory as named through the lock, and its inode: looked at before each file is
   * created (and now and then during a large one), so that a holder whose lock was taken away
   * stops writing into it at once (see journal.ts).
   */
  fence?: { path: string; ino: number };
}

export interface Copied {
  size: number;
  sha256: string;
  /** The source file as the worker left it: a large file is checked once more against it. */
  end: { ino: number; size: number; mtimeMs: number };
  /** The copy's inode: what the commit checks it moves (journal.ts). */
  ino: number;
}

/** Why a copy failed (see `CopyFailure`). */
type FailSide = 'changed' | 'source' | 'dest' | 'stopped' | 'lost';

/**
 * Why a copy failed: `changed` (the source is not the file the walk saw, or changed while it was
 * read), `source` (reading it failed), `dest` (writing the copy failed), `stopped` (the pool was
 * stopped), `lost` (the lock no longer holds the work directory). `cause` is the system error,
 * where there was one.
 */
export class CopyFailure extends Error {
  constructor(
    readonly side: FailSide,
    override readonly cause?: NodeJS.ErrnoException,
  ) {
    super(cause?.message ?? side);
  }
}

/** Up to this size a file is read whole, hashed and written in one go (the same in copy.ts). */
export const SMALL_MAX = 1024 * 1024;
/**
 * Larger files are copied in chunks of this size: small enough to stay in the core's cache
 * between the read, the hash and the write, and the stop flag is looked at between them.
 */
const CHUNK = 256 * 1024;
/** A large file's progress is sent this often (bytes). */
const PROGRESS_EVERY = 8 * 1024 * 1024;
/** Small files per message: enough to make the message's cost vanish, few enough to keep both workers fed. */
const BATCH = 16;
/** Batches a worker may have queued: the next one is there when it finishes the last. */
const BATCHES_PER_WORKER = 2;
/** Measuring a source tree gives up after this long (progress then has no total). */
const MEASURE_MS = 10_000;

interface WorkerData {
  small: number;
  chunk: number;
  progressEvery: number;
  measureMs: number;
}

interface CopyJob {
  id: number;
  src: string;
  dest: string;
  seen?: SeenFile;
  fence?: { path: string; ino: number };
  /** `dest` was created already (empty, by the creating worker) as this inode: opened, not created. */
  created?: number;
}

/** `stop`: the calling staging's flag, set when it stops (looked at between files and chunks). */
type ToWorker = { stop: SharedArrayBuffer } & ({ copy: CopyJob[] } | { create: CopyJob[] } | { measure: { id: number; dirs: string[] } });

interface ErrorShape {
  message: string;
  code?: string;
  path?: string;
  syscall?: string;
}

type Result =
  | { id: number; size: number; sha256: string; end: Copied['end']; ino: number }
  | { id: number; failed: FailSide; error?: ErrorShape }
  | { id: number; total: TreeSize | null }
  | { id: number; created: number };

type FromWorker = { results: Result[] } | { id: number; progress: number };

/**
 * The worker, as a function: its text is what the worker runs (the bundle needs no separate
 * file). It uses nothing from around it.
 */
function workerMain(): void {
  // The worker runs this function's text alone, so it loads what it uses itself.
  /* eslint-disable @typescript-eslint/no-require-imports */
  const threads = require('worker_threads') as typeof import('worker_threads');
  const fs = require('fs') as typeof import('fs');
  const crypto = require('crypto') as typeof import('crypto');
  /* eslint-enable @typescript-eslint/no-require-imports */
  const C = fs.constants;
  const data = threads.workerData as WorkerData;
  let stop = new Int32Array(new SharedArrayBuffer(4));
  const whole = Buffer.allocUnsafe(data.small + 1);
  let chunk: Buffer | undefined;
  const port = threads.parentPort!;

  class Fail extends Error {
    constructor(
      readonly side: FailSide,
      readonly err?: unknown,
    ) {
      super(side);
    }
  }
  /** Throws unless the lock still holds the work directory (a check before writing; the commit's renames are the fence). */
  const fenced = (job: CopyJob): void => {
    if (job.fence === undefined) return;
    let ino: number | undefined;
    try {
      ino = fs.lstatSync(job.fence.path).ino;
    } catch {
      ino = undefined;
    }
    if (ino !== job.fence.ino) throw new Fail('lost');
  };
  const shape = (err: unknown): ErrorShape => {
    const e = err as NodeJS.ErrnoException;
    const out: ErrorShape = { message: String(e?.message ?? err) };
    if (typeof e?.code === 'string') out.code = e.code;
    if (typeof e?.path === 'string') out.path = e.path;
    if (typeof e?.syscall === 'string') out.syscall = e.syscall;
    return out;
  };
  const tryOr = <T>(side: 'source' | 'dest', fn: () => T): T => {
    try {
      return fn();
    } catch (err) {
      throw new Fail(side, err);
    }
  };
  const writeAll = (fd: number, buf: Buffer, n: number): void => {
    for (let off = 0; off < n; ) off += fs.writeSync(fd, buf, off, n - off);
  };

  /**
   * The copy's file: made now (after a look through the lock), or the one the creating worker made,
   * which must still be that inode (writing into it adds nothing to a lock being removed).
   */
  function openDest(job: CopyJob): number {
    if (job.created === undefined) {
      fenced(job);
      return tryOr('dest', () => fs.openSync(job.dest, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o666));
    }
    const fd = tryOr('dest', () => fs.openSync(job.dest, C.O_WRONLY | C.O_NOFOLLOW | C.O_NONBLOCK));
    let st: import('fs').Stats | undefined;
    try {
      st = fs.fstatSync(fd);
    } catch {
      st = undefined;
    }
    // The file made for this copy, and with no other name: a hard link made to it since may be outside.
    const why = st?.ino !== job.created ? 'was replaced in the work directory' : st.nlink !== 1 ? `has ${st.nlink} hard links now (other names, perhaps outside)` : undefined;
    if (why !== undefined) {
      fs.closeSync(fd);
      throw new Fail('dest', Object.assign(new Error(`${job.dest} ${why}`), { code: 'EEXIST' }));
    }
    return fd;
  }

  /** Makes the copy's file, empty, and lets it go: the copying worker opens it by name (a descriptor is only closed where it was opened). */
  function create(job: CopyJob): Result {
    if (Atomics.load(stop, 0) !== 0) throw new Fail('stopped');
    fenced(job);
    const fd = tryOr('dest', () => fs.openSync(job.dest, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o666));
    try {
      return { id: job.id, created: tryOr('dest', () => fs.fstatSync(fd).ino) };
    } finally {
      fs.closeSync(fd);
    }
  }

  function copy(job: CopyJob): Result {
    if (Atomics.load(stop, 0) !== 0) throw new Fail('stopped');
    let input: number;
    try {
      input = fs.openSync(job.src, C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK);
    } catch (err) {
      // A link where the file was: exchanged since the source saw it.
      throw new Fail((err as NodeJS.ErrnoException).code === 'ELOOP' ? 'changed' : 'source', err);
    }
    let output: number | undefined;
    try {
      const st = tryOr('source', () => fs.fstatSync(input));
      const seen = job.seen;
      if (!st.isFile() || (seen !== undefined && (st.dev !== seen.dev || st.ino !== seen.ino))) throw new Fail('changed');
      const hash = crypto.createHash('sha256');
      let size = 0;
      if (st.size <= data.small) {
        // One byte more than its size: a file that grew since it was opened is read to its end and told.
        for (let got = -1; got !== 0 && size < st.size + 1; size += got) got = tryOr('source', () => fs.readSync(input, whole, size, st.size + 1 - size, size));
        if (size > st.size) throw new Fail('changed');
        hash.update(whole.subarray(0, size));
        output = openDest(job);
        const out = output;
        tryOr('dest', () => writeAll(out, whole, size));
      } else {
        if (seen !== undefined && seen.size <= data.small) throw new Fail('changed'); // grew past a small file since the walk
        const buf = (chunk ??= Buffer.allocUnsafe(data.chunk));
        output = openDest(job);
        const out = output;
        let told = 0;
        for (;;) {
          if (Atomics.load(stop, 0) !== 0) throw new Fail('stopped');
          const n = tryOr('source', () => fs.readSync(input, buf, 0, buf.length, size));
          if (n === 0) break;
          hash.update(buf.subarray(0, n));
          tryOr('dest', () => writeAll(out, buf, n));
          size += n;
          // Growing while it is read: stop now, rather than copy a file that may never end.
          if (size > st.size) throw new Fail('changed');
          if (size - told >= data.progressEvery) {
            told = size;
            fenced(job);
            port.postMessage({ id: job.id, progress: size } satisfies FromWorker);
          }
        }
      }
      // A large file must be as the walk saw it, as it was opened, and as long as what was read;
      // a small one was read whole in one go, so what was read is what is hashed and written.
      const end = st.size <= data.small ? st : tryOr('source', () => fs.fstatSync(input));
      const same = (a: { ino: number; size: number; mtimeMs: number }): boolean => a.ino === end.ino && a.size === end.size && a.mtimeMs === end.mtimeMs;
      if (end !== st && (!same(st) || (seen !== undefined && !same(seen)) || size !== end.size)) throw new Fail('changed');
      const fd = output;
      const ino = job.created ?? tryOr('dest', () => fs.fstatSync(fd).ino);
      output = undefined;
      tryOr('dest', () => fs.closeSync(fd)); // a network filesystem may report a failed write only here
      return { id: job.id, size, sha256: hash.digest('hex'), end: { ino: end.ino, size: end.size, mtimeMs: end.mtimeMs }, ino };
    } finally {
      fs.closeSync(input);
      if (output !== undefined) {
        try {
          fs.closeSync(output);
        } catch {
          /* the copy failed already */
        }
      }
    }
  }

  /**
   * Bytes of the regular files below `dirs` (links not followed), how many files and links there
   * are (the artifacts a staging of them records) and the bytes of their names relative to the
   * directory given; null if it takes too long.
   */
  function measure(dirs: string[]): TreeSize | null {
    const deadline = Date.now() + data.measureMs;
    const total = { bytes: 0, artifacts: 0, nameBytes: 0 };
    const stack = dirs.map((d) => ({ d, rel: '' }));
    while (stack.length > 0) {
      if (Date.now() > deadline || Atomics.load(stop, 0) !== 0) return null;
      const { d, rel } = stack.pop()!;
      let entries: import('fs').Dirent[];
      try {
        entries = fs.readdirSync(d, { withFileTypes: true });
      } catch {
        continue;
      }
      for (const ent of entries) {
        const p = `${d}/${ent.name}`;
        const name = `${rel}${ent.name}`;
        if (ent.isDirectory()) {
          stack.push({ d: p, rel: `${name}/` });
          continue;
        }
        if (!ent.isFile() && !ent.isSymbolicLink()) continue;
        total.artifacts++;
        total.nameBytes += Buffer.byteLength(name);
        if (ent.isFile()) total.bytes += fs.lstatSync(p, { throwIfNoEntry: false })?.size ?? 0;
      }
    }
    return total;
  }

  port.on('message', (msg: ToWorker) => {
    stop = new Int32Array(msg.stop);
    if ('measure' in msg) {
      let total: TreeSize | null = null;
      try {
        total = measure(msg.measure.dirs);
      } catch {
        total = null;
      }
      port.postMessage({ results: [{ id: msg.measure.id, total }] } satisfies FromWorker);
      return;
    }
    const results: Result[] = [];
    const creating = 'create' in msg;
    for (const job of creating ? msg.create : msg.copy) {
      try {
        results.push(creating ? create(job) : copy(job));
      } catch (err) {
        if (err instanceof Fail) results.push(err.err === undefined ? { id: job.id, failed: err.side } : { id: job.id, failed: err.side, error: shape(err.err) });
        else results.push({ id: job.id, failed: 'source', error: shape(err) });
      }
    }
    port.postMessage({ results } satisfies FromWorker);
  });
}

const WORKER_SOURCE = `(${workerMain.toString()})();`;

interface Job {
  id: number;
  pool: CopyPool;
  message: CopyJob | { measure: string[] };
  large: boolean;
  /** The staging and the directory it writes into: small files are batched by it. */
  key: string;
  /** A small file is first made (by the one worker making files), then copied. */
  phase: 'create' | 'copy';
  resolve(r: Result): void;
  reject(err: Error): void;
  onProgress?: (bytes: number) => void;
}

interface Slot {
  worker: Worker;
  /** Jobs sent to it and not answered yet. */
  jobs: Map<number, Job>;
  /** The keys of the batches sent to it and not answered yet, oldest first (it answers in order). */
  batches: string[];
  /** It has a large file or a measurement: nothing more until it is done. */
  busy: boolean;
}

/** Workers where there are cores for them beside the main thread; two on the smallest machines. */
function defaultWorkers(): number {
  const cores = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
  return Math.max(2, Math.min(4, cores));
}

/** Idle workers are ended after this long without a job. */
const IDLE_MS = 30_000;
/** Small files made per message by the worker making them. */
const CREATE_BATCH = 32;

/**
 * The process's copying workers, shared by its stagings: starting a worker costs tens of
 * milliseconds (hundreds on a loaded machine), as much as staging many small files. Idle, they
 * keep nothing alive (unref'd) and end after `IDLE_MS`.
 */
class Workers {
  private readonly slots: Slot[] = [];
  /**
   * Small files whose copies are still to be made, by staging and directory, oldest first. Making
   * a file is, on some filesystems, most of a small file's cost, and the kernel makes one at a
   * time there (two threads creating files take turns and spin while they wait): so one worker
   * at a time makes them, a batch after another, while the others read, hash and write.
   */
  private readonly toCreate = new Map<string, Job[]>();
  /** Whether a batch of files is being made. */
  private creating = false;
  /**
   * Small files ready to be copied (their copies made), by staging and directory, oldest first:
   * they go in batches of one directory, to a directory no other worker is writing into if any.
   */
  private readonly small = new Map<string, Job[]>();
  /** Large files and measurements waiting (a worker each). */
  private readonly large: Job[] = [];
  /** Batches sent and not answered, by key. */
  private readonly inFlight = new Map<string, number>();
  private nextId = 0;
  private pumpQueued = false;
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(private readonly size: number) {}

  /** Starts the workers now, so that they are ready when the first file comes. */
  warm(): void {
    while (this.slots.length < this.size) this.spawn();
    this.idleSoon();
  }

  submit(pool: CopyPool, message: Job['message'], large: boolean, onProgress?: (bytes: number) => void): Promise<Result> {
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      let key = `${pool.id}`;
      if ('src' in message) {
        message.id = id;
        key = `${pool.id}:${path.dirname(message.dest)}`;
      }
      const job: Job = { id, pool, message, large, key, phase: large ? 'copy' : 'create', resolve, reject };
      if (onProgress !== undefined) job.onProgress = onProgress;
      if (large) this.large.push(job);
      else this.enqueue(this.toCreate, job);
      // Jobs submitted together go out together.
      if (!this.pumpQueued) {
        this.pumpQueued = true;
        queueMicrotask(() => {
          this.pumpQueued = false;
          this.pump();
        });
      }
    });
  }

  private enqueue(queues: Map<string, Job[]>, job: Job): void {
    const queue = queues.get(job.key);
    if (queue === undefined) queues.set(job.key, [job]);
    else queue.push(job);
  }

  /** Fails `pool`'s jobs with `reason`: those queued are dropped, those sent are no longer waited for. */
  drop(pool: CopyPool, reason: Error): void {
    for (let i = this.large.length - 1; i >= 0; i--) if (this.large[i].pool === pool) this.large.splice(i, 1)[0].reject(reason);
    for (const queues of [this.toCreate, this.small]) {
      for (const [key, queue] of queues) {
        if (queue[0].pool !== pool) continue;
        queues.delete(key);
        for (const job of queue) job.reject(reason);
      }
    }
    for (const slot of this.slots) for (const job of slot.jobs.values()) if (job.pool === pool) job.reject(reason);
  }

  /** Whether a worker still has a job of `pool` in hand. */
  busyWith(pool: CopyPool): boolean {
    return this.slots.some((slot) => [...slot.jobs.values()].some((job) => job.pool === pool));
  }

  /**
   * Sends queued jobs to workers with room. Small files are made first, one batch at a time, on
   * the worker with the least in hand. A large file goes ahead of small ones, to a worker that is
   * given nothing more until it has finished what it has; but while small files wait, one worker
   * at least stays with them: hashing a large file keeps a core busy, while a small file's time
   * is mostly the filesystem's, so the two overlap well side by side. Small files are copied in
   * batches of one directory, to a directory no other worker is writing into if any.
   */
  private pump(): void {
    if (this.toCreate.size === 0 && this.small.size === 0 && this.large.length === 0) return;
    this.warm();
    for (;;) {
      const free = this.slots.filter((s) => !s.busy);
      const least = (except?: Slot): Slot | undefined => {
        let best: Slot | undefined;
        for (const s of free) if (s !== except && s.batches.length < BATCHES_PER_WORKER && (best === undefined || s.batches.length < best.batches.length)) best = s;
        return best;
      };
      let reserved: Slot | undefined;
      if (this.large.length > 0 && ((this.small.size === 0 && this.toCreate.size === 0) || free.length > 1)) {
        for (const s of free) if (reserved === undefined || s.batches.length < reserved.batches.length) reserved = s;
        if (reserved !== undefined && reserved.batches.length === 0) {
          reserved.busy = true;
          this.send(reserved, [this.large.shift()!]);
          continue;
        }
      }
      if (!this.creating && this.toCreate.size > 0) {
        const slot = least(reserved) ?? least();
        if (slot !== undefined) {
          const [key, queue] = this.toCreate.entries().next().value!;
          const batch = queue.splice(0, CREATE_BATCH);
          if (queue.length === 0) this.toCreate.delete(key);
          this.creating = true;
          this.send(slot, batch);
          continue;
        }
      }
      if (this.small.size === 0) return;
      const slot = least(reserved);
      if (slot === undefined) return;
      let key: string | undefined;
      for (const k of this.small.keys()) {
        if ((this.inFlight.get(k) ?? 0) === 0) {
          key = k;
          break;
        }
      }
      key ??= this.small.keys().next().value!;
      const queue = this.small.get(key)!;
      const batch = queue.splice(0, BATCH);
      if (queue.length === 0) this.small.delete(key);
      this.send(slot, batch);
    }
  }

  private send(slot: Slot, jobs: Job[]): void {
    const head = jobs[0];
    // Batches of files being made do not count as writing into their directory.
    const key = head.phase === 'create' ? `+${head.key}` : head.key;
    slot.batches.push(key);
    this.inFlight.set(key, (this.inFlight.get(key) ?? 0) + 1);
    for (const job of jobs) slot.jobs.set(job.id, job);
    slot.worker.ref();
    const stop = head.pool.stopFlag;
    const messages = jobs.map((j) => j.message as CopyJob);
    const msg: ToWorker =
      'measure' in head.message ? { stop, measure: { id: head.id, dirs: head.message.measure } } : head.phase === 'create' ? { stop, create: messages } : { stop, copy: messages };
    slot.worker.postMessage(msg);
  }

  /** A batch of `slot` was answered (the oldest: a worker answers in order). */
  private answered(slot: Slot): void {
    const key = slot.batches.shift();
    if (key === undefined) return;
    const n = (this.inFlight.get(key) ?? 1) - 1;
    if (n > 0) this.inFlight.set(key, n);
    else this.inFlight.delete(key);
  }

  private spawn(): void {
    const data: WorkerData = { small: SMALL_MAX, chunk: CHUNK, progressEvery: PROGRESS_EVERY, measureMs: MEASURE_MS };
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: data });
    const slot: Slot = { worker, jobs: new Map(), batches: [], busy: false };
    worker.on('message', (msg: FromWorker) => {
      if ('progress' in msg) {
        slot.jobs.get(msg.id)?.onProgress?.(msg.progress);
        return;
      }
      for (const r of msg.results) {
        const job = slot.jobs.get(r.id);
        if (job === undefined) continue;
        slot.jobs.delete(r.id);
        if (job.large) slot.busy = false;
        if (job.phase === 'create') this.creating = false;
        if ('created' in r) {
          // Made: now to be copied into, unless its staging stopped meanwhile.
          if (!job.pool.stopping) {
            (job.message as CopyJob).created = r.created;
            job.phase = 'copy';
            this.enqueue(this.small, job);
          }
        } else job.resolve(r);
        job.pool.settled();
      }
      this.answered(slot);
      if (slot.jobs.size === 0) {
        worker.unref();
        this.idleSoon();
      }
      this.pump();
    });
    const lost = (err: Error): void => {
      const i = this.slots.indexOf(slot);
      if (i >= 0) this.slots.splice(i, 1);
      const jobs = [...slot.jobs.values()];
      slot.jobs.clear();
      if (jobs.some((j) => j.phase === 'create')) this.creating = false;
      while (slot.batches.length > 0) this.answered(slot);
      for (const job of jobs) {
        job.reject(err);
        job.pool.settled();
      }
      this.pump();
    };
    worker.on('error', lost);
    worker.on('exit', (code) => lost(new Error(`a copying worker stopped (exit code ${code})`)));
    // Referenced only while it has jobs: an idle worker must not keep the process alive, but one
    // at work may be all that does (a command-line staging awaiting its copies). After the
    // listeners: listening to a worker's messages references it again.
    worker.unref();
    this.slots.push(slot);
  }

  /** Ends the workers once none has had a job for `IDLE_MS`. */
  private idleSoon(): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      if (this.toCreate.size > 0 || this.small.size > 0 || this.large.length > 0 || this.slots.some((s) => s.jobs.size > 0)) return this.idleSoon();
      for (const slot of this.slots.splice(0)) {
        slot.worker.removeAllListeners('exit');
        void slot.worker.terminate().catch(() => undefined);
      }
    }, IDLE_MS);
    this.idleTimer.unref();
  }
}

let shared: Workers | undefined;

function workers(): Workers {
  shared ??= new Workers(defaultWorkers());
  return shared;
}

/** Starts the copying workers ahead of a staging (they take a while to start). */
export function warmCopyWorkers(): void {
  workers().warm();
}

let pools = 0;

/** One staging call's use of the copying workers. */
export class CopyPool {
  readonly id = pools++;
  /** Set to 1 when this call stops: the workers look at it between files and chunks. */
  readonly stopFlag = new SharedArrayBuffer(4);
  private stopped?: Error;

  /** Whether it was stopped (its jobs are failed already). */
  get stopping(): boolean {
    return this.stopped !== undefined;
  }
  private drained?: () => void;

  /** Copies one file (see the module's comment); `onProgress` hears the bytes of a large one now and then. */
  copy(task: CopyTask, onProgress?: (bytes: number) => void): Promise<Copied> {
    const message: CopyJob = { id: 0, src: task.src, dest: task.dest };
    if (task.seen !== undefined) message.seen = task.seen;
    if (task.fence !== undefined) message.fence = task.fence;
    return this.submit(message, task.size > SMALL_MAX, onProgress).then((r) => {
      if ('failed' in r) {
        const cause = r.error === undefined ? undefined : Object.assign(new Error(r.error.message), r.error);
        throw new CopyFailure(r.failed, cause);
      }
      if (!('sha256' in r)) throw new CopyFailure('source');
      return { size: r.size, sha256: r.sha256, end: r.end, ino: r.ino };
    });
  }

  /** What is below the directories `dirs`, not following links (see `TreeSize`); undefined if it takes too long. */
  measure(dirs: string[]): Promise<TreeSize | undefined> {
    return this.submit({ measure: dirs }, true).then((r) => ('total' in r && r.total !== null ? r.total : undefined));
  }

  /**
   * Stops at once: what is queued or being copied fails with `reason` now, and the workers stop
   * at their next file or chunk. `close` waits until they have.
   */
  stop(reason: Error): void {
    if (this.stopped !== undefined) return;
    this.stopped = reason;
    Atomics.store(new Int32Array(this.stopFlag), 0, 1);
    workers().drop(this, reason);
  }

  /** Stops, and resolves once no worker writes anything for this call any more. */
  async close(): Promise<void> {
    this.stop(new CopyFailure('stopped'));
    if (shared === undefined || !shared.busyWith(this)) return;
    await new Promise<void>((resolve) => (this.drained = resolve));
  }

  /** @internal A job of this call has been answered (or its worker lost). */
  settled(): void {
    if (this.drained !== undefined && !shared!.busyWith(this)) {
      const done = this.drained;
      this.drained = undefined;
      done();
    }
  }

  private submit(message: Job['message'], large: boolean, onProgress?: (bytes: number) => void): Promise<Result> {
    if (this.stopped !== undefined) return Promise.reject(this.stopped);
    return workers().submit(this, message, large, onProgress);
  }
}
