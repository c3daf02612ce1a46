/**
 * The process's copying workers, shared by its stagings: started ahead of need, handed files in
 * batches (small files made by one worker at a time, a large file a worker to itself), and ended
 * when idle.
 */
import * as os from 'os';
import * as path from 'path';
import { startThread, workerFile, type Thread } from '../base/threads';
import type { CopyJob, FromWorker, Result, ToWorker } from './copyProtocol';

/** Where the build puts the worker (base/threads.ts). */
const WORKER_SCRIPT = workerFile(__dirname, 'copyWorker');

/** Small files per message: enough to make the message's cost vanish, few enough to keep both workers fed. */
const BATCH = 16;
/** Batches a worker may have queued: the next one is there when it finishes the last. */
const BATCHES_PER_WORKER = 2;

/** What the scheduler needs of the pool a job came from: which staging it is, and whether it is stopping. */
export interface PoolSide {
  readonly id: number;
  readonly stopping: boolean;
  /** Set when the pool stops: the worker reads it between chunks. */
  readonly stopFlag: SharedArrayBuffer;
  settled(): void;
}

export interface Job {
  id: number;
  pool: PoolSide;
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
  worker: Thread<ToWorker>;
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

  submit(pool: PoolSide, message: Job['message'], large: boolean, onProgress?: (bytes: number) => void): Promise<Result> {
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
  drop(pool: PoolSide, reason: Error): void {
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
  busyWith(pool: PoolSide): boolean {
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

  /** What a worker of `slot` answered: progress, or the results of a batch. */
  private receive(slot: Slot, msg: FromWorker): void {
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
      slot.worker.unref();
      this.idleSoon();
    }
    this.pump();
  }

  private spawn(): void {
    const slot: Slot = { worker: startThread<ToWorker, FromWorker>(WORKER_SCRIPT, (msg) => this.receive(slot, msg)), jobs: new Map(), batches: [], busy: false };
    const worker = slot.worker;
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

export function workers(): Workers {
  shared ??= new Workers(defaultWorkers());
  return shared;
}

/** Whether a worker still has a job of `pool` in hand (none, if the workers were never started). */
export function busyWith(pool: PoolSide): boolean {
  return shared !== undefined && shared.busyWith(pool);
}
