// The demo page end to end in Debian's headless Chromium: load SmolLM2 through the URL field
// (the CPU engine, since SwiftShader is a software adapter), run Compare greedily with the
// n-gram drafter and require that both sides stream exactly the tokens and text the native CPU
// engine (`runahead generate --json --backend cpu`) gives; after a reload the model comes from
// the cache and the page says so; Compare on a prompt that repeats itself shows accepted
// drafts, identical texts and a speedup, and when sampling the same seed gives the same plain
// sample; a two-turn chat with a system prompt reuses the first turn from the cache; Stop ends
// an answer and the engine answers again; a draft model given to the page is offered as a
// drafter exactly when the package reports it loaded; a failed load shows its error code and
// hint.
//
//   scripts/test.sh e2e      (builds the CLI and pkg/wasm, runs npm ci, then this file)
//
// Generations here are a few tokens long: the machines that run this are small and shared.
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
import { errorShown, waitForState } from './demo-page.mjs';

const out = process.env.E2E_OUT ?? join(root, 'tests/e2e/out');
const runahead = process.env.RUNAHEAD_BIN ?? join(root, 'target/debug/runahead');
const MODEL = 'models/SmolLM2-135M-Instruct.Q4_1.gguf';
const PROMPT = 'The capital of France is';
const MAX_TOKENS = 4;
// A raw prompt whose continuation repeats it: the n-gram drafter's drafts are accepted.
const REPEATING = 'one two three four five, one two three four five, one two three four five, one two';
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



async function tokensIn(selector) {
  return page.$$eval(`${selector} span[data-token]`, (spans) => spans.map((s) => Number(s.dataset.token)));
}

// The numbers under each answer of the chat: {prompt, cached} per assistant message.
async function turns() {
  return page.$$eval('.message.assistant .meta', (metas) => metas.map((m) => ({
    prompt: Number(m.dataset.prompt),
    cached: Number(m.dataset.cached),
    text: m.parentElement.querySelector('.body').textContent,
  })));
}

// Runs Compare with the page's temperature and seed (greedy unless a test sets them).
async function runCompare(prompt, maxTokens, drafter) {
  await page.click('#tab-compare');
  await page.fill('#compare-prompt', prompt);
  await page.uncheck('#chat');
  await page.fill('#max-tokens', String(maxTokens));
  await page.selectOption('#draft', drafter);
  await page.click('#compare-run');
  const done = await waitForState(page, '#compare-summary', ['done', 'error']);
  assert.equal(done, 'done', await errorShown(page));
}

async function send(text) {
  await page.fill('#prompt', text);
  await page.click('#generate');
}

before(async () => {
  await mkdir(out, { recursive: true });
  ({ base, server } = await serve());
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: await chromiumFlags(),
    headless: true,
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
  page.on('console', (m) => pageLog.push(`console.${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => pageLog.push(`pageerror: ${e.message}`));
  await page.goto(`${base}/www/`);
});

after(async () => {
  await browser?.close();
  server?.kill();
  if (pageLog.length > 0) console.log(`page log:\n${pageLog.join('\n')}`);
});

test('the demo streams the native CPU engine greedy tokens, with speculation off and on', { timeout: 2 * SLOW }, async () => {
  const expected = nativeGenerate();
  await page.fill('#model-url', `/${MODEL}`);
  await page.fill('#context', '256');
  await page.click('#model-url-load');
  const loaded = await waitForState(page, '#model-status', ['ready', 'error']);
  assert.equal(loaded, 'ready', await errorShown(page));
  assert.match(await page.textContent('#model-status'), /llama, 135M parameters/);
  // Where the model runs and where its bytes came from.
  assert.match(await page.textContent('#backend-badge'), /^(CPU engine|WebGPU)$/);
  assert.equal(await page.textContent('#source-badge'), 'downloaded');
  assert.match(await page.textContent('#events'), /stored in the model cache/);
  // The draft-model drafter is offered exactly when the package reports a draft model.
  const draftOffered = await page.$eval('#draft option[value="model"]', (o) => !o.disabled);
  assert.equal(draftOffered, false);

  await runCompare(PROMPT, MAX_TOKENS, 'ngram');
  const want = await expected;
  assert.deepEqual(await tokensIn('#off-output'), want.tokens);
  assert.deepEqual(await tokensIn('#on-output'), want.tokens);
  assert.equal(await page.textContent('#off-output'), want.text);
  assert.equal(await page.textContent('#on-output'), want.text);
  assert.equal(await page.getAttribute('#compare-identical', 'data-same'), 'true');
  // The Live card shows the last generation: the plain side.
  assert.equal(await page.textContent('#stat-stop'), want.stats.stop_reason);
  assert.equal(await page.textContent('#stat-generated'), String(want.tokens.length));
});

test('after a reload the demo reads the model from the cache and says so', { timeout: 2 * SLOW }, async () => {
  const sent = server.bytesSent(`/${MODEL}`);
  await page.reload();
  await page.fill('#model-url', `/${MODEL}`);
  await page.fill('#context', '256');
  await page.click('#model-url-load');
  assert.equal(await waitForState(page, '#model-status', ['ready', 'error']), 'ready', await errorShown(page));
  assert.equal(server.bytesSent(`/${MODEL}`), sent, 'model bytes were downloaded again');
  assert.equal(await page.textContent('#source-badge'), 'from the model cache');
  assert.match(await page.textContent('#events'), /read from the model cache \([\d.]+ MB, no download\)/);
});

test('Compare shows accepted drafts, identical texts and the speedup', { timeout: 2 * SLOW }, async () => {
  // A fixed depth: "auto" weighs drafts against timings, which a loaded machine can tip
  // towards not drafting at all.
  await page.selectOption('#depth', '8');
  await runCompare(REPEATING, 16, 'ngram');
  await page.selectOption('#depth', 'auto');
  const on = await tokensIn('#on-output');
  assert.equal(on.length, 16);
  assert.deepEqual(await tokensIn('#off-output'), on);
  assert.ok((await page.$$('#on-output span.draft')).length > 0, 'no drafted token was accepted');
  assert.equal((await page.$$('#off-output span.draft')).length, 0);
  assert.equal(await page.getAttribute('#compare-identical', 'data-same'), 'true');
  assert.match(await page.textContent('#compare-identical'), /identical/);
  const speed = async (side) => Number(await page.getAttribute(`#${side}-speed`, 'data-value'));
  const [onSpeed, offSpeed] = [await speed('on'), await speed('off')];
  assert.ok(onSpeed > 0 && offSpeed > 0, `${onSpeed} ${offSpeed}`);
  assert.equal(await page.textContent('#compare-speedup'), `${(onSpeed / offSpeed).toFixed(2)}×`);
  // The plot drew a line for each side, and bars for the accepted drafts.
  assert.equal(await page.$$eval('#plot polyline', (lines) => lines.length), 2);
  assert.ok((await page.$$('#plot rect.bar.on')).length > 0);
  await page.screenshot({ path: join(out, 'demo-compare.png'), fullPage: true });
});

test('Compare when sampling: the same seed gives the same plain sample, and the page says what to expect', { timeout: 2 * SLOW }, async () => {
  const sample = async () => {
    await runCompare(REPEATING, 8, 'suffix');
    return {
      off: await tokensIn('#off-output'),
      on: await tokensIn('#on-output'),
      same: await page.getAttribute('#compare-identical', 'data-same'),
      verdict: await page.textContent('#compare-identical'),
    };
  };
  await page.fill('#temperature', '0.9');
  await page.fill('#seed', '7');
  const first = await sample();
  const second = await sample();
  await page.fill('#temperature', '0');
  await page.fill('#seed', '0');
  // Plain sampling is reproducible from the seed. A speculative sample depends on the drafts
  // too, and the suffix drafter has learned the first run's answers, so it may differ.
  assert.deepEqual(second.off, first.off);
  assert.equal(second.on.length, 8);
  for (const run of [first, second]) {
    assert.match(run.verdict, run.same === 'true' ? /identical/ : /different samples/);
  }
});

test('a two-turn chat with a system prompt reuses the first turn from the cache', { timeout: 2 * SLOW }, async () => {
  await page.click('#tab-chat');
  await page.click('#new-chat');
  await page.fill('#system', 'Answer briefly.');
  await page.fill('#max-tokens', '6');
  await page.selectOption('#draft', 'suffix');
  await send('What is the capital of France?');
  assert.equal(await waitForState(page, '#stats', ['done', 'error']), 'done', await errorShown(page));
  await send('And of Germany?');
  assert.equal(await waitForState(page, '#stats', ['done', 'error']), 'done', await errorShown(page));

  assert.equal(await page.$$eval('.message.user', (m) => m.length), 2);
  const [first, second] = await turns();
  assert.ok(first.text.length > 0 && second.text.length > 0);
  // The second prompt is the first one, its answer and the new message: everything up to the
  // answer was in the cache, and only the rest was prefilled.
  assert.ok(second.cached >= first.prompt, `${second.cached} cached, first prompt ${first.prompt}`);
  assert.ok(second.cached < second.prompt);
  assert.equal(await page.textContent('#stat-cached'), `${second.cached} / ${second.prompt - second.cached}`);
  await page.screenshot({ path: join(out, 'demo-chat.png'), fullPage: true });
});

test('Stop ends an answer cleanly and the engine answers again', { timeout: 2 * SLOW }, async () => {
  await page.click('#new-chat');
  await page.fill('#max-tokens', '64');
  await send('Tell me a long story about a dragon.');
  await page.waitForFunction(
    () => document.querySelector('#stats').dataset.state === 'generating' &&
      document.querySelectorAll('.message.streaming span[data-token]').length > 0,
    null,
    { timeout: SLOW, polling: 50 },
  );
  await page.click('#stop');
  assert.equal(await waitForState(page, '#stats', ['done', 'error']), 'done', await errorShown(page));
  assert.equal(await page.textContent('#stat-stop'), 'cancelled');
  const stopped = await tokensIn('.message.assistant');
  assert.ok(stopped.length >= 1 && stopped.length < 64, `${stopped.length} tokens`);
  assert.match(await page.textContent('.message.assistant .meta'), /stopped/);

  // The same conversation again, one token: it is the first token of the stopped answer.
  await page.click('#new-chat');
  await page.fill('#max-tokens', '1');
  await send('Tell me a long story about a dragon.');
  assert.equal(await waitForState(page, '#stats', ['done', 'error']), 'done', await errorShown(page));
  assert.deepEqual(await tokensIn('.message.assistant'), stopped.slice(0, 1));
  assert.equal(await page.textContent('#stat-stop'), 'max_tokens');
});

test('a draft model given to the page is offered as the drafter "model" exactly when the package loads it', { timeout: 2 * SLOW }, async () => {
  // SmolLM2 drafting for itself: the tokenizers match. A package without draft-model support
  // ignores the option; the page must then say so and keep the drafter off.
  await page.click('summary:has-text("Draft model")');
  await page.fill('#draft-url', `/${MODEL}`);
  await page.fill('#model-url', `/${MODEL}`);
  await page.click('#model-url-load');
  assert.equal(await waitForState(page, '#model-status', ['ready', 'error']), 'ready', await errorShown(page));
  const reported = (await page.textContent('#model-facts')).includes('draft model');
  const offered = await page.$eval('#draft option[value="model"]', (o) => !o.disabled);
  assert.equal(offered, reported);
  assert.match(await page.textContent('#draft-note'),
    reported ? /Draft model loaded/ : /does not report a draft model/);
  await page.fill('#draft-url', '');
});

test('a failed load shows the error code with its hint', { timeout: SLOW }, async () => {
  await page.fill('#model-url', '/models/no-such-model.gguf');
  await page.click('#model-url-load');
  assert.equal(await waitForState(page, '#model-status', ['ready', 'error']), 'error');
  assert.ok(await page.isVisible('#error'));
  assert.equal(await page.textContent('#error-code'), 'fetch');
  assert.match(await page.textContent('#error-hint'), /could not be downloaded/);
  assert.ok(await page.isDisabled('#generate'));
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
