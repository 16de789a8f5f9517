// The demo page end to end in Debian's headless Chromium (WebGPU on SwiftShader): load SmolLM2
// through the URL field, generate greedily with the n-gram drafter, and require exactly the
// tokens and text the native CPU reference (`runahead generate --json --backend cpu`) gives.
// Then stop a generation with the Stop button, and check the package's error type.
//
//   scripts/test.sh e2e      (builds the CLI and pkg/wasm, runs npm ci, then this file)
//
// SwiftShader decodes SmolLM2 at about 1 token/s, so generations here are a few tokens long.
// Environment: RUNAHEAD_BIN (native CLI, default target/debug/runahead), CHROMIUM
// (default /usr/bin/chromium), E2E_OUT (screenshots, default tests/e2e/out).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';
import { chromiumFlags, root, serve } from './serve.mjs';

const out = process.env.E2E_OUT ?? join(root, 'tests/e2e/out');
const runahead = process.env.RUNAHEAD_BIN ?? join(root, 'target/debug/runahead');
const MODEL = 'models/SmolLM2-135M-Instruct.Q4_1.gguf';
const PROMPT = 'The capital of France is';
const MAX_TOKENS = 4;
// Loading uploads ~100 MB and compiles every pipeline on a CPU-emulated GPU.
const SLOW = 240_000;

let server;
let browser;
let page;
let base;
const pageLog = [];


async function nativeGenerate() {
  const args = ['generate', '--model', join(root, MODEL), '--prompt', PROMPT,
    '--max-tokens', String(MAX_TOKENS), '--backend', 'cpu', '--draft', 'none', '--json'];
  const { stdout } = await promisify(execFile)(runahead, args, { maxBuffer: 1 << 20 });
  return JSON.parse(stdout);
}


// Waits until `selector`'s data-state is one of `states`, and returns it.
async function waitForState(selector, states, timeout = SLOW) {
  const handle = await page.waitForFunction(
    ([sel, wanted]) => {
      const state = document.querySelector(sel)?.dataset.state;
      return wanted.includes(state) && state;
    },
    [selector, states],
    { timeout, polling: 100 },
  );
  return handle.jsonValue();
}

async function errorShown() {
  return (await page.isVisible('#error')) ? page.textContent('#error') : '';
}

async function streamedTokens() {
  return page.$$eval('#output span', (spans) => spans.map((s) => Number(s.dataset.token)));
}

before(async () => {
  await mkdir(out, { recursive: true });
  ({ base, server } = await serve());
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: await chromiumFlags(),
    headless: true,
  });
  page = await browser.newPage({ viewport: { width: 1100, height: 1000 } });
  page.on('console', (m) => pageLog.push(`console.${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => pageLog.push(`pageerror: ${e.message}`));
  await page.goto(`${base}/www/`);
});

after(async () => {
  await browser?.close();
  server?.kill();
  if (pageLog.length > 0) console.log(`page log:\n${pageLog.join('\n')}`);
});

test('the demo streams the native CPU reference greedy tokens', { timeout: 2 * SLOW }, async () => {
  const expected = nativeGenerate();
  await page.fill('#model-url', `/${MODEL}`);
  await page.fill('#context', '256');
  await page.click('#model-url-load');
  const loaded = await waitForState('#model-status', ['ready', 'error']);
  assert.equal(loaded, 'ready', await errorShown());
  assert.match(await page.textContent('#model-status'), /llama, 135M parameters/);

  await page.fill('#prompt', PROMPT);
  await page.uncheck('#chat');
  await page.fill('#max-tokens', String(MAX_TOKENS));
  await page.fill('#temperature', '0');
  await page.selectOption('#draft', 'ngram');
  await page.click('#generate');
  const done = await waitForState('#stats', ['done', 'error']);
  assert.equal(done, 'done', await errorShown());

  const want = await expected;
  assert.deepEqual(await streamedTokens(), want.tokens);
  assert.equal(await page.textContent('#output'), want.text);
  assert.equal(await page.textContent('#stat-stop'), want.stats.stop_reason);
  assert.equal(await page.textContent('#stat-generated'), String(want.tokens.length));
  await page.screenshot({ path: join(out, 'demo.png'), fullPage: true });
});

test('Stop ends a generation cleanly and the engine generates again', { timeout: 2 * SLOW }, async () => {
  await page.fill('#max-tokens', '64');
  await page.click('#generate');
  // The output of the previous test is cleared when Generate is clicked.
  await page.waitForFunction(
    () => document.querySelector('#stats').dataset.state === 'generating' &&
      document.querySelectorAll('#output span').length > 0,
    null,
    { timeout: SLOW, polling: 50 },
  );
  await page.click('#stop');
  const done = await waitForState('#stats', ['done', 'error']);
  assert.equal(done, 'done', await errorShown());
  assert.equal(await page.textContent('#stat-stop'), 'cancelled');
  const stopped = await streamedTokens();
  assert.ok(stopped.length >= 1 && stopped.length < 64, `${stopped.length} tokens`);

  // Same prompt again, one token: it is the first token of the earlier greedy run.
  await page.fill('#max-tokens', '1');
  await page.click('#generate');
  assert.equal(await waitForState('#stats', ['done', 'error']), 'done', await errorShown());
  assert.deepEqual(await streamedTokens(), stopped.slice(0, 1));
  assert.equal(await page.textContent('#stat-stop'), 'max_tokens');
});

test('the package reports bad input as a RunaheadError with a code', async () => {
  const outcome = await page.evaluate(async () => {
    const { Runahead, RunaheadError } = await import('/pkg/index.js');
    const codeOf = async (promise) => {
      try {
        await promise;
        return 'no error';
      } catch (e) {
        return `${e instanceof RunaheadError} ${e.code}`;
      }
    };
    return {
      gguf: await codeOf(Runahead.load(new Uint8Array([71, 71, 85, 70, 9, 9]))),
      source: await codeOf(Runahead.load(42)),
      fetch: await codeOf(Runahead.load('/models/no-such-model.gguf')),
      // Options are checked before the bytes are parsed.
      historyTokens: await codeOf(Runahead.load(new Uint8Array([71, 71, 85, 70, 9, 9]), { historyTokens: 2 ** 21 })),
      backend: await codeOf(Runahead.load(new Uint8Array([71, 71, 85, 70, 9, 9]), { backend: 'gpu' })),
    };
  });
  assert.deepEqual(outcome, {
    gguf: 'true gguf',
    source: 'true invalid_source',
    fetch: 'true fetch',
    historyTokens: 'true invalid_option',
    backend: 'true invalid_option',
  });
});
