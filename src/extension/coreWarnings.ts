/**
 * The core reports what went wrong without failing an operation (a history record it could not
 * write or read, a planted file where a record belongs) through `process.emitWarning`, typed
 * `DevserverStagingWarning`, unless a caller passes its own `warn`. In the extension host nobody
 * reads the process's stderr, so these go to the extension's log instead. A hostile or broken file
 * is met again on every hover and refresh: each distinct message is logged once per `quietMs`.
 */
import type { Log } from './log';

export const CORE_WARNING = 'DevserverStagingWarning';

export function logCoreWarnings(log: Pick<Log, 'warn'>, quietMs = 10 * 60_000, now: () => number = Date.now): { dispose(): void } {
  const lastLogged = new Map<string, number>();
  const onWarning = (warning: Error): void => {
    if (warning.name !== CORE_WARNING) return;
    const t = now();
    const before = lastLogged.get(warning.message);
    if (before !== undefined && t - before < quietMs) return;
    // Bounded: a flood of distinct messages must not grow this without end.
    if (lastLogged.size >= 1_000) lastLogged.clear();
    lastLogged.set(warning.message, t);
    log.warn(warning.message);
  };
  process.on('warning', onWarning);
  return { dispose: () => void process.off('warning', onWarning) };
}
