/**
 * The words of a command given as one option's text (`watch --exec CMD`), split as a reader of
 * the text expects but with nothing expanded: no variables, globs or substitutions, since no shell
 * ever sees it. Loaded with the table of commands, so it imports nothing.
 */

/**
 * The words of CMD: split at blanks; '…' holds anything literally, "…" too but for \" and \\,
 * and a backslash outside quotes keeps the next character. Throws on an unclosed quote or no word.
 */
export function commandWords(text: string): string[] {
  const words: string[] = [];
  let word: string | undefined;
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (quote === "'") {
      if (ch === "'") quote = undefined;
      else word += ch;
    } else if (quote === '"') {
      if (ch === '"') quote = undefined;
      else if (ch === '\\' && (text[i + 1] === '"' || text[i + 1] === '\\')) word += text[++i];
      else word += ch;
    } else if (ch === ' ' || ch === '\t' || ch === '\n') {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      word ??= '';
    } else if (ch === '\\' && i + 1 < text.length) {
      word = (word ?? '') + text[++i];
    } else {
      word = (word ?? '') + ch;
    }
  }
  if (quote !== undefined) throw new Error(`the command has an unclosed ${quote} quote`);
  if (word !== undefined) words.push(word);
  if (words.length === 0) throw new Error('expected a command, such as "notify-send Devserver" or "sh -c \'echo $DSS_TAG\'"');
  return words;
}
