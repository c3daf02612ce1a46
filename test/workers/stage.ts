/**
 * One stage() call in its own process, so that it can run as another user (the kernel ignores
 * file permissions for root).
 * argv[2]: JSON { staticDir, tag, sources, options? } (options: the JSON-able StageOptions).
 * Prints one JSON line: { ok: true, created, added, skipped, replaced } with artifact names, or
 * { ok: false, code, message, path? }.
 */
import { stage } from '../../src/core/stage/stage';
import type { StageOptions } from '../../src/core/stage/types';

interface Args {
  staticDir: string;
  tag: string;
  sources: string[];
  options?: StageOptions;
}

async function main(): Promise<void> {
  const { staticDir, tag, sources, options } = JSON.parse(process.argv[2] ?? '{}') as Args;
  try {
    const r = await stage(staticDir, tag, sources, options ?? {});
    const names = (list: { name: string }[]): string[] => list.map((a) => a.name);
    console.log(JSON.stringify({ ok: true, created: r.created, added: names(r.added), skipped: names(r.skipped), replaced: names(r.replaced) }));
  } catch (err) {
    const e = err as { code?: string; message?: string; path?: string };
    console.log(JSON.stringify({ ok: false, code: e.code, message: e.message ?? String(err), path: e.path }));
  }
}

void main();
