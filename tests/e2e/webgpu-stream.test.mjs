// A WebGPU load streams the weights from each downloaded chunk to the GPU (Debian's headless
// Chromium, WebGPU on SwiftShader asked for by name): a load aborted in any phase (while the
// module compiles, at the header, halfway through the weights, in the last checks) is
// `cancelled`, and leaves nothing behind: the next load on the same thread needs no more
// WebAssembly memory than a load did before them, and generates. A file cut short (its tensors
// reach past its end, or its header does) or with another magic is `gguf`, found at its header.
//
//   scripts/test.sh e2e      (builds pkg/wasm, runs npm ci, then the files here)
//
// Environment: CHROMIUM.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { chromiumFlags, root, serve } from './serve.mjs';

const MODEL = 'models/SmolLM2-135M-Instruct.Q4_1.gguf';
const SLOW = 600_000;

let server;
let base;
let browser;
let page;

before(async () => {
  ({ base, server } = await serve());
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: await chromiumFlags(),
    headless: true,
  });
  page = await browser.newPage();
  await page.goto(`${base}/pkg/README.md`);
});

after(async () => {
  await browser?.close();
  server?.kill();
});

test('a streamed WebGPU load aborted in any phase is cancelled and leaves nothing behind', { timeout: SLOW }, async () => {
  const size = (await stat(join(root, MODEL))).size;
  const outcome = await page.evaluate(async ([url, size]) => {
    const pkg = await import('/pkg/index.js');
    const { Runahead } = pkg;
    const options = { backend: 'webgpu', worker: false, context: 64, cache: false, history: false };
    const generate = async (model) => (await model.generate('Hi', { maxTokens: 2, draft: 'none' }).result).tokens;
    // One whole load first: the WebAssembly memory a load needs.
    const first = await Runahead.load(url, options);
    const want = await generate(first);
    first.dispose();
    const memory = await pkg.wasmMemoryBytes();
    const abortAt = async (when) => {
      const stop = new AbortController();
      try {
        const model = await Runahead.load(url, {
          ...options,
          signal: stop.signal,
          onProgress: (p) => {
            if (when(p)) stop.abort();
          },
        });
        model.dispose();
        return 'loaded';
      } catch (e) {
        return e.code;
      }
    };
    const codes = {
      compile: await abortAt((p) => p.phase === 'compile'),
      header: await abortAt((p) => p.phase === 'download' && p.loaded > 0),
      weights: await abortAt((p) => p.phase === 'download' && p.loaded > size / 2),
      upload: await abortAt((p) => p.phase === 'upload'),
    };
    const again = await Runahead.load(url, options);
    const tokens = await generate(again);
    again.dispose();
    return { codes, grown: (await pkg.wasmMemoryBytes()) - memory, tokens, want };
  }, [`/${MODEL}`, size]);
  assert.deepEqual(outcome.codes, { compile: 'cancelled', header: 'cancelled', weights: 'cancelled', upload: 'cancelled' });
  // The allocator's placement moves the high-water mark by about a megabyte either way; an
  // aborted load that kept its header (SmolLM2's is 1.8 MB) or its held tensors would add more
  // than the bound over the three aborts that got past the header.
  assert.ok(outcome.grown <= 3 * 2 ** 20, `the wasm memory grew by ${outcome.grown} bytes after the aborted loads`);
  assert.deepEqual(outcome.tokens, outcome.want);
});

test('a file cut short or not GGUF is gguf', { timeout: SLOW }, async () => {
  const outcome = await page.evaluate(async (url) => {
    const { Runahead } = await import('/pkg/index.js');
    const bytes = new Uint8Array(await (await fetch(url)).arrayBuffer());
    const codeOf = async (source) => {
      try {
        (await Runahead.load(source, { backend: 'webgpu', worker: false, context: 64, history: false })).dispose();
        return 'loaded';
      } catch (e) {
        return e.code;
      }
    };
    const notGguf = bytes.slice();
    notGguf.set([0x47, 0x47, 0x55, 0x58]);
    return {
      cut: await codeOf(new Blob([bytes.subarray(0, bytes.length - 1000)])),
      headerOnly: await codeOf(bytes.subarray(0, 4096)),
      notGguf: await codeOf(new Blob([notGguf])),
    };
  }, `/${MODEL}`);
  assert.deepEqual(outcome, { cut: 'gguf', headerOnly: 'gguf', notGguf: 'gguf' });
});
