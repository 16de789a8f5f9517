// The Vite app of tests/vite-app, built from the packed package (scripts/vite-app.sh makes
// tests/vite-app/dist), run in Debian's headless Chromium on a cross-origin isolated page: the
// bundled worker and .wasm load SmolLM2, generate, and go through every call of the API without
// an error; on the CPU engine (SwiftShader is a fallback adapter) the bundled threaded .wasm and
// pool worker run its two threads.
//
//   scripts/test.sh e2e      (runs scripts/vite-app.sh, then the files here)

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { access, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { chromiumFlags, root, serve } from './serve.mjs';

const dist = join(root, 'tests/vite-app/dist');
let server;
let browser;

before(async () => {
  await access(join(dist, 'index.html')).catch(() => {
    throw new Error('tests/vite-app/dist is missing: run scripts/vite-app.sh');
  });
  ({ server } = await serve(dist, {
    headers: { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' },
  }));
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: await chromiumFlags(),
    headless: true,
  });
});

after(async () => {
  await browser?.close();
  server?.kill();
});

test('the Vite build of the packed package runs SmolLM2 in its worker', { timeout: 480_000 }, async () => {
  const page = await browser.newPage();
  const log = [];
  page.on('console', (m) => log.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => log.push(`pageerror: ${e.message}`));
  await page.goto(`http://127.0.0.1:${server.address().port}/`);
  await page.waitForFunction(() => ['done', 'error'].includes(document.body.dataset.state), null, {
    timeout: 400_000,
    polling: 200,
  });
  const state = await page.evaluate(() => ({
    state: document.body.dataset.state,
    inWorker: document.body.dataset.inWorker,
    status: document.querySelector('#status').textContent,
    output: document.querySelector('#output').textContent,
  }));
  assert.equal(state.state, 'done', `${state.status}\n${log.join('\n')}`);
  assert.equal(state.inWorker, 'true');
  assert.match(state.status,
    /^llama, \d+ parameters on (cpu|webgpu), in a worker, from network, drafted by .+ \(\d+ parameters\)$/);
  // SmolLM2 drafting for itself: every drafted token accepted.
  const drafted = log.map((line) => /draft model: (\d+)\/(\d+) accepted/.exec(line)).find(Boolean);
  assert.ok(drafted && Number(drafted[2]) > 0 && drafted[1] === drafted[2], log.join('\n'));
  assert.match(state.output, /\n4 tokens \(\d+ in "Hello"\), [\d.]+ tokens\/s, \d+\/\d+ accepted\n/);
  // The chat turns: the streamed one ends with usage, the follow-up reuses its cache.
  const cached = [...state.output.matchAll(/cached (\d+)/g)].map((m) => Number(m[1]));
  assert.ok(cached.length === 1, state.output);
  const reply = /\((stop|length), (\d+) cached, (cpu|gpu)\)/.exec(state.output);
  assert.ok(reply && Number(reply[2]) > 0, state.output);
  if (reply[3] === 'cpu') {
    const pool = log.map((line) => /cpu pool: threaded=true workers=1 steps=(\d+) threads=2 $/.exec(line)).find(Boolean);
    assert.ok(pool && Number(pool[1]) > 0, log.join('\n'));
  }
  // The bundle's own worker chunks and both relaxed SIMD .wasm (Chromium runs relaxed SIMD)
  // were fetched (the app disposed the worker at its end; its last call, initialize(), fetches
  // the single-threaded .wasm once more for the page's thread); the plain SIMD builds, for
  // browsers without it, are in the bundle too.
  const assets = await readdir(join(dist, 'assets'));
  for (const name of assets.filter((f) => /^(pool-)?worker-.*\.js$|_relaxed_bg.*\.wasm$/.test(f))) {
    assert.ok(server.requests(`/assets/${name}`).includes('GET'), name);
  }
  const wasm = assets.filter((f) => f.endsWith('.wasm'));
  assert.equal(wasm.filter((f) => f.includes('_relaxed_bg')).length, 2, wasm.join(' '));
  assert.equal(wasm.length, 4, wasm.join(' '));
  assert.ok(server.bytesSent('/models/SmolLM2-135M-Instruct.Q4_1.gguf') > 0);
});
