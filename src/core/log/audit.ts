/**
 * The audit log, `<static>/.devserver-staging/audit.log`: one JSON line per force-release,
 * destroy and clearing of a line, written before the action so that nothing is removed without a record. Appended below
 * the opened bookkeeping directory and never through a link, into a FIFO, a device or a file with
 * other names (a hard link, which may be outside the static directory).
 */
import * as fs from 'fs';
import * as path from 'path';
import { type Dir, appendRecord, hardLinked, openDir } from '../fs/anchored';
import { openMeta } from '../fs/meta';
import { StagingError, errnoCode } from '../base/errors';
import { thisProcess } from '../base/holder';
import { AUDIT_LOG, META_DIR } from '../base/protocol';
import type { LockInfo, QueueEntry } from '../base/types';

export interface AuditEntry {
  time: string;
  action: 'force-release' | 'destroy' | 'clear-line';
  tag: string;
  by: { user: string; hostname: string; pid: number; clientId: string };
  previous?: Pick<LockInfo, 'state' | 'holder' | 'legacy' | 'heartbeatAgeMs' | 'ageMs'>;
  /** `clear-line`: the tickets about to be removed, as judged (the first hundred), and how many there are. */
  tickets?: QueueEntry[];
  ticketCount?: number;
  /** On a second line for the same action: it did not happen, and why. */
  failed?: string;
}

/** What stands in the audit log's place, for the message, when it is not a regular file. */
function describe(st: fs.Stats): string | undefined {
  if (st.isSymbolicLink()) return 'it is a symbolic link';
  if (st.isFIFO()) return 'it is a FIFO';
  if (st.isDirectory()) return 'it is a directory';
  if (st.isSocket()) return 'it is a socket';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'it is a device';
  // Appending would write to that file wherever its other names are.
  if (st.isFile() && st.nlink > 1) return `it is ${hardLinked(st.nlink)}`;
  return undefined;
}

/** Why an append failed, in words: what is in the way (looked at without following it), else the errno. */
async function reasonOf(err: unknown, at: string): Promise<string> {
  const st = await fs.promises.lstat(at).catch(() => undefined);
  const what = st === undefined ? undefined : describe(st);
  if (what !== undefined) return `${what}, not a file this tool wrote`;
  switch (errnoCode(err)) {
    case 'EACCES':
    case 'EPERM':
      return 'permission denied (it, or the directory it is in, is not writable by this user)';
    case 'ENOSPC':
    case 'EDQUOT':
      return 'the filesystem is full';
    case 'EROFS':
      return 'the filesystem is read-only';
    default:
      return err instanceof Error ? err.message : String(err);
  }
}

type Refusal = (shown: string, reason: string, cause: unknown) => StagingError;

const FIX = 'Fix the audit log (it must be a regular file writable by you) and try again.';

/**
 * Appends one JSON line (O_APPEND keeps concurrent writers' lines whole). Fails with EIO naming
 * the log and why: a link, FIFO, directory, device or hard-linked file in its place (or a link or
 * file in the place of `.devserver-staging`) is refused, never written through.
 */
export async function appendAudit(staticDir: string, entry: Omit<AuditEntry, 'time' | 'by'>, clientId?: string): Promise<void> {
  await append(staticDir, entry, clientId, (shown, reason, cause) => new StagingError('EIO', `Could not write the audit log ${shown}: ${reason}. ${FIX}`, { path: shown, cause }));
}

/**
 * Records that `action` is about to happen, or refuses it: a removal that cannot be recorded
 * must not happen. The error says what was not done and why.
 */
export async function recordIntent(staticDir: string, entry: Omit<AuditEntry, 'time' | 'by' | 'failed'>, clientId?: string): Promise<void> {
  await append(staticDir, entry, clientId, (shown, reason, cause) =>
    new StagingError('EIO', `${entry.action} of ${entry.tag} not done: could not record it in ${shown}: ${reason}. ${FIX}`, { path: shown, cause }),
  );
}

/** Records that an action announced by `recordIntent` failed. Best effort: the failure itself is what the caller reports. */
export async function recordFailure(staticDir: string, entry: Omit<AuditEntry, 'time' | 'by' | 'failed'>, err: unknown, clientId?: string): Promise<void> {
  const failed = err instanceof Error ? err.message : String(err);
  await appendAudit(staticDir, { ...entry, failed }, clientId).catch(() => undefined);
}

async function append(staticDir: string, entry: Omit<AuditEntry, 'time' | 'by'>, clientId: string | undefined, refuse: Refusal): Promise<void> {
  const line: AuditEntry = {
    time: new Date().toISOString(),
    action: entry.action,
    tag: entry.tag,
    by: thisProcess(clientId),
    ...(entry.previous !== undefined ? { previous: entry.previous } : {}),
    ...(entry.tickets !== undefined ? { tickets: entry.tickets } : {}),
    ...(entry.ticketCount !== undefined ? { ticketCount: entry.ticketCount } : {}),
    ...(entry.failed !== undefined ? { failed: entry.failed } : {}),
  };
  const metaShown = path.join(staticDir, META_DIR);
  const shown = path.join(metaShown, AUDIT_LOG);
  let top: Dir;
  try {
    top = await openDir(staticDir);
  } catch (err) {
    throw refuse(shown, `could not open the static directory (${err instanceof Error ? err.message : String(err)})`, err);
  }
  let meta: Dir;
  try {
    meta = await openMeta(top);
  } catch (err) {
    const code = errnoCode(err);
    const reason =
      code === 'ELOOP' ? `${metaShown} is a symbolic link; move it aside` : code === 'ENOTDIR' ? `${metaShown} is not a directory; move it aside` : await reasonOf(err, top.at(META_DIR));
    throw refuse(shown, reason, err);
  } finally {
    top.close();
  }
  try {
    // 0o666 less the umask, as any file the user creates: the umask says who else may append.
    await appendRecord(meta.at(AUDIT_LOG), shown, `${JSON.stringify(line)}\n`, { mode: 0o666 });
  } catch (err) {
    throw refuse(shown, await reasonOf(err, meta.at(AUDIT_LOG)), err);
  } finally {
    meta.close();
  }
}
