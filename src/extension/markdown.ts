/**
 * Text from the disk inside the Markdown that VS Code renders (the details page, tooltips): shown
 * as written, never as markup. Co-users name directories and files and write holder records, so a
 * name like `[Update](https://…)`, `<img src=x onerror=…>` or one holding a line break must stay a
 * name. Free of `vscode`, so that unit tests can check it.
 */

/**
 * The characters that open markup inside a line: emphasis, code, links and images (`!` and `(` mean
 * nothing without `[` or `]`), HTML and entities, table cells, headings' closing `#`, strikethrough,
 * VS Code's `$(icon)` and math, and the `:` of an autolink. And `.` and `@`, which linkify needs
 * to make `www.example.com` or `a@example.com` into a link: an escape splits the text it reads.
 * Text from the disk never starts a line here, so what only means something there (`-`, `+`, `=`,
 * `1.`) is left as it is.
 */
const PUNCTUATION = /[\\`*_[\]|<>&$~:#.@]/g;

/**
 * As literal text on one line: Markdown's punctuation escaped with backslashes (CommonMark shows
 * any escaped ASCII punctuation as itself), and line breaks made spaces: markdown-it breaks lines
 * at a lone \r as well as at \n, and a break would end a table row or start a new block.
 */
export function literal(s: string): string {
  return s.replace(PUNCTUATION, '\\$&').replace(/[\r\n]+/g, ' ');
}

/**
 * As one code span: fenced by one backtick more than the longest run of backticks in it, so that
 * none of its own can end the span early and turn the rest into Markdown. A space inside each fence
 * keeps a backtick at either end from joining it (CommonMark strips one space on each side).
 */
export function codeSpan(s: string): string {
  const flat = s.replace(/[\r\n]+/g, ' ');
  const longest = Math.max(0, ...(flat.match(/`+/g) ?? []).map((run) => run.length));
  const fence = '`'.repeat(longest + 1);
  return `${fence} ${flat} ${fence}`;
}
