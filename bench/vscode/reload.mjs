// The reload part of `npm run bench:vscode`, measured as a user sees it, in the browser: a static
// directory of 3 folders of 5,000 builds (builds sorted by size, size and last use shown), the last
// folder expanded, then the window reloaded (Developer: Reload Window) several times. Each time:
// how long from the workbench's own start until every folder's row shows its count, and whether
// the folder comes back expanded. Prints figures; asserts nothing. See bench/README.md.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { chromiumArgs } from '../../scripts/vscode/headless.mjs';
import { startHeadless } from '../../scripts/start.mjs';

const FOLDERS = 3;

function makeBuilds(staticDir, folders, per) {
  for (let f = 0; f < folders; f++) {
    for (let i = 0; i < per; i++) {
      const b = path.join(staticDir, `board-${f}`, `R${100 + (i % 50)}-${15000 + i}.0.0`);
      fs.mkdirSync(b, { recursive: true });
      fs.writeFileSync(path.join(b, 'image.bin'), Buffer.alloc(1 + ((i * 7919) % 8192)));
      fs.writeFileSync(path.join(b, 'staged.timestamp'), '');
    }
  }
}

const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Resolves with the figures: each reload's times, and how many came back expanded. */
export async function measureReload({ runs = 5, builds = 5_000, log = console.log } = {}) {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'dss-bench-reload-'));
  const staticDir = path.join(base, 'static');
  const workspace = path.join(base, 'workspace');
  let t = Date.now();
  makeBuilds(staticDir, FOLDERS, builds);
  log(`reload: made ${FOLDERS} folders of ${builds} builds in ${Date.now() - t} ms`);
  fs.mkdirSync(path.join(workspace, '.vscode'), { recursive: true });
  fs.writeFileSync(
    path.join(workspace, '.vscode', 'settings.json'),
    JSON.stringify({ 'devserverStaging.staticDirs': [staticDir], 'devserverStaging.sortBuilds': 'size', 'devserverStaging.showSizeAndLastUse': true }, null, 2),
  );
  const server = await startHeadless({ workspace, home: path.join(base, 'vscode') });
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({ executablePath: server.bin.chromium, args: chromiumArgs, headless: true });
  const counted = `${new Intl.NumberFormat('en-US').format(builds)} builds`;
  const folders = Array.from({ length: FOLDERS }, (_, f) => `board-${f}`);
  const expanded = folders[folders.length - 1];
  const figures = { counts: [], countsFromNavigation: [], root: [], folders: [], activated: [], afterActivation: [], expanded: 0, runs: 0 };
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(server.url);
    const row = (label) => page.locator(`.monaco-list-row[aria-label^="${label}"]`).first();
    const container = page.locator('.activitybar [aria-label^="Devserver Staging"]').first();
    await container.waitFor({ timeout: 60_000 });
    await container.click();
    await row(`${expanded} ${counted}`).waitFor({ timeout: 120_000 });
    await row(expanded).click();
    // Its builds, on the row's level below.
    await page.locator('.monaco-list-row[aria-level="3"]').first().waitFor({ timeout: 60_000 });
    await page.waitForTimeout(2_000);
    for (let i = 0; i < runs; i++) {
      await page.keyboard.press('Escape');
      await page.keyboard.press('F1');
      await page.keyboard.type('Developer: Reload Window');
      await page.waitForTimeout(400);
      const navigated = page.waitForEvent('framenavigated', { predicate: (f) => f === page.mainFrame(), timeout: 60_000 });
      await page.keyboard.press('Enter');
      await navigated;
      // Polled in the page, on the page's clock: the moment the static directory's row shows (the
      // floor: VS Code has started the extension host, activated the extension and asked for the
      // view's roots), every folder's row, and every folder's count.
      const shownAt = await page.evaluate(
        ({ folders, counted, root }) =>
          new Promise((resolve, reject) => {
            const seen = {};
            const deadline = performance.now() + 120_000;
            const poll = () => {
              const labels = [...document.querySelectorAll('.monaco-list-row')].map((e) => e.getAttribute('aria-label') ?? '');
              const now = performance.now();
              if (seen.root === undefined && labels.some((l) => l.includes(root))) seen.root = now;
              if (seen.folders === undefined && folders.every((f) => labels.some((l) => l.startsWith(f)))) {
                seen.folders = now;
                seen.labels = labels.slice(0, 6);
              }
              if (folders.every((f) => labels.some((l) => l.startsWith(`${f} ${counted}`)))) return resolve({ ...seen, counts: now });
              if (now > deadline) return reject(new Error(`counts not shown: ${labels.join(' | ')}`));
              setTimeout(poll, 10);
            };
            poll();
          }),
        { folders, counted, root: staticDir },
      );
      const at = shownAt.counts;
      if (process.env.DEVSERVER_STAGING_BENCH_MARKS) log(`   rows when the folders showed: ${JSON.stringify(shownAt.labels)}`);
      const marks = await page.evaluate(() => Object.fromEntries(performance.getEntriesByType('mark').filter((m) => m.name.startsWith('code/')).map((m) => [m.name, m.startTime])));
      const start = marks['code/willStartWorkbench'];
      const back = await page
        .locator('.monaco-list-row[aria-level="3"]')
        .first()
        .waitFor({ timeout: 10_000 })
        .then(() => true, () => false);
      if (process.env.DEVSERVER_STAGING_BENCH_MARKS) log(`   the workbench's marks (ms after navigation): ${Object.entries(marks).sort((a, b) => a[1] - b[1]).map(([k, v]) => `${k.slice(5)} ${v.toFixed(0)}`).join(', ')}`);
      figures.runs++;
      if (back) figures.expanded++;
      figures.countsFromNavigation.push(at);
      // The first thing activate() registers that the workbench marks: when VS Code had started
      // the extension host and activated the extension. What comes before it is VS Code's own.
      const activated = marks['code/registerFilesystem/devserver-staging-artifact'];
      if (activated !== undefined && start !== undefined) {
        figures.activated.push(activated - start);
        figures.afterActivation.push(at - activated);
      }
      if (start !== undefined) {
        figures.counts.push(at - start);
        figures.root.push((shownAt.root ?? at) - start);
        figures.folders.push((shownAt.folders ?? at) - start);
      }
      log(`reload ${i + 1}: activated ${((activated ?? NaN) - (start ?? NaN)).toFixed(0)} ms, the static directory's row ${((shownAt.root ?? at) - (start ?? NaN)).toFixed(0)} ms, the folders' rows ${((shownAt.folders ?? at) - (start ?? NaN)).toFixed(0)} ms, every folder's count ${(start !== undefined ? at - start : NaN).toFixed(0)} ms after the workbench started (${at.toFixed(0)} ms after the page's navigation began); ${expanded} ${back ? 'expanded again' : 'collapsed'}`);
      await page.waitForTimeout(2_000);
    }
  } finally {
    await browser.close().catch(() => undefined);
    await server.stop();
    fs.rmSync(base, { recursive: true, force: true });
  }
  log(`reload: VS Code activated the extension a median ${median(figures.activated).toFixed(0)} ms after the workbench started (the floor), the static directory's row shown ${median(figures.root).toFixed(0)} ms, the folders' rows ${median(figures.folders).toFixed(0)} ms`);
  log(`reload: counts shown a median ${median(figures.afterActivation).toFixed(0)} ms after the extension was activated [${Math.min(...figures.afterActivation).toFixed(0)} - ${Math.max(...figures.afterActivation).toFixed(0)}]`);
  log(`reload: counts shown a median ${median(figures.counts).toFixed(0)} ms after the workbench started [${Math.min(...figures.counts).toFixed(0)} - ${Math.max(...figures.counts).toFixed(0)}] (aim: 2000); ${median(figures.countsFromNavigation).toFixed(0)} ms after navigation; expansion restored in ${figures.expanded} of ${figures.runs}`);
  return {
    'reload: counts shown after workbench start, median ms': median(figures.counts),
    'reload: counts shown after navigation, median ms': median(figures.countsFromNavigation),
    'reload: extension activated after workbench start (VS Code\'s part), median ms': median(figures.activated),
    'reload: counts shown after activation (ours), median ms': median(figures.afterActivation),
    'reload: static directory row shown after workbench start, median ms': median(figures.root),
    'reload: expansion restored, of runs': figures.expanded / Math.max(1, figures.runs),
  };
}
