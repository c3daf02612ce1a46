/**
 * The fenced log: the referee of the fault checker (test/unit/lock/faults.test.ts says why it is built
 * this way). A holder writes an entry as a small file in its work directory, named through its lock
 * (`<area>/devserver.lock/work.<token>/`), then hard-links it into the log under the next number.
 * `link` is resolved by the file server at the moment it runs: once the lock was taken away, the
 * source name leads nowhere and the link fails (ENOENT), so the entry is never accepted. Numbers
 * are taken with `link` onto a new name, which the server lets succeed once per name, each only
 * once the number below it exists: the log is dense, and its order is the order in which the
 * server accepted the writes.
 */
import * as fs from 'fs';
import * as path from 'path';

export type EntryKind = 'begin' | 'write' | 'end' | 'destroy';

const KIND_CHAR: Record<EntryKind, string> = { begin: 'b', write: 'w', end: 'e', destroy: 'd' };
const CHAR_KIND = new Map(Object.entries(KIND_CHAR).map(([k, c]) => [c, k as EntryKind]));

/** What one entry says: written by its holder, read back by the checker. */
export interface Entry {
  tag: string;
  kind: EntryKind;
  /** The lock instance: the holder record's random token (its work directory's name). */
  token: string;
  /** The fencing token the holder was given. */
  fence: number;
  /** The operation of the run that wrote it. */
  op: string;
  /** Its place in the holder's section, from 0. */
  seq: number;
}

/** An entry with its place in the log (1 for the first accepted). */
export interface LogEntry extends Entry {
  at: number;
}

/**
 * One line, short enough to live inside the inode (ext4 `inline_data` keeps up to 60 bytes there),
 * so tens of thousands of entries cost inodes, not blocks of the small disk that the run fills.
 */
export function formatEntry(e: Entry): string {
  return `${e.tag} ${KIND_CHAR[e.kind]} ${e.token} ${e.fence} ${e.op} ${e.seq}`;
}

export function parseEntry(text: string): Entry | undefined {
  const parts = text.split(' ');
  if (parts.length !== 6) return undefined;
  const [tag, k, token, fence, op, seq] = parts;
  const kind = CHAR_KIND.get(k);
  if (kind === undefined || !/^\d+$/.test(fence) || !/^\d+$/.test(seq)) return undefined;
  return { tag, kind, token, fence: Number(fence), op, seq: Number(seq) };
}

export type AppendOutcome =
  /** In the log at `at`. */
  | { outcome: 'accepted'; at: number }
  /** The work directory's name led nowhere: the fence refused it. */
  | { outcome: 'refused'; step: 'create' | 'link' }
  /** Some other failure (a full disk): not in the log. */
  | { outcome: 'failed'; step: 'create' | 'link'; code: string };

const codeOf = (err: unknown): string => (err as NodeJS.ErrnoException).code ?? String(err);

/**
 * The writing end, in a holder's process. `mountLog` is the log seen through this holder's client;
 * `serverLog` the same directory on the server, read only to guess the next free number quickly:
 * a wrong guess only costs an EEXIST and a step up, since the server decides.
 */
export class FencedLog {
  private next = 1;

  constructor(
    private readonly mountLog: string,
    private readonly serverLog: string,
  ) {}

  /** The first number the server shows free at or above our guess: every number below it is taken. */
  private firstFree(): number {
    while (fs.existsSync(path.join(this.serverLog, String(this.next)))) this.next++;
    return this.next;
  }

  async append(workDir: string, entry: Entry): Promise<AppendOutcome> {
    const file = `${workDir}/fault.${entry.op}.${entry.seq}`;
    try {
      const fh = await fs.promises.open(file, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, 0o644);
      try {
        await fh.writeFile(formatEntry(entry));
      } finally {
        await fh.close();
      }
    } catch (err) {
      return codeOf(err) === 'ENOENT' ? { outcome: 'refused', step: 'create' } : { outcome: 'failed', step: 'create', code: codeOf(err) };
    }
    try {
      return await this.link(file);
    } finally {
      // The log keeps the entry; the work directory is left as the holder found it, for its release.
      await fs.promises.unlink(file).catch(() => undefined);
    }
  }

  private async link(file: string): Promise<AppendOutcome> {
    for (;;) {
      const at = this.firstFree();
      try {
        await fs.promises.link(file, path.join(this.mountLog, String(at)));
        this.next = at + 1;
        return { outcome: 'accepted', at };
      } catch (err) {
        const code = codeOf(err);
        if (code === 'EEXIST' || fs.existsSync(path.join(this.serverLog, String(at)))) {
          this.next = at + 1;
          continue;
        }
        return code === 'ENOENT' ? { outcome: 'refused', step: 'link' } : { outcome: 'failed', step: 'link', code };
      }
    }
  }
}

/** How many entries the log holds now (it is dense): every entry up to it was accepted before this call. */
export function logLength(serverLog: string, from = 0): number {
  let n = from;
  while (fs.existsSync(path.join(serverLog, String(n + 1)))) n++;
  return n;
}

/** The whole log, in order, read on the server; `gaps` lists missing numbers and `unreadable` entries that are not ours. */
export function readLog(serverLog: string): { entries: LogEntry[]; gaps: number[]; unreadable: string[] } {
  const names = fs.readdirSync(serverLog);
  const numbers = names.filter((n) => /^[1-9]\d*$/.test(n)).map(Number).sort((a, b) => a - b);
  const unreadable = names.filter((n) => !/^[1-9]\d*$/.test(n));
  const entries: LogEntry[] = [];
  const gaps: number[] = [];
  let expected = 1;
  for (const at of numbers) {
    while (expected < at) gaps.push(expected++);
    expected = at + 1;
    const e = parseEntry(fs.readFileSync(path.join(serverLog, String(at)), 'utf8'));
    if (e === undefined) unreadable.push(String(at));
    else entries.push({ ...e, at });
  }
  return { entries, gaps, unreadable };
}
