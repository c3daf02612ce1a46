/**
 * Names as the kernel has them: bytes. A directory a co-user makes may be named by bytes that are
 * not UTF-8 (`mkdir $'R\xff'`). Decoded the usual way each such byte becomes U+FFFD: the name is
 * then shown as something else, two names can look alike, and the string given back to the kernel
 * names another directory or none. Here every byte that is not part of a valid UTF-8 sequence is
 * kept as a lone surrogate, U+DC80 to U+DCFF (the byte plus U+DC00, as Python's `surrogateescape`
 * does), so the string says exactly which bytes the name has; `fsPath` turns it back into those
 * bytes where a path goes to the kernel. A valid UTF-8 name never holds such a surrogate, so no two
 * names decode alike. Text shows these bytes as `\xNN` (`printable`, format.ts).
 */

/** A surrogate in the range raw bytes are kept in (it may be the low half of a pair: `encodeName` tells). */
const MAYBE_RAW = /[\udc80-\udcff]/;

/** Whether `text` holds a byte that is not UTF-8, kept as `decodeName` keeps it. */
export function hasRawBytes(text: string): boolean {
  if (!MAYBE_RAW.test(text)) return false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xdc80 && c <= 0xdcff && !(i > 0 && isHigh(text.charCodeAt(i - 1)))) return true;
  }
  return false;
}

const isHigh = (c: number): boolean => c >= 0xd800 && c <= 0xdbff;

/** The length of the valid UTF-8 sequence at `i` (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF), or 0. */
function sequenceAt(b: Uint8Array, i: number): number {
  const c = b[i];
  if (c < 0x80) return 1;
  const cont = (k: number): boolean => i + k < b.length && (b[i + k] & 0xc0) === 0x80;
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    if (!cont(1) || !cont(2)) return 0;
    const c1 = b[i + 1];
    if ((c === 0xe0 && c1 < 0xa0) || (c === 0xed && c1 > 0x9f)) return 0;
    return 3;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    const c1 = b[i + 1];
    if ((c === 0xf0 && c1 < 0x90) || (c === 0xf4 && c1 > 0x8f)) return 0;
    return 4;
  }
  return 0;
}

/** A name read from the kernel as bytes, as a string that keeps every byte (see above). */
export function decodeName(bytes: Buffer): string {
  const text = bytes.toString('utf8');
  // Nearly every name: valid UTF-8, which decodes without U+FFFD or gives back its bytes exactly.
  if (!text.includes('\uFFFD') || Buffer.from(text, 'utf8').equals(bytes)) return text;
  let out = '';
  let start = 0;
  for (let i = 0; i < bytes.length; ) {
    const n = sequenceAt(bytes, i);
    if (n > 0) {
      i += n;
      continue;
    }
    out += bytes.toString('utf8', start, i) + String.fromCharCode(0xdc00 + bytes[i]);
    i++;
    start = i;
  }
  return out + bytes.toString('utf8', start);
}

/** The bytes `decodeName` read `name` from: UTF-8, each kept byte as itself. */
export function encodeName(name: string): Buffer {
  const parts: Buffer[] = [];
  let start = 0;
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c >= 0xdc80 && c <= 0xdcff && !(i > 0 && isHigh(name.charCodeAt(i - 1)))) {
      parts.push(Buffer.from(name.slice(start, i), 'utf8'), Buffer.of(c - 0xdc00));
      start = i + 1;
    }
  }
  if (parts.length === 0) return Buffer.from(name, 'utf8');
  parts.push(Buffer.from(name.slice(start), 'utf8'));
  return Buffer.concat(parts);
}

/**
 * A path as the kernel should get it: the string itself, or, where it holds bytes that are not
 * UTF-8, those bytes (Node would send a string's lone surrogates as U+FFFD, another name).
 */
export function fsPath(p: string): string | Buffer {
  return hasRawBytes(p) ? encodeName(p) : p;
}
