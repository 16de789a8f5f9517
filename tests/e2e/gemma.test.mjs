// A real Gemma 3 file in the page (Gemma-3-270M, Q4_K_M, fetched by scripts/fetch-models.sh):
// through the package in Debian's headless Chromium, on the CPU engine (what `auto` takes on
// SwiftShader) its greedy chat reply is the native CLI's token for token, drafting included; on
// WebGPU (asked for by name) its weights stream to the GPU and it generates, drafting included.
// SwiftShader runs a forward of this 262,144-token vocabulary in seconds, so the WebGPU run is
// short and drafts at most two tokens a forward.
//
//   scripts/test.sh e2e      (builds pkg/wasm, runs npm ci, then the files here)
//
// Environment: RUNAHEAD_BIN (native CLI, default target/debug/runahead), CHROMIUM.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';
import { chromiumFlags, root, serve } from './serve.mjs';

const MODEL = 'models/gemma-3-270m-q4_k_m.gguf';
const QUESTION = 'Name three colors.';
const MAX_TOKENS = 12;
const GPU_TOKENS = 6;
const SLOW = 600_000;
const runahead = process.env.RUNAHEAD_BIN ?? join(root, 'target/debug/runahead');

let server;
let browser;
let page;

before(async () => {
  let base;
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

test('Gemma 3 in the page: the native greedy reply on the CPU engine, and on WebGPU', { timeout: SLOW }, async () => {
  const args = ['generate', '--model', join(root, MODEL), '--chat', '--prompt', QUESTION,
    '--max-tokens', String(MAX_TOKENS), '--backend', 'cpu', '--draft', 'none', '--json'];
  const native = JSON.parse((await promisify(execFile)(runahead, args, { maxBuffer: 1 << 22 })).stdout);
  const out = await page.evaluate(async ([url, question, cpuTokens, gpuTokens]) => {
    const { Runahead } = await import('/pkg/index.js');
    const runs = {};
    for (const backend of ['auto', 'webgpu']) {
      const model = await Runahead.load(url, { backend, context: 128, cache: false, history: false });
      const messages = [{ role: 'user', content: question }];
      const maxTokens = backend === 'webgpu' ? gpuTokens : cpuTokens;
      const depth = backend === 'webgpu' ? 2 : 'auto';
      const plain = await model.generate(messages, { maxTokens, draft: 'none' }).result;
      const drafted = await model.generate(messages, { maxTokens, draft: 'ngram', depth }).result;
      runs[backend] = {
        info: model.info(),
        wasm: await model.wasmMemoryBytes(),
        tokens: plain.tokens,
        drafted: drafted.tokens,
      };
      model.dispose();
    }
    return runs;
  }, [`/${MODEL}`, QUESTION, MAX_TOKENS, GPU_TOKENS]);
  const cpu = out.auto;
  assert.equal(cpu.info.architecture, 'gemma3');
  assert.equal(cpu.info.backend, 'cpu');
  assert.equal(cpu.info.chatTemplate, true);
  assert.deepEqual(cpu.tokens, native.tokens, 'the CPU engine in the page = the native CLI');
  assert.deepEqual(cpu.drafted, cpu.tokens, 'speculative = plain');
  const gpu = out.webgpu;
  assert.equal(gpu.info.backend, 'webgpu');
  assert.equal(gpu.tokens.length, GPU_TOKENS);
  assert.deepEqual(gpu.drafted, gpu.tokens, 'speculative = plain on WebGPU');
  // The 253 MB file never sits in the page's memory on WebGPU.
  assert.ok(gpu.wasm < 96 * 2 ** 20, `wasm memory ${gpu.wasm}`);
  console.log(`gemma3 in the page: cpu ${cpu.tokens.length} tokens = native; webgpu wasm ` +
    `${(gpu.wasm / 2 ** 20).toFixed(1)} MiB, first tokens ${gpu.tokens.slice(0, 4)} (cpu ${cpu.tokens.slice(0, 4)})`);
});
