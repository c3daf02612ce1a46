/**
 * What history could not do, told to the caller's `warn` in words that name the place, never
 * thrown at the operation it records.
 */
import { StagingError, errnoCode, errnoHint } from '../../base/errors';
import { HISTORY_DIR, META_DIR } from '../../base/protocol';
import type { HistoryOptions, NewHistoryEvent } from './events';

export type Warn = NonNullable<HistoryOptions['warn']>;

export const defaultWarn: Warn = (warning) => process.emitWarning(warning.message, { type: 'DevserverStagingWarning', code: 'DEVSERVER_STAGING_HISTORY' });

/** A system error as words naming `shown` (not the descriptor path it was reached by); our own errors as they are. */
export function inWords(err: unknown, shown: string): unknown {
  // Node's own errors carry the syscall; the others (a link refused on the way) already say what and where.
  if (err instanceof StagingError || typeof (err as { syscall?: unknown }).syscall !== 'string') return err;
  const code = errnoCode(err);
  const what =
    code === 'ENOTDIR'
      ? 'ENOTDIR (something that is not a directory stands where one of the history goes)'
      : code === 'ENOENT'
        ? 'ENOENT (a directory on the way is gone, the static directory itself perhaps)'
        : String(code);
  return new StagingError('EIO', `${shown}: ${what}.${errnoHint(code)}`, { path: shown, cause: err });
}

export function reportWrite(warn: Warn, staticDir: string, event: NewHistoryEvent, err: unknown): void {
  const why = err instanceof Error ? err.message : String(err);
  const shown = `${staticDir}/${META_DIR}/${HISTORY_DIR}`;
  tell(warn, new StagingError('EIO', `Could not record the history of ${event.tag} (the operation itself went through): ${why}`, { path: shown, cause: err }));
}

export function tell(warn: Warn, warning: StagingError): void {
  try {
    warn(warning);
  } catch {
    /* a listener that throws must not break the operation */
  }
}
