// Renders media/icon.png, the 128×128 PNG the marketplace shows (it takes no SVG), from the view's
// media/icon.svg: the same strokes in white on a solid tile, so it reads on light and dark pages.
// Needs rsvg-convert (Debian: librsvg2-bin). `node scripts/icon.mjs`
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const svg = readFileSync('media/icon.svg', 'utf8');
const glyph = svg.replace('width="24" height="24"', 'x="16" y="16" width="96" height="96"').replace('stroke="currentColor"', 'stroke="#ffffff"');
if (!glyph.includes('width="96"') || !glyph.includes('#ffffff')) throw new Error('media/icon.svg changed shape: update scripts/icon.mjs');
const tile = `<svg xmlns="http://www.w3.org/2000/svg" width="128" height="128">
  <rect width="128" height="128" rx="24" fill="#2f6fb3"/>
  ${glyph}
</svg>`;
execFileSync('rsvg-convert', ['--width', '128', '--height', '128', '--output', 'media/icon.png'], { input: tile });
