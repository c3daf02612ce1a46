// Show Usage as a user sees it, in the browser of the tree's UI check (tree.ui.mjs): opened from
// the context menu of the eve-release folder on the demo's week of history, the timeline drawn
// (a lane per build, bars in the theme's colours), the day/week toggle working without a script,
// and a screenshot of the page (usage-page.png).

/** The frame of the usage page: a webview's content sits in an iframe inside VS Code's own. */
async function usageFrame(page, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    for (const frame of page.frames()) {
      const found = await frame.locator('h1', { hasText: 'Usage of' }).count().catch(() => 0);
      if (found > 0) return frame;
    }
    await page.waitForTimeout(200);
  }
  throw new Error('the usage page did not show');
}

export async function checkUsagePage({ page, row, check, shoot, vp }) {
  await row('eve-release').click({ button: 'right' });
  const menu = page.locator('.context-view .monaco-menu:visible').first();
  await menu.waitFor({ timeout: 5_000 });
  await page.waitForTimeout(300);
  await menu.getByText('Show Usage').first().click();
  let frame;
  await check('Show Usage on a folder opens its page, titled by the folder', async () => {
    frame = await usageFrame(page);
    return (await frame.locator('h1').first().innerText()).trim() === 'Usage of eve-release';
  });
  if (frame === undefined) return;
  await check('the day\'s timeline: a lane per build used today, bars coloured by the theme (not black, not none)', async () => {
    const day = frame.locator('section.day');
    if (!(await day.isVisible())) return false;
    const lanes = await day.locator('g.lane').count();
    const fill = await day.locator('rect.hold.released').first().evaluate((el) => getComputedStyle(el).fill);
    return lanes >= 3 && fill !== '' && fill !== 'none' && fill !== 'rgb(0, 0, 0)';
  });
  await frame.locator('label[for="w-week"]').click();
  await page.waitForTimeout(300);
  await check('the week toggle shows the week (no script: a radio button and CSS)', async () => {
    const week = frame.locator('section.week');
    const shown = (await week.isVisible()) && !(await frame.locator('section.day').isVisible());
    const bars = await week.locator('rect.hold').count();
    const forced = await week.locator('h2', { hasText: 'Force-releases' }).count();
    return shown && bars >= 20 && forced === 1;
  });
  await page.mouse.move(vp.width - 5, vp.height - 5);
  await page.waitForTimeout(300);
  await shoot('usage-page.png', { x: 0, y: 0, width: vp.width, height: vp.height });
  await page.keyboard.press('Control+W').catch(() => undefined);
}
