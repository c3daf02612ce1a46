/**
 * Archives as entry sources: which kinds there are, how a name or a Content-Type announces one,
 * and the reader for an archive file of each kind (tar, gzip and xz in archive/tar.ts, zip in
 * archive/zip.ts). Entries are reported as the archive states them (raw names, true types, link
 * targets); the stager decides what may land.
 */
import * as fs from 'fs';
import type { IncomingEntry } from '../types';
import { tarEntries } from './archive/tar';
import { zipEntries } from './archive/zip';

export type ArchiveKind = 'tar' | 'tar.gz' | 'tar.xz' | 'zip';

const EXTENSIONS: readonly (readonly [string, ArchiveKind])[] = [
  ['.tar', 'tar'],
  ['.tar.gz', 'tar.gz'],
  ['.tgz', 'tar.gz'],
  ['.tar.xz', 'tar.xz'],
  ['.txz', 'tar.xz'],
  ['.zip', 'zip'],
];

/** The archive kind a file name's extension announces, if any (case-insensitive). */
export function archiveKindOf(name: string): ArchiveKind | undefined {
  const lower = name.toLowerCase();
  for (const [ext, kind] of EXTENSIONS) {
    if (lower.endsWith(ext) && lower.length > ext.length) return kind;
  }
  return undefined;
}

/** The archive kind a Content-Type announces, if it names one unambiguously. */
export function archiveKindOfContentType(contentType: string | null): ArchiveKind | undefined {
  const type = (contentType ?? '').split(';')[0].trim().toLowerCase();
  switch (type) {
    case 'application/x-tar':
    case 'application/x-gtar':
      return 'tar';
    case 'application/gzip':
    case 'application/x-gzip':
    case 'application/x-compressed-tar':
    case 'application/x-tgz':
      return 'tar.gz';
    case 'application/x-xz':
    case 'application/x-xz-compressed-tar':
      return 'tar.xz';
    case 'application/zip':
    case 'application/x-zip-compressed':
      return 'zip';
    default:
      return undefined;
  }
}

/** The entries of the archive file `file` of kind `kind`, named `label` in entries and errors. */
export function archiveFileEntries(file: string, kind: ArchiveKind, signal: AbortSignal, label = file): AsyncGenerator<IncomingEntry> {
  if (kind === 'zip') return zipEntries(file, label, signal);
  // 64 KiB chunks: gzip inflates each at once, up to about 1000 times its size, into memory.
  return tarEntries(() => fs.createReadStream(file, { highWaterMark: 64 * 1024 }), kind, label, signal);
}
