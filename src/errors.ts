/** Turning any error into a sentence for the user: the core's messages already say what to do. */
import { isStagingError } from './core';

export function errorMessage(err: unknown): string {
  if (isStagingError(err)) return err.message;
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    return code !== undefined && !err.message.includes(code) ? `${err.message} (${code})` : err.message;
  }
  return String(err);
}
