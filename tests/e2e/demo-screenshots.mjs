// Screenshots of the demo page in headless Chromium, at desktop and phone widths, light and
// dark, in five states: empty, a model loaded (from the cache, after a reload), after a
// two-turn chat, after a structured-output answer (desktop only), after a compare; and the
// two README pictures (docs/demo-compare.png and docs/demo-chat-mobile.png are copies of
// docs-*.png). For looking at the page, not a test:
// scripts/demo-screenshots.sh.
//
// Environment: SHOTS_OUT (default tests/e2e/out/screenshots), CHROMIUM (default /usr/bin/chromium),
// MODEL (default models/SmolLM2-135M-Instruct.Q4_1.gguf).

import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { chromiumFlags, root, serve } from './serve.mjs';

const out = process.env.SHOTS_OUT ?? join(root, 'tests/e2e/out/screenshots');
const model = process.env.MODEL ?? 'models/SmolLM2-135M-Instruct.Q4_1.gguf';
const SIZES = { desktop: { width: 1280, height: 860 }, mobile: { width: 390, height: 844 } };
const SLOW = 300_000;

const { base, server } = await serve();
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: await chromiumFlags(),
  headless: true,
});

try {
  await mkdir(out, { recursive: true });
  const page = await browser.newPage({ viewport: SIZES.desktop });
  page.on('pageerror', (e) => console.error(`pageerror: ${e.message}`));
  await page.goto(`${base}/www/`);

  const waitFor = (selector, states) => page.waitForFunction(
    ([sel, wanted]) => wanted.includes(document.querySelector(sel)?.dataset.state),
    [selector, states],
    { timeout: SLOW, polling: 100 },
  );
  const shoot = async (state, sizes = Object.keys(SIZES), schemes = ['light', 'dark']) => {
    for (const scheme of schemes) {
      await page.emulateMedia({ colorScheme: scheme });
      for (const size of sizes) {
        await page.setViewportSize(SIZES[size]);
        await page.waitForTimeout(150); // the plot redraws for its new width
        const path = join(out, `${state}-${size}-${scheme}.png`);
        await page.screenshot({ path, fullPage: true });
        console.log(path);
      }
    }
    await page.emulateMedia({ colorScheme: 'light' });
    await page.setViewportSize(SIZES.desktop);
  };
  const send = async (text) => {
    await page.fill('#prompt', text);
    await page.click('#generate');
  };

  await shoot('empty');

  // Loaded twice: the second load, after a reload, reads the model from the cache.
  for (const reload of [false, true]) {
    if (reload) await page.reload();
    await page.fill('#model-url', `/${model}`);
    await page.fill('#context', '1024');
    await page.click('#model-url-load');
    await waitFor('#model-status', ['ready', 'error']);
  }
  await shoot('loaded');

  await page.fill('#max-tokens', '32');
  await send('What is the capital of France? Answer in one sentence.');
  await waitFor('#stats', ['done', 'error']);
  await send('And what is the capital of Germany?');
  await waitFor('#stats', ['done', 'error']);
  await shoot('chat');
  // A third answer, photographed while it streams.
  await page.fill('#max-tokens', '48');
  await send('Tell me one thing about Berlin.');
  await page.waitForFunction(() => document.querySelectorAll('.message.streaming .body span').length > 6,
    null, { timeout: SLOW, polling: 20 });
  await page.screenshot({ path: join(out, 'chat-streaming-desktop-light.png'), fullPage: true });
  await waitFor('#stats', ['done', 'error']);
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.setViewportSize(SIZES.mobile);
  await page.locator('.message.assistant').last().scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(out, 'docs-chat-mobile.png') });
  await page.emulateMedia({ colorScheme: 'light' });
  await page.setViewportSize(SIZES.desktop);

  // The structured-output mode: an answer under the default schema, what it parses to, and
  // the tokens the schema forced.
  await page.click('#new-chat');
  await page.click('summary:has-text("Structured output")');
  await page.check('#structured');
  await page.fill('#max-tokens', '96');
  await send('Describe Ada Lovelace: her name, the age she died at (36) and three tags.');
  await waitFor('#stats', ['done', 'error']);
  await shoot('structured', ['desktop']);
  await page.uncheck('#structured');

  await page.click('#tab-compare');
  await page.fill('#max-tokens', '64');
  await page.click('#compare-run');
  await waitFor('#compare-summary', ['done', 'error']);
  await shoot('compare');
  const text = (id) => page.textContent(id);
  console.log(`compare: off ${await text('#off-speed')}, on ${await text('#on-speed')}, ` +
    `speedup ${await text('#compare-speedup')}, ${await text('#compare-identical')}; ` +
    `on: ${await text('#on-meta')}`);
  await page.locator('.workspace').screenshot({ path: join(out, 'docs-compare.png') });
} finally {
  await browser.close();
  server.kill();
}
