/**
 * Text from the disk inside HTML and SVG the extension makes: shown as the text it is, never as
 * markup. A co-user's name such as `<img src=x onerror=…>` or one holding a bidi override stays a
 * name: control and format characters are shown as escapes (as the command line prints them),
 * then `& < > " '` become entities, so the text is safe in an element and in a quoted attribute.
 * Free of `vscode`, so that unit tests can check it.
 */
import { printable } from '../../core';

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Our own text (words, numbers) in an element or a quoted attribute. */
export function esc(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ENTITIES[c]);
}

/** A co-user's text (a tag, user, host, purpose) in an element or a quoted attribute. */
export function shown(text: string): string {
  return esc(printable(text));
}
