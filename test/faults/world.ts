/**
 * The place a fault run happens: a small ext4 disk exported by a private sshd and mounted by two
 * sshfs clients, each with a hostname for its processes; on the disk the static directory, the
 * fenced log beside it (outside the static directory) and a canary tree, and another canary tree
 * off the disk. sshfs itself can crash under this load (3.7.3 has segfaulted here inside glib):
 * a client host that goes down. A watch notices, records it and mounts the client again.
 */
import * as fs from 'fs';
import * as path from 'path';
import { changes, fingerprint, plantCanaries } from '../attack';
import { isMounted, startSshfs, type SshfsExport } from '../sshfs';
import type { Violation } from './check';
import { SmallDisk } from '../disk';
import type { Client } from './ops';
import { sleep } from './procs';

export const STATIC = 'static';
export const LOG = 'faultlog';
const CANARY = 'canary';

export interface Crash {
  atMs: number;
  client: string;
  what: string;
}

export class FaultWorld {
  readonly crashes: Crash[] = [];
  private watching: Promise<void> | undefined;
  private stopWatch = false;
  private canariesBefore: Map<string, string>[] = [];

  private constructor(
    readonly base: string,
    readonly disk: SmallDisk,
    readonly server: SshfsExport,
    readonly clients: Client[],
  ) {}

  get exportDir(): string {
    return this.disk.dir;
  }

  get serverStatic(): string {
    return path.join(this.exportDir, STATIC);
  }

  get serverLog(): string {
    return path.join(this.exportDir, LOG);
  }

  /** The canary trees: beside the static directory on its disk, and off that disk. */
  private get canaries(): string[] {
    return [path.join(this.exportDir, CANARY), path.join(this.base, 'outside')];
  }

  /** Builds it all under `base` (an empty directory of the test's own); `folder` is made in the static directory. */
  static async make(base: string, folder: string): Promise<FaultWorld> {
    const exportDir = path.join(base, 'export');
    fs.mkdirSync(exportDir);
    const disk = await SmallDisk.make(path.join(base, 'disk.img'), exportDir, { sizeMiB: 192, inodes: 160_000, inlineData: true });
    fs.mkdirSync(path.join(exportDir, STATIC, folder), { recursive: true });
    fs.mkdirSync(path.join(exportDir, LOG));
    const server = await startSshfs('dss-faults-sshfs-', exportDir);
    const clients: Client[] = [
      { name: 'a', host: 'fault-a', mount: server.mountA },
      { name: 'b', host: 'fault-b', mount: server.mountB },
    ];
    const world = new FaultWorld(base, disk, server, clients);
    for (const dir of world.canaries) plantCanaries(dir);
    world.canariesBefore = world.canaries.map((d) => fingerprint(d));
    return world;
  }

  /** Watches the clients' sshfs processes, mounting a client again when its process has ended. */
  watch(): void {
    const t0 = performance.now();
    const pids = new Map(this.clients.map((c) => [c.name, this.server.sshfsPid(c.mount)]));
    this.watching = (async () => {
      while (!this.stopWatch) {
        for (const c of this.clients) {
          const pid = pids.get(c.name);
          const what = pid === undefined ? undefined : await this.server.remountIfDead(c.mount, pid);
          if (what === undefined) continue;
          this.crashes.push({ atMs: Math.round(performance.now() - t0), client: c.name, what });
          pids.set(c.name, this.server.sshfsPid(c.mount));
        }
        await sleep(500);
      }
    })();
  }

  async unwatch(): Promise<void> {
    this.stopWatch = true;
    await this.watching;
  }

  /** Check 4: what changed outside the static directory since `make`. */
  outside(): Violation[] {
    const out: Violation[] = [];
    for (const [i, dir] of this.canaries.entries()) {
      for (const c of changes(dir, this.canariesBefore[i], fingerprint(dir))) out.push({ check: 4, kind: 'outside-changed', detail: c });
    }
    const expected = new Set([STATIC, LOG, CANARY, 'lost+found']);
    for (const name of fs.readdirSync(this.exportDir)) {
      if (!expected.has(name) && !name.startsWith('filler.')) out.push({ check: 4, kind: 'outside-created', detail: `${path.join(this.exportDir, name)} appeared beside the static directory` });
    }
    return out;
  }

  /** Unmounts and removes everything; whether it could (a busy mount is left, and said so). */
  async close(): Promise<boolean> {
    await this.unwatch();
    await this.server.stop();
    const unmounted = this.clients.every((c) => !isMounted(c.mount));
    const diskGone = await this.disk.unmount();
    return unmounted && diskGone;
  }
}
