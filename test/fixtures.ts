/**
 * Fixture builders shared by the staging tests: archives written by Python's tarfile, zipfile
 * and lzma (what most tools produce, and free to write entries no careful tool would), snapshots
 * that show whether anything in a directory tree changed, and a real HTTP server on 127.0.0.1.
 */
import { createHash } from 'crypto';
import * as fs from 'fs';
import * as http from 'http';
import type { AddressInfo, Socket } from 'net';
import * as path from 'path';
import { FENCE_FILE } from '../src/core/base/protocol';
import type { Readable } from 'stream';
import { PART_PREFIX } from '../src/core/stage/types';
import { run } from './helpers';

/** Debian's own Python, which has lzma, tarfile and zipfile. */
export const PYTHON = '/usr/bin/python3';

export const sha = (data: Buffer | string): string => createHash('sha256').update(data).digest('hex');

export async function hashStream(stream: Readable): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of stream) h.update(chunk as Buffer);
  return h.digest('hex');
}

export async function python(code: string, ...args: string[]): Promise<void> {
  const r = await run(PYTHON, ['-c', code, ...args]);
  if (r.code !== 0) throw new Error(`python failed (${r.code}): ${r.stderr}`);
}

export type FixtureKind = 'tar' | 'tar.gz' | 'tar.xz' | 'zip';

/** One entry as written, exactly as given: names and link targets are not cleaned up. */
export interface EntrySpec {
  name: string;
  /** Default 'file'. Zip has no hard links; tar has no sockets. */
  type?: 'file' | 'dir' | 'symlink' | 'hardlink' | 'chr' | 'blk' | 'fifo' | 'socket';
  /** File content as UTF-8 (default empty). */
  data?: string;
  /** File content given as base64 instead (for bytes that are not UTF-8). */
  base64?: string;
  /** File content of this many random bytes instead. */
  random?: number;
  /** Symlink or hard link target (zip: a symlink's content). */
  linkname?: string;
  /** Permission bits (tar), or the whole Unix mode including the type (zip). */
  mode?: number;
  devmajor?: number;
  devminor?: number;
  /** Tar, pax format: this entry's own extended header records (they win over the header). */
  pax?: Record<string, string>;
  /** Zip: an Info-ZIP Unicode Path extra field (readers take it over the stored name). */
  unicodePath?: string;
  /** Zip: the compression method (default deflate; directories are always stored). */
  method?: 'stored' | 'deflate' | 'bzip2' | 'lzma';
}

export interface ArchiveSpec {
  file: string;
  kind: FixtureKind;
  entries: EntrySpec[];
  /** Tar header format (default gnu). */
  format?: 'gnu' | 'pax' | 'ustar';
  /** Tar, pax format: a global extended header at the start, applying to every later entry. */
  globalPax?: Record<string, string>;
}

// Tar is built in memory, then compressed as gzip (mtime 0) or xz (xz's defaults: LZMA2,
// CRC64), so the same entries give the same archive whatever the kind.
const BUILDER = String.raw`
import base64, gzip, io, json, lzma, os, struct, sys, tarfile, zipfile, zlib

TAR_TYPES = {'file': tarfile.REGTYPE, 'dir': tarfile.DIRTYPE, 'symlink': tarfile.SYMTYPE,
             'hardlink': tarfile.LNKTYPE, 'chr': tarfile.CHRTYPE, 'blk': tarfile.BLKTYPE,
             'fifo': tarfile.FIFOTYPE}
ZIP_MODES = {'file': 0o100644, 'dir': 0o040755, 'symlink': 0o120777, 'chr': 0o020644,
             'blk': 0o060644, 'fifo': 0o010644, 'socket': 0o140755}
ZIP_METHODS = {'stored': zipfile.ZIP_STORED, 'deflate': zipfile.ZIP_DEFLATED,
               'bzip2': zipfile.ZIP_BZIP2, 'lzma': zipfile.ZIP_LZMA}
FORMATS = {'gnu': tarfile.GNU_FORMAT, 'pax': tarfile.PAX_FORMAT, 'ustar': tarfile.USTAR_FORMAT}

def content(e):
    if 'random' in e:
        return os.urandom(e['random'])
    if 'base64' in e:
        return base64.b64decode(e['base64'])
    return e.get('data', '').encode('utf-8')

def write_tar(spec):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode='w', format=FORMATS[spec.get('format', 'gnu')],
                      pax_headers=spec.get('globalPax'), encoding='utf-8') as t:
        for e in spec['entries']:
            kind = e.get('type', 'file')
            ti = tarfile.TarInfo(e['name'])
            ti.type = TAR_TYPES[kind]
            ti.mtime = 1700000000
            ti.mode = e.get('mode', 0o755 if kind == 'dir' else 0o644)
            ti.linkname = e.get('linkname', '')
            ti.devmajor = e.get('devmajor', 0)
            ti.devminor = e.get('devminor', 0)
            if 'pax' in e:
                ti.pax_headers = e['pax']
            data = content(e) if kind == 'file' else b''
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data) if data else None)
    raw = buf.getvalue()
    if spec['kind'] == 'tar.gz':
        raw = gzip.compress(raw, mtime=0)
    elif spec['kind'] == 'tar.xz':
        raw = lzma.compress(raw, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64)
    with open(spec['file'], 'wb') as f:
        f.write(raw)

def write_zip(spec):
    with zipfile.ZipFile(spec['file'], 'w') as z:
        for e in spec['entries']:
            kind = e.get('type', 'file')
            zi = zipfile.ZipInfo('placeholder', date_time=(2024, 1, 2, 3, 4, 6))
            zi.filename = e['name']  # set afterwards: the constructor cuts a name at a NUL
            zi.create_system = 3
            zi.external_attr = e.get('mode', ZIP_MODES[kind]) << 16
            if kind == 'dir':
                zi.external_attr |= 0x10
            zi.compress_type = ZIP_METHODS['stored' if kind == 'dir' else e.get('method', 'deflate')]
            if 'unicodePath' in e:
                raw_name = e['name'].encode('ascii')
                value = struct.pack('<BI', 1, zlib.crc32(raw_name)) + e['unicodePath'].encode('utf-8')
                zi.extra = struct.pack('<HH', 0x7075, len(value)) + value
            data = e.get('linkname', '').encode('utf-8') if kind == 'symlink' else content(e)
            z.writestr(zi, data)

for spec in json.load(sys.stdin):
    (write_zip if spec['kind'] == 'zip' else write_tar)(spec)
`;

/** Writes every archive in one Python process. */
export async function writeArchives(specs: readonly ArchiveSpec[]): Promise<void> {
  const r = await run(PYTHON, ['-c', BUILDER], { input: JSON.stringify(specs) });
  if (r.code !== 0) throw new Error(`writing ${specs.length} archives failed (${r.code}): ${r.stderr}`);
}

// ---------------------------------------------------------------------------------------------
// Watching a sandbox

/**
 * Every path below `top` with what can change: type, mode, size, content hash, link target and
 * mtime (of directories too when `dirMtimes`, so an entry made and removed again shows).
 */
/**
 * Every entry below `top` with its type, mode, size, mtime and content hash. The area's fencing
 * counter is left out: it is the lock's bookkeeping and grows with every lock, like the lock itself.
 */
export function tree(top: string, options: { skip?: (p: string) => boolean; dirMtimes: boolean }): Map<string, string> {
  const out = new Map<string, string>();
  const visit = (p: string): void => {
    if (options.skip?.(p) === true || path.basename(p) === FENCE_FILE) return;
    const st = fs.lstatSync(p);
    if (st.isDirectory()) {
      out.set(p, `d ${st.mode} ${options.dirMtimes ? st.mtimeMs : ''}`);
      for (const name of fs.readdirSync(p).sort()) visit(path.join(p, name));
    } else if (st.isFile()) {
      out.set(p, `f ${st.mode} ${st.size} ${st.mtimeMs} ${sha(fs.readFileSync(p))}`);
    } else if (st.isSymbolicLink()) {
      out.set(p, `l ${fs.readlinkSync(p)} ${st.mtimeMs}`);
    } else {
      out.set(p, `o ${st.mode}`);
    }
  };
  visit(top);
  return out;
}

export function differences(before: Map<string, string>, after: Map<string, string>): string[] {
  const out: string[] = [];
  for (const [p, v] of before) if (after.get(p) !== v) out.push(after.has(p) ? `changed ${p}: ${v} -> ${after.get(p)}` : `removed ${p}`);
  for (const p of after.keys()) if (!before.has(p)) out.push(`added ${p}`);
  return out;
}

/** Every staging part file (`.devserver-staging.part.*`) below `dir`. */
export function partsIn(dir: string): string[] {
  const found: string[] = [];
  if (!fs.existsSync(dir)) return found;
  const visit = (d: string): void => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      if (e.name.startsWith(PART_PREFIX)) found.push(path.join(d, e.name));
      if (e.isDirectory()) visit(path.join(d, e.name));
    }
  };
  visit(dir);
  return found;
}

// ---------------------------------------------------------------------------------------------
// HTTP

export interface TestServer {
  server: http.Server;
  /** `http://127.0.0.1:<port>` */
  base: string;
  /** Ends every connection still open and stops the server. */
  close(): Promise<void>;
}

/** A real HTTP server on 127.0.0.1, on a port the kernel picks. */
export async function startServer(handler: http.RequestListener): Promise<TestServer> {
  const server = http.createServer(handler);
  const sockets = new Set<Socket>();
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    server,
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
