// The CPU engine on several threads in Debian's headless Chromium, WebGPU off: a page served
// with COOP `same-origin` + COEP `require-corp` (cross-origin isolated) loads the package's
// threaded WebAssembly in the engine's worker, whose pool runs on Web Workers; two threads give
// exactly the tokens of one thread and of the native f32 reference (`runahead generate --backend
// reference`, as tests/e2e/cpu-fallback.test.mjs compares), speculative = plain, and the pool's
// worker took part in the steps; the build without relaxed SIMD gives the same tokens. A page that is not isolated, the engine on the page's own
// thread (`worker: false`) and a threaded build that fails to load fall back to one thread and
// say why in info(). The GPU engine (on
// SwiftShader) runs in the threaded build as in the other. Decode speed on one and two threads,
// same page, is printed (docs/cpu-engine.md).
//
//   scripts/test.sh e2e      (builds the CLI, pkg/wasm and pkg/wasm-threads, then the files here)
//
// Environment: RUNAHEAD_BIN (native CLI, default target/debug/runahead), CHROMIUM,
// THREADS_BENCH_TOKENS (tokens of the speed runs, default 32).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';
import { chromiumFlags, chromiumFlagsWithoutWebGpu, root, serve } from './serve.mjs';

const runahead = process.env.RUNAHEAD_BIN ?? join(root, 'target/debug/runahead');
const MODEL = 'models/SmolLM2-135M-Instruct.Q4_1.gguf';
// A prompt whose continuation is determined: the CPU engine rounds activations to 8 bits, so its
// greedy text is the f32 reference's wherever the reference's top two are clearly apart (the native
// tests compare them teacher-forced, by that rule), and a free continuation meets a near tie
// within 16 tokens (" Paris.\n\nThe" then "answer" or "United": which one the CPU engine takes
// depends on the order its products are summed in, per block).
const PROMPT = 'The first ten prime numbers are 2, 3, 5,';
const MAX_TOKENS = 16;
const BENCH_TOKENS = Number(process.env.THREADS_BENCH_TOKENS ?? 32);
const SLOW = 300_000;
// What a cross-origin isolated page is served with.
const ISOLATION = {
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-embedder-policy': 'require-corp',
};

let isolated;
let plain;
let browser;
const pageLog = [];

async function nativeReference() {
  const args = ['generate', '--model', join(root, MODEL), '--prompt', PROMPT,
    '--max-tokens', String(MAX_TOKENS), '--backend', 'reference', '--draft', 'none', '--json'];
  const { stdout } = await promisify(execFile)(runahead, args, { maxBuffer: 1 << 20 });
  return JSON.parse(stdout);
}

// A page of `server` with no WebGPU (launched without its flags, navigator.gpu removed).
async function openPage(server) {
  const page = await browser.newPage();
  await page.addInitScript(() => {
    delete Navigator.prototype.gpu;
    Object.defineProperty(Navigator.prototype, 'gpu', { value: undefined, configurable: true });
  });
  page.on('console', (m) => pageLog.push(`console.${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => pageLog.push(`pageerror: ${e.message}`));
  await page.goto(`${server.base}/pkg/README.md`);
  return page;
}

// Loads the model with `options` on `page`, generates greedily (plain, then speculative), and
// reports info(), the tokens, the decode speed and the CPU pool's counters.
function loadAndGenerate(page, options, { maxTokens = MAX_TOKENS, speculative = true } = {}) {
  return page.evaluate(async ({ url, prompt, maxTokens, options, speculative }) => {
    const pkg = await import('/pkg/index.js');
    const events = [];
    const model = await pkg.Runahead.load(url, { context: 256, ...options, onEvent: (e) => events.push(e) });
    try {
      const run = async (draft) => {
        const r = await model.generate(prompt, { maxTokens, temperature: 0, draft, depth: 4 }).result;
        return { tokens: r.tokens, text: r.text, tokensPerSecond: r.stats.tokens_per_second, backend: r.stats.backend };
      };
      const runs = { plain: await run('none') };
      if (speculative) runs.ngram = await run('ngram');
      return {
        info: model.info(),
        runs,
        pool: await model.cpuPool(),
        memory: await model.wasmMemoryBytes(),
        events,
        isolated: crossOriginIsolated,
      };
    } finally {
      model.dispose();
    }
  }, { url: `/${MODEL}`, prompt: PROMPT, maxTokens, options, speculative });
}

before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: await chromiumFlagsWithoutWebGpu(),
    headless: true,
  });
  isolated = await serve(root, { headers: ISOLATION });
  plain = await serve(root);
});

after(async () => {
  await browser?.close();
  isolated?.server.kill();
  plain?.server.kill();
  if (pageLog.length > 0) console.log(`page log:\n${pageLog.join('\n')}`);
});

test('an isolated page runs the CPU engine on two threads with the tokens of one and of the reference',
  { timeout: 2 * SLOW }, async () => {
    const reference = nativeReference();
    const page = await openPage(isolated);
    const two = await loadAndGenerate(page, { threads: 2 });
    const one = await loadAndGenerate(page, { threads: 1 });
    // The threaded build without relaxed SIMD (what a browser without it loads), asked for by
    // its URL: the same tokens.
    const plainSimd = await loadAndGenerate(page, { threads: 2, wasmThreadsUrl: '/pkg/wasm-threads/runahead_bg.wasm' },
      { speculative: false });
    await page.close();

    assert.equal(two.isolated, true, 'the page is cross-origin isolated');
    assert.equal(two.info.backend, 'cpu');
    assert.equal(two.info.threads, 2, JSON.stringify(two.info));
    assert.equal(two.info.threadsReason, undefined);
    // Chromium runs relaxed SIMD: the package loads the build that uses it.
    assert.equal(two.info.adapter, 'CPU engine (simd128+relaxed, 2 threads)');
    assert.deepEqual(two.events.filter((e) => e.type === 'threads_fallback'), []);
    // The pool's worker started and joined the forwards' steps: two threads did the work.
    assert.equal(two.pool.threaded, true);
    assert.equal(two.pool.workers, 1, JSON.stringify(two.pool));
    assert.ok(two.pool.stepsJoined > 0, JSON.stringify(two.pool));
    // The model's bytes are in the shared memory the workers see.
    const fileBytes = (await stat(join(root, MODEL))).size;
    assert.ok(two.memory > fileBytes, `wasm memory ${two.memory} holds the ${fileBytes}-byte model`);
    assert.equal(one.info.threads, 1);
    assert.equal(one.info.adapter, 'CPU engine (simd128+relaxed, 1 thread)');
    assert.equal(plainSimd.info.adapter, 'CPU engine (simd128, 2 threads)');

    const want = await reference;
    assert.deepEqual(one.runs.plain.tokens, want.tokens, 'one thread: the f32 reference\'s tokens');
    for (const [name, run] of Object.entries(two.runs)) {
      assert.deepEqual(run.tokens, want.tokens, `two threads, ${name}: the reference's tokens`);
      assert.equal(run.backend, 'cpu');
    }
    assert.deepEqual(two.runs.ngram.tokens, one.runs.ngram.tokens);
    assert.deepEqual(plainSimd.runs.plain.tokens, want.tokens, 'the plain SIMD build: the reference\'s tokens');
    assert.equal(two.runs.plain.text, want.text);
  });

test('a page that is not isolated, the engine on the page\'s thread, or a threaded build that does not load: one thread and the reason',
  { timeout: 2 * SLOW }, async () => {
    const page = await openPage(plain);
    const got = await loadAndGenerate(page, { threads: 2 }, { maxTokens: 4, speculative: false });
    await page.close();
    assert.equal(got.isolated, false);
    assert.equal(got.info.threads, 1);
    assert.match(got.info.threadsReason ?? '', /one thread of the 2 asked: the page is not cross-origin isolated.*Cross-Origin-Embedder-Policy: require-corp/);
    assert.deepEqual(got.pool, { threaded: false, workers: 0, stepsJoined: 0 });

    const onPage = await openPage(isolated);
    const main = await loadAndGenerate(onPage, { threads: 2, worker: false }, { maxTokens: 4, speculative: false });
    // A threaded build that does not load: an event, and the single-threaded one runs.
    const missing = await loadAndGenerate(onPage, { threads: 2, wasmThreadsUrl: '/missing/runahead_bg.wasm' },
      { maxTokens: 4, speculative: false });
    await onPage.close();
    assert.equal(main.isolated, true);
    assert.equal(main.info.threads, 1);
    assert.match(main.info.threadsReason ?? '', /main thread/);
    assert.deepEqual(main.runs.plain.tokens, got.runs.plain.tokens);
    assert.equal(missing.info.threads, 1);
    assert.match(missing.info.threadsReason ?? '', /single-threaded WebAssembly build is loaded/);
    assert.deepEqual(missing.events.map((e) => e.type).filter((t) => t === 'threads_fallback'), ['threads_fallback']);
    assert.deepEqual(missing.pool, { threaded: false, workers: 0, stepsJoined: 0 });
    assert.deepEqual(missing.runs.plain.tokens, got.runs.plain.tokens);
  });

test('the GPU engine runs in the threaded build', { timeout: 2 * SLOW }, async () => {
  const reference = nativeReference();
  const gpuBrowser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: await chromiumFlags(),
    headless: true,
  });
  try {
    const page = await gpuBrowser.newPage();
    page.on('pageerror', (e) => pageLog.push(`pageerror: ${e.message}`));
    await page.goto(`${isolated.base}/pkg/README.md`);
    const got = await page.evaluate(async ({ url, prompt }) => {
      const pkg = await import('/pkg/index.js');
      const model = await pkg.Runahead.load(url, { backend: 'webgpu', threads: 2, context: 256 });
      const r = await model.generate(prompt, { maxTokens: 3, draft: 'none' }).result;
      const pool = await model.cpuPool();
      model.dispose();
      return { info: model.info(), tokens: r.tokens, backend: r.stats.backend, pool, isolated: crossOriginIsolated };
    }, { url: `/${MODEL}`, prompt: PROMPT });
    assert.equal(got.isolated, true);
    assert.equal(got.info.backend, 'webgpu');
    assert.equal(got.info.threads, undefined, "threads are the CPU engine's");
    // The threaded build, with no pool on WebGPU.
    assert.deepEqual(got.pool, { threaded: true, workers: 0, stepsJoined: 0 });
    assert.equal(got.backend, 'gpu');
    assert.deepEqual(got.tokens, (await reference).tokens.slice(0, 3));
  } finally {
    await gpuBrowser.close();
  }
});

test('decode speed on one and two threads, same page', { timeout: 2 * SLOW }, async () => {
  const page = await openPage(isolated);
  const speeds = { 1: [], 2: [] };
  // Alternating, so both see the same load on a shared machine.
  for (let rep = 0; rep < 3; rep++) {
    for (const threads of [1, 2]) {
      const got = await loadAndGenerate(page, { threads }, { maxTokens: BENCH_TOKENS, speculative: false });
      assert.equal(got.info.threads, threads);
      speeds[threads].push(got.runs.plain.tokensPerSecond);
    }
  }
  await page.close();
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const [m1, m2] = [median(speeds[1]), median(speeds[2])];
  console.log(`CPU engine decode, ${BENCH_TOKENS} tokens, medians of 3: 1 thread ${m1.toFixed(1)} tok/s, ` +
    `2 threads ${m2.toFixed(1)} tok/s (${(m2 / m1).toFixed(2)}x); runs: ${JSON.stringify(speeds)}`);
});
