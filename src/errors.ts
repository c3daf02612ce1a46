/**
 * Turning any error into a sentence for the user. The core's messages say what to do, but some of
 * that is said for the command line ("--wait", "devserver-stage prune"): none of it reaches a
 * VS Code user, who has buttons for those things instead.
 */
import { isStagingError } from './core';

/** A flag, or a command of the command-line tool, or its environment variables. */
export const CLI_HINT = /(?:^|[\s(`'"])--[a-z][\w-]*|\bdevserver-stage (?:[a-z][\w-]*|--)|\bDEVSERVER_[A-Z_]+\b/;

/**
 * The text without what only a command-line user can act on: parentheses that hold a hint go,
 * then any sentence or clause that still holds one.
 */
export function withoutCliHints(text: string): string {
  if (!CLI_HINT.test(text)) return text;
  const noParens = text.replace(/\s*\([^()]*\)/g, (m) => (CLI_HINT.test(m) ? '' : m));
  // Sentences end with ". " (not inside a path: those have no space after the dot).
  const sentences = noParens.split(/(?<=\.)\s+/).filter((s) => !CLI_HINT.test(s));
  if (sentences.length > 0) return sentences.join(' ').trim();
  // All of it was a hint ("No static directory given: pass --static-dir …"): what comes before it.
  const before = noParens.slice(0, noParens.search(CLI_HINT));
  const head = before.includes(':') ? before.slice(0, before.lastIndexOf(':')) : before;
  return `${head.trim()}.`;
}

export function errorMessage(err: unknown): string {
  if (isStagingError(err)) return withoutCliHints(err.message);
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    const message = withoutCliHints(err.message);
    return code !== undefined && !message.includes(code) ? `${message} (${code})` : message;
  }
  return withoutCliHints(String(err));
}
