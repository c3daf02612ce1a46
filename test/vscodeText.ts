/**
 * How VS Code reads the text of a notification, taken from a VS Code's own workbench: its
 * `NotificationViewItem.parseNotificationMessage` (the message cut to its limit, line breaks made
 * spaces, then `parseLinkedText`, which makes `[label](command:…)` and the like into links) is
 * found in the built workbench (`out/vs/code/browser/workbench/workbench.js`, bundled and minified,
 * so it cannot be required) and evaluated as it is there. The tests check what the extension gives
 * VS Code against that, not against a reading of their own.
 */
import * as fs from 'fs';
import * as path from 'path';
import * as vm from 'vm';

/** A piece of a notification's text: words, or a link VS Code would make and open on a click. */
export type LinkedNode = string | { label: string; href: string; title?: string };

/** The workbench a VS Code installation at `appRoot` (its `lib/vscode`) shows. */
export const workbenchOf = (appRoot: string): string => path.join(appRoot, 'out', 'vs', 'code', 'browser', 'workbench', 'workbench.js');

/** The workbench of the headless VS Code the integration tests install, if it is installed. */
export function installedWorkbench(root: string): string | undefined {
  const cache = process.env.VSCODE_HEADLESS_CACHE !== undefined ? path.resolve(process.env.VSCODE_HEADLESS_CACHE) : path.join(root, '.cache', 'headless');
  const file = workbenchOf(path.join(cache, 'code-server', 'node_modules', 'code-server', 'lib', 'vscode'));
  return fs.existsSync(file) ? file : undefined;
}

/** Escapes text for a RegExp. */
const re = (s: string): string => s.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&');

/**
 * VS Code's own reading of a notification's message, from the workbench bundle `file`: the
 * nodes of its linked text (words and links).
 */
export function notificationParser(file: string): (message: string) => LinkedNode[] {
  const src = fs.readFileSync(file, 'utf8');
  // static parseNotificationMessage(e){…let n=bI(t);return{raw:i,linkedText:n,original:e}}
  const method = /static parseNotificationMessage\((\w+)\)\{(.*?)return\{raw:\w+,linkedText:\w+,original:\1\}\}/.exec(src);
  if (method === null) throw new Error(`parseNotificationMessage not found in ${file}`);
  const [, arg, body] = method;
  const parseName = /=([\w$]+)\(\w+\);$/.exec(body)?.[1];
  if (parseName === undefined) throw new Error(`the link parser called by parseNotificationMessage not found in ${file}`);
  const classRef = /(\w+)\.MAX_MESSAGE_LENGTH/.exec(body)?.[1];
  const limit = Number(/MAX_MESSAGE_LENGTH=([\d.e]+)/.exec(src)?.[1]);
  // function bI(s){let o=[],e=0,t;for(;t=j$n.exec(s);){…}return …,new c3t(o)}
  const fn = new RegExp(`function ${re(parseName)}\\((\\w+)\\)\\{(.*?)return [^;]*?new ([\\w$]+)\\(\\w+\\)\\}`).exec(src);
  if (fn === null || classRef === undefined || !Number.isFinite(limit)) throw new Error(`parseLinkedText not found in ${file}`);
  const regexName = new RegExp(`(?:for\\(;)?\\w+=([\\w$]+)\\.exec\\(${re(fn[1])}\\)`).exec(fn[2])?.[1];
  const regexDef = regexName === undefined ? null : new RegExp(`var ${re(regexName)}=(/(?:\\\\.|[^/\\n])+/[a-z]*);`).exec(src);
  if (regexDef === null) throw new Error(`the link pattern of parseLinkedText not found in ${file}`);
  const code = [
    `const ${regexName} = ${regexDef[1]};`,
    `class ${fn[3]} { constructor(nodes) { this.nodes = nodes; } }`,
    fn[0],
    `const ${classRef} = { MAX_MESSAGE_LENGTH: ${limit} };`,
    `function parseNotificationMessage(${arg}) {${body}return { linkedText: ${/let (\w+)=[\w$]+\(\w+\);$/.exec(body)?.[1] ?? 'undefined'} }; }`,
    'parseNotificationMessage;',
  ].join('\n');
  const parse = vm.runInNewContext(code, {}) as (m: string) => { linkedText: { nodes: LinkedNode[] } } | undefined;
  // As plain values of this realm (the context's arrays and objects have prototypes of their own).
  return (message) => Array.from(parse(message)?.linkedText.nodes ?? [], (n) => (typeof n === 'string' ? n : { label: n.label, href: n.href, ...(n.title !== undefined ? { title: n.title } : {}) }));
}

/**
 * The same reading, written here from VS Code's grammar (1.139): the message cut after 1,000
 * characters (with `...`), each line break a space, trimmed; then a link wherever `[label]` is
 * followed at once by `(target)` whose target starts with `http://`, `https://`, `command:` or
 * `file:` (any case) and holds no space or `)`, with an optional quoted title after a space. For
 * machines where no VS Code is installed; the unit test checks the two agree where one is.
 */
export function portedNotificationParser(message: string): LinkedNode[] {
  let text = message.length > 1000 ? `${message.slice(0, 1000)}...` : message;
  text = text.replace(/\r\n|\n|\r/g, ' ').trim();
  const link = /\[([^\]]+)\]\(((?:https?:\/\/|command:|file:)[^)\s]+)(?: (["'])(.+?)\3)?\)/gi;
  const nodes: LinkedNode[] = [];
  let at = 0;
  for (const m of text.matchAll(link)) {
    if (m.index > at) nodes.push(text.slice(at, m.index));
    nodes.push(m[4] ? { label: m[1], href: m[2], title: m[4] } : { label: m[1], href: m[2] });
    at = m.index + m[0].length;
  }
  if (at < text.length) nodes.push(text.slice(at));
  return nodes;
}

/** The links among a message's nodes. */
export const linksIn = (nodes: readonly LinkedNode[]): { label: string; href: string }[] => nodes.filter((n): n is Exclude<LinkedNode, string> => typeof n !== 'string');
