/**
 * What co-users write (holder fields, build and artifact names, reasons, history lines) as each
 * surface of the editor shows it: as text, never as a link, a command, an icon or a line of its own.
 * One function per surface, each applied where that surface is reached (prompts.ts, log.ts, the
 * tree's rows, the clipboard); Markdown surfaces (the details page, tooltips) have markdown.ts.
 * Free of `vscode`, so that unit tests check each against the grammar VS Code reads it with.
 */
import { messageText, printable } from '../core/base/format';

/**
 * VS Code makes `[label](command:…)`, `(https://…)` and `(file:…)` into links in a notification's
 * message, and runs a `command:` link when it is clicked (`parseLinkedText`). Every such link needs
 * `](` with nothing between; a space there leaves the text as it was written, to be read.
 */
const LINK_OPENER = /\]\(/g;

const unlinked = (text: string): string => text.replace(LINK_OPENER, '] (');

/**
 * A whole message of a notification (a progress title or step is one too): one line (a newline,
 * control or format character escaped as `\n`, `\u202e`), and no link. The editor's own messages
 * hold no link, so the whole of it is neutralised, co-users' words wherever they are in it.
 */
export function notificationText(message: string): string {
  return unlinked(messageText(message));
}

/**
 * One line of a modal dialog's question or detail: its own line breaks are the dialog's, never a
 * co-user's (a newline in a holder's name is shown as `\n`, so it cannot forge a line of the list).
 */
export function dialogLine(line: string): string {
  return unlinked(messageText(line));
}

/** `$(name)` or `$(name~modifier)`, which quick picks show as an icon, and a backslash before it. */
const ICON = /(\\)?\$\([A-Za-z0-9-]+(?:~[A-Za-z]+)?\)/g;

/**
 * A label, description or detail of a quick pick (or an input box's title and prompt): one line,
 * no link, and no icon, which VS Code draws for `$(name)` unless a backslash comes before it.
 */
export function pickText(text: string): string {
  return unlinked(messageText(text)).replace(ICON, (m: string, escaped: string | undefined) => (escaped !== undefined ? m : `\\${m}`));
}

/** A row's label, description or plain tooltip in a tree: one line, shown as written. */
export function rowText(text: string): string {
  return messageText(text);
}

/** A line of the log: a co-user's newline must not start a line of its own there. */
export function logText(message: string): string {
  return messageText(message);
}

/**
 * A path or tag as the clipboard gets it: as it is, or where it holds a control or format character
 * (a newline that would run what follows it when pasted into a shell), quoted with that character
 * escaped, as the command line prints names and reads them back.
 */
export function clipboardText(name: string): string {
  return printable(name);
}
