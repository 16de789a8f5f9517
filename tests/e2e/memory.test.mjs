// What loading SmolLM2 through the package costs the page: the peak of the JS heap plus the
// WebAssembly memory, against the file's size, in Debian's headless Chromium (WebGPU on
// SwiftShader; the weights' GPU buffers live in the GPU process, not in the page).
//
//   scripts/test.sh e2e      (runs the files of tests/e2e)
//
// The JS heap is sampled every 10 ms and at every progress event while the model loads;
// Chromium reports it precisely with --enable-precise-memory-info.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { chromiumFlags, root, serve } from './serve.mjs';

const MODEL = 'models/SmolLM2-135M-Instruct.Q4_1.gguf';
// The page holds the model once, in WebAssembly memory, plus what parsing and uploading need.
const LIMIT = 1.3;

let server;
let browser;


before(async () => {
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

test(`loading SmolLM2 costs the page at most ${LIMIT}x the file`, { timeout: 480_000 }, async () => {
  let base;
  ({ base, server } = await serve());
  const fileBytes = (await stat(join(root, MODEL))).size;
  const page = await browser.newPage();
  await page.goto(`${base}/pkg/README.md`);
  const m = await page.evaluate(async (url) => {
    const pkg = await import('/pkg/index.js');
    await pkg.initialize();
    const heap = () => performance.memory.usedJSHeapSize;
    const heap0 = heap();
    const wasm0 = await pkg.wasmMemoryBytes();
    let peak = heap0;
    const sample = () => { peak = Math.max(peak, heap()); };
    const timer = setInterval(sample, 10);
    const model = await pkg.Runahead.load(url, { context: 64, onProgress: sample });
    sample();
    clearInterval(timer);
    const wasm1 = await pkg.wasmMemoryBytes();
    model.dispose?.();
    return { heap0, peak, wasm0, wasm1 };
  }, `/${MODEL}`);
  const heapPeak = m.peak - m.heap0;
  const wasm = m.wasm1 - m.wasm0;
  const ratio = (heapPeak + wasm) / fileBytes;
  const mib = (b) => (b / 2 ** 20).toFixed(1);
  console.log(`file ${mib(fileBytes)} MiB; JS heap peak +${mib(heapPeak)} MiB; ` +
    `wasm memory +${mib(wasm)} MiB (${mib(m.wasm1)} MiB in all); ${ratio.toFixed(2)}x the file`);
  assert.ok(ratio <= LIMIT, `${ratio.toFixed(2)}x the file`);
});
