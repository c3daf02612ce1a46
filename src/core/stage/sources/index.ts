/**
 * Where artifacts come in: every kind of staging source, one file each, and the table that picks
 * the kind for a source. Sources report what they find as it is (names, types, link targets);
 * the stager decides what may land in the area.
 *
 * A new kind of source is a file that exports a `SourceOpener` (see ../types.ts) and one line in
 * `SOURCES`.
 */
import type { EntrySource, IncomingEntry, MeasureTree, SourceContext, SourceOpener } from '../types';
import { sourceError } from './errors';
import { fileUrlSource } from './fileUrl';
import { httpSource } from './http';
import { localSource } from './local';

/** In the order they are asked: the first whose `matches` accepts a spec opens it. */
export const SOURCES: readonly SourceOpener[] = [
  httpSource,
  fileUrlSource,
  // Last: it takes every spec that names no URL scheme.
  localSource,
];

function openerOf(spec: string): SourceOpener | undefined {
  return SOURCES.find((s) => s.matches(spec));
}

/**
 * Opens one source. Nothing is read until the iteration starts; stopping it early closes whatever
 * was opened. A source no kind accepts fails with ESOURCE when iterated, saying what is accepted.
 */
export function openSource(spec: string, ctx: SourceContext): EntrySource {
  const opener = openerOf(spec);
  return opener !== undefined ? opener.open(spec, ctx) : failing(unsupported(spec));
}

/** The bytes the sources bring, where every one of them knows it up front; undefined otherwise. */
export async function sourcesSize(specs: readonly string[], measureTree: MeasureTree): Promise<number | undefined> {
  let total = 0;
  for (const spec of specs) {
    const size = await openerOf(spec)?.size?.(spec, measureTree);
    if (size === undefined) return undefined;
    total += size;
  }
  return total;
}

/**
 * The artifacts the sources bring and the bytes of their names, as far as that is known up front:
 * a source that cannot tell (an archive, a download) counts as one artifact with a one-byte name.
 * So it is never more than a staging of them records.
 */
export async function sourcesArtifacts(specs: readonly string[], measureTree: MeasureTree): Promise<{ artifacts: number; nameBytes: number }> {
  const total = { artifacts: 0, nameBytes: 0 };
  for (const spec of specs) {
    const found = await openerOf(spec)?.artifacts?.(spec, measureTree);
    total.artifacts += found?.artifacts ?? 1;
    total.nameBytes += found?.nameBytes ?? 1;
  }
  return total;
}

function unsupported(spec: string): Error {
  const accepted = SOURCES.map((s) => s.name);
  const what = `${accepted.slice(0, -1).join(', ')} or ${accepted[accepted.length - 1]}`;
  if (spec === '') return sourceError(`A staging source is empty; give ${what}.`, spec);
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(spec)?.[1];
  return sourceError(`The staging source ${spec}${scheme !== undefined ? ` uses the scheme ${scheme}:, which` : ''} is not supported; give ${what}.`, spec);
}

// A generator, not a rejected promise: the error comes when the staging first reads its entries.
// eslint-disable-next-line @typescript-eslint/require-await
async function* failing(error: Error): AsyncGenerator<IncomingEntry> {
  throw error;
}
