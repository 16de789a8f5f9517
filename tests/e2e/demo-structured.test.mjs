// The demo page's structured-output mode in Debian's headless Chromium with SmolLM2 (the CPU
// engine: SwiftShader is a software adapter): with "answers follow this JSON schema" on, the
// chat's answer parses, the parsed value shown under it is the answer's and has the schema's
// required keys, the tokens the schema forced are marked apart from the drafted ones (and the
// legend says so); a schema the package cannot compile shows the package's `grammar` error under
// the failed turn and in the banner, and the page answers again once the mode is off.
//
//   scripts/test.sh e2e      (builds the CLI and pkg/wasm, runs npm ci, then this file)
//
// Environment: CHROMIUM (default /usr/bin/chromium), E2E_OUT (screenshots, default tests/e2e/out).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { chromiumFlags, root, serve } from './serve.mjs';
import { errorShown, waitForState } from './demo-page.mjs';

const out = process.env.E2E_OUT ?? join(root, 'tests/e2e/out');
const MODEL = 'models/SmolLM2-135M-Instruct.Q4_1.gguf';
// Loading uploads ~100 MB and compiles every pipeline on a CPU-emulated GPU.
const SLOW = 240_000;

let server;
let browser;
let page;
const pageLog = [];


// Sends `text` in a new chat and waits until the answer ends; returns the Live card's state.
async function ask(text) {
  await page.click('#new-chat');
  await page.fill('#prompt', text);
  await page.click('#generate');
  return waitForState(page, '#stats', ['done', 'error']);
}

before(async () => {
  await mkdir(out, { recursive: true });
  let base;
  ({ base, server } = await serve());
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: await chromiumFlags(),
    headless: true,
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 1100 } });
  page.on('console', (m) => pageLog.push(`console.${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => pageLog.push(`pageerror: ${e.message}`));
  await page.goto(`${base}/www/`);
  await page.fill('#model-url', `/${MODEL}`);
  await page.fill('#context', '512');
  await page.click('#model-url-load');
  assert.equal(await waitForState(page, '#model-status', ['ready', 'error']), 'ready', await errorShown(page));
});

after(async () => {
  await browser?.close();
  server?.kill();
  if (pageLog.length > 0) console.log(`page log:\n${pageLog.join('\n')}`);
});

test('structured output: the answer parses, has the schema\'s keys, and the forced tokens are marked', { timeout: 2 * SLOW }, async () => {
  await page.click('summary:has-text("Structured output")');
  assert.ok(await page.isDisabled('#schema'), 'the schema box is editable while the mode is off');
  await page.check('#structured');
  const schema = JSON.parse(await page.inputValue('#schema'));
  assert.ok(schema.required.length > 0, 'the default schema requires no key');
  await page.fill('#system', 'Answer in JSON.');
  await page.fill('#max-tokens', '96');
  await page.selectOption('#draft', 'suffix');
  const state = await ask('Describe Ada Lovelace: her name, the age she died at (36) and three tags.');
  assert.equal(state, 'done', await errorShown(page));

  const answer = await page.textContent('.message.assistant .body');
  assert.equal(await page.getAttribute('.message.assistant .parsed', 'data-state'), 'valid',
    `${await page.textContent('.message.assistant .parsed')}\nanswer: ${answer}`);
  const shown = JSON.parse(await page.textContent('.message.assistant .parsed pre'));
  assert.deepEqual(shown, JSON.parse(answer));
  for (const key of schema.required) assert.ok(key in shown, `${key} missing from ${JSON.stringify(shown)}`);

  // The schema's keys and separators came as free drafts, styled apart from drafted tokens.
  const forced = await page.$$('.message.assistant span.forced[data-provenance="forced"]');
  assert.ok(forced.length > 0, 'no token is marked forced');
  assert.equal(await page.$$eval('.message.assistant span.forced.draft', (s) => s.length), 0);
  assert.equal(Number(await page.getAttribute('.message.assistant .meta', 'data-forced')), forced.length);
  assert.match(await page.textContent('.message.assistant .meta'), /\d+ forced by the schema/);
  assert.match(await page.textContent('.legend'), /token forced by the schema/);
  await page.screenshot({ path: join(out, 'demo-structured.png'), fullPage: true });
});

test('a schema the package cannot compile shows its error, and the page answers again', { timeout: 2 * SLOW }, async () => {
  await page.fill('#max-tokens', '4');
  for (const bad of ['{"type": "object", "properties": ', '{"type": "nonsense"}']) {
    await page.fill('#schema', bad);
    assert.equal(await ask('Describe a person.'), 'error');
    assert.equal(await page.textContent('#error-code'), 'grammar', bad);
    assert.match(await page.textContent('#error-hint'), /JSON schema box/);
    const shown = await page.textContent('.message.assistant .parsed.error');
    assert.match(shown, /schema error \(grammar\)/, bad);
    assert.match(await page.textContent('.message.assistant .meta'), /failed/);
    await page.click('#error-close');
  }
  // The same page, the mode off: a plain answer.
  await page.uncheck('#structured');
  assert.equal(await ask('What is the capital of France?'), 'done', await errorShown(page));
  assert.equal((await page.$$('.message.assistant .parsed')).length, 0);
  assert.ok((await page.textContent('.message.assistant .body')).length > 0);
});
