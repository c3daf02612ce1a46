/** `file:` URLs as sources: the local path they name, opened as any local path is. */
import { fileURLToPath } from 'url';
import type { IncomingEntry, SourceOpener } from '../types';
import { messageOf, sourceError } from './errors';
import { localArtifacts, localEntries, localSize } from './local';

export const fileUrlSource: SourceOpener = {
  name: 'a file: URL',
  matches: (spec) => /^file:/i.test(spec),
  open: (spec, ctx) => fileEntries(spec, ctx.signal),
  size: async (spec, measureTree) => {
    try {
      return await localSize(fileURLToPath(spec), measureTree);
    } catch {
      return undefined; // names no local path: opening it says why
    }
  },
  artifacts: async (spec, measureTree) => {
    try {
      return await localArtifacts(fileURLToPath(spec), measureTree);
    } catch {
      return undefined;
    }
  },
};

async function* fileEntries(spec: string, signal: AbortSignal): AsyncGenerator<IncomingEntry> {
  let file: string;
  try {
    file = fileURLToPath(spec);
  } catch (err) {
    throw sourceError(`The staging source ${spec} is not a usable file URL: ${messageOf(err)}.`, spec, err);
  }
  yield* localEntries(file, signal);
}
