// What loading SmolLM2 through the package costs, against the file's size, in Debian's headless
// Chromium (WebGPU on SwiftShader; the weights' GPU buffers live in the GPU process, not here):
// on the page's thread (`worker: false`), the peak of the page's JS heap plus its WebAssembly
// memory; in the worker (the default), the page's JS heap peak plus the worker's WebAssembly
// memory (read through model.wasmMemoryBytes(), which the worker answers). The CPU engine (what
// `auto` takes on SwiftShader) holds the file once, in WebAssembly memory; on WebGPU the weights
// go from each downloaded chunk to the GPU, and the page holds little more than the tokenizer.
//
//   scripts/test.sh e2e      (runs the files of tests/e2e)
//
// The JS heap is sampled every 10 ms and at every progress event while the model loads;
// Chromium reports it precisely with --enable-precise-memory-info. A load that also writes the
// model into the model cache (the default) copies each chunk into a Blob, whose bytes the browser
// keeps outside the JavaScript heap until the cache stores them (pkg/source.js, CacheCopy): the
// bound is the same with and without the cache.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { chromiumFlags, root, serve } from './serve.mjs';

const MODEL = 'models/SmolLM2-135M-Instruct.Q4_1.gguf';
// The model once, in WebAssembly memory, plus what parsing and uploading need.
const LIMIT = 1.2;
// On WebGPU: the parsed header and the tokenizer (about 10 MiB together), the vectors held whole,
// one chunk.
const GPU_LIMIT_BYTES = 24 * 2 ** 20;

let server;
let base;
let browser;

before(async () => {
  ({ base, server } = await serve());
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: [...(await chromiumFlags()), '--enable-precise-memory-info'],
    headless: true,
  });
});

after(async () => {
  await browser?.close();
  server?.kill();
});

async function measure(worker, cache = true, backend = 'auto') {
  const fileBytes = (await stat(join(root, MODEL))).size;
  // A fresh context each: an empty model cache, so the model is downloaded (and cached).
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${base}/pkg/README.md`);
  const m = await page.evaluate(async ([url, worker, cache, backend]) => {
    const pkg = await import('/pkg/index.js');
    if (!worker) await pkg.initialize();
    const heap = () => performance.memory.usedJSHeapSize;
    const heap0 = heap();
    const wasm0 = await pkg.wasmMemoryBytes();
    let peak = heap0;
    const sample = () => { peak = Math.max(peak, heap()); };
    const timer = setInterval(sample, 10);
    const model = await pkg.Runahead.load(url, { context: 64, worker, cache, backend, onProgress: sample });
    sample();
    const tokens = (await model.generate('The capital of France is', { maxTokens: 8 }).result).tokens;
    clearInterval(timer);
    // The worker's module is instantiated with the load: all of its memory counts.
    const wasm1 = await model.wasmMemoryBytes();
    const inWorker = model.inWorker;
    const used = model.info().backend;
    model.dispose();
    return { heap0, peak, wasm0, wasm1, inWorker, tokens, used };
  }, [`/${MODEL}`, worker, cache, backend]);
  await context.close();
  assert.equal(m.inWorker, worker);
  if (backend !== 'auto') assert.equal(m.used, backend);
  const heapPeak = m.peak - m.heap0;
  const wasm = m.wasm1 - m.wasm0;
  const ratio = (heapPeak + wasm) / fileBytes;
  const mib = (b) => (b / 2 ** 20).toFixed(1);
  console.log(`${m.used}, ${worker ? 'worker' : 'page thread'}, cache ${cache ? 'on' : 'off'}: file ${mib(fileBytes)} MiB; page JS heap peak ` +
    `+${mib(heapPeak)} MiB; ${worker ? "worker's" : "page's"} wasm memory +${mib(wasm)} MiB ` +
    `(${mib(m.wasm1)} MiB in all); ${ratio.toFixed(2)}x the file`);
  return { ratio, heapPeak, wasm, tokens: m.tokens };
}

test(`loading SmolLM2 on the page's thread costs the page at most ${LIMIT}x the file`, { timeout: 480_000 }, async () => {
  const { ratio } = await measure(false, false);
  assert.ok(ratio <= LIMIT, `${ratio.toFixed(2)}x the file`);
});

test(`and writing it into the model cache as well, at most ${LIMIT}x the file`, { timeout: 480_000 }, async () => {
  const { ratio } = await measure(false, true);
  assert.ok(ratio <= LIMIT, `${ratio.toFixed(2)}x the file`);
});

test(`loading SmolLM2 in the worker costs at most ${LIMIT}x the file, and the page almost nothing`, { timeout: 480_000 }, async () => {
  const { ratio, heapPeak } = await measure(true);
  assert.ok(ratio <= LIMIT, `${ratio.toFixed(2)}x the file`);
  // The page never holds model bytes: its heap grows by less than one 1 MiB read chunk.
  assert.ok(heapPeak < 2 ** 20, `page heap +${heapPeak} bytes`);
});

test(`on WebGPU the page never holds the file: at most ${GPU_LIMIT_BYTES >> 20} MiB`, { timeout: 480_000 }, async () => {
  // (package.test.mjs checks the GPU engine's greedy tokens against the native CLI's.)
  const runs = [];
  for (const worker of [true, false]) {
    const { heapPeak, wasm, tokens } = await measure(worker, false, 'webgpu');
    assert.ok(heapPeak + wasm <= GPU_LIMIT_BYTES, `heap +${heapPeak}, wasm +${wasm} bytes`);
    runs.push(tokens);
  }
  assert.deepEqual(runs[0], runs[1], 'the same tokens in the worker and on the page');
});
