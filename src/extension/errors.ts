/**
 * Turning any error into a sentence for the user. The core's messages name no command of the
 * command-line tool; what can be done next comes as data (`next`), which errorMessages.ts turns
 * into the editor's buttons.
 */
import { isStagingError } from '../core';

export function errorMessage(err: unknown): string {
  if (isStagingError(err)) return err.message;
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    return code !== undefined && !err.message.includes(code) ? `${err.message} (${code})` : err.message;
  }
  return String(err);
}
