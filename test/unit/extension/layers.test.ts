/**
 * The layers of the code, as folders: each imports only the layers below it and its own. The
 * order is the one ARCHITECTURE.md's map gives, and each folder's README.md says it in three lines.
 */
import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';

const ROOT = path.join(__dirname, '..', '..', '..', '..');
const SRC = path.join(ROOT, 'src');

/** The core's layers from the ground up; the front ends stand on the core's top. */
const CORE_LAYERS = ['base', 'fs', 'log', 'build', 'lock'];
const TOP = CORE_LAYERS.length;
const FRONT = TOP + 1;

/** A file's layer: its rank, and a name for messages. */
function layerOf(file: string): { rank: number; name: string } {
  const rel = path.relative(SRC, file).split(path.sep);
  if (rel[0] !== 'core') return { rank: FRONT, name: rel[0] };
  const i = CORE_LAYERS.indexOf(rel[1]);
  return i >= 0 ? { rank: i, name: `core/${rel[1]}` } : { rank: TOP, name: 'core' };
}

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...sources(p));
    else if (e.name.endsWith('.ts')) out.push(p);
  }
  return out;
}

/** What a file imports: module names as written. */
function importsOf(file: string): string[] {
  const text = fs.readFileSync(file, 'utf8');
  return [...text.matchAll(/(?:^|\n)\s*(?:import|export)[^'"]*?from\s+'([^']+)'|\brequire\('([^']+)'\)|\bimport\('([^']+)'\)/g)].map((m) => m[1] ?? m[2] ?? m[3]);
}

function resolve(from: string, spec: string): string | undefined {
  const p = path.resolve(path.dirname(from), spec);
  return [`${p}.ts`, path.join(p, 'index.ts')].find((c) => fs.existsSync(c));
}

describe('the layers of the code', () => {
  const files = sources(SRC);

  it('finds the core in its layers and the two front ends in theirs, each a folder with a README that says what it may import', () => {
    assert.ok(files.length > 100, `${files.length} source files`);
    for (const front of ['cli', 'extension']) assert.ok(fs.existsSync(path.join(SRC, front, 'README.md')), `src/${front}/README.md`);
    assert.deepEqual(
      fs.readdirSync(SRC).filter((f) => f.endsWith('.ts')),
      [],
      'no file loose in src/: the core and the two front ends each have their folder',
    );
    for (const layer of CORE_LAYERS) {
      const readme = path.join(SRC, 'core', layer, 'README.md');
      assert.ok(fs.existsSync(readme), `src/core/${layer}/README.md`);
      const below = CORE_LAYERS.slice(0, CORE_LAYERS.indexOf(layer));
      const text = fs.readFileSync(readme, 'utf8');
      for (const b of below) assert.ok(text.includes(b), `src/core/${layer}/README.md names ${b} among what it may import`);
    }
  });

  it('has no import that goes up a layer, and a core that never imports vscode', () => {
    const up: string[] = [];
    let edges = 0;
    for (const file of files) {
      const from = layerOf(file);
      for (const spec of importsOf(file)) {
        if (spec === 'vscode' && from.rank <= TOP) up.push(`${path.relative(ROOT, file)} imports vscode`);
        if (!spec.startsWith('.')) continue;
        const target = resolve(file, spec);
        if (target === undefined) continue;
        edges++;
        const to = layerOf(target);
        if (to.rank > from.rank) up.push(`${path.relative(ROOT, file)} (${from.name}) imports ${path.relative(ROOT, target)} (${to.name})`);
        if (from.rank === FRONT && to.rank === FRONT && from.name !== to.name) up.push(`${path.relative(ROOT, file)} (${from.name}) imports the other front end's ${path.relative(ROOT, target)}`);
      }
    }
    assert.ok(edges > 300, `${edges} imports read`);
    assert.deepEqual(up, []);
  });
});
