// Decode speed of runahead's CPU engine (the package with backend 'cpu': WebAssembly SIMD, one
// thread) against wllama (llama.cpp in WebAssembly, one thread, no WebGPU) on the same GGUF,
// in one headless Chromium session without WebGPU, runs alternating. Run it through
// scripts/browser-cpu-bench.sh (which checks what it needs); prints one JSON object.
//
// Environment: BENCH_MODEL (default models/SmolLM2-135M-Instruct.Q4_1.gguf), BENCH_TOKENS
// (decoded tokens per run, default 64), BENCH_RUNS (runs per engine, default 3), CHROMIUM.

import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { chromiumFlags, root, serve } from '../../tests/e2e/serve.mjs';

const MODEL = process.env.BENCH_MODEL ?? 'models/SmolLM2-135M-Instruct.Q4_1.gguf';
const TOKENS = Number(process.env.BENCH_TOKENS ?? 64);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const PROMPT = 'Once upon a time, in a small village by the sea,';
const WLLAMA = '/bench/browser/node_modules/@wllama/wllama/esm';

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const { base, server } = await serve();
const webgpu = /webgpu|vulkan|swiftshader/i;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: (await chromiumFlags()).filter((flag) => !webgpu.test(flag)),
  headless: true,
});
try {
  const page = await browser.newPage();
  await page.addInitScript(() => {
    Object.defineProperty(Navigator.prototype, 'gpu', { value: undefined, configurable: true });
  });
  page.on('pageerror', (e) => console.error(`pageerror: ${e.message}`));
  await page.goto(`${base}/pkg/README.md`);
  const result = await page.evaluate(async ({ url, wllamaDir, prompt, tokens, runs }) => {
    const pkg = await import('/pkg/index.js');
    const { Wllama } = await import(`${wllamaDir}/index.js`);
    const blob = await (await fetch(url)).blob();

    const runahead = await pkg.Runahead.load(blob, { backend: 'cpu', context: 512 });
    const wllama = new Wllama(
      { default: `${wllamaDir}/wasm/wllama.wasm` },
      { suppressNativeLog: true },
    );
    await wllama.loadModel([blob], { n_threads: 1, n_gpu_layers: 0, n_ctx: 512, seed: 1 });

    const ours = [];
    const theirs = [];
    for (let i = 0; i < runs; i++) {
      const generation = runahead.generate(prompt, { maxTokens: tokens, draft: 'none' });
      const stats = await generation.stats;
      ours.push({ tokensPerSecond: stats.tokens_per_second, tokens: stats.generated_tokens });
      const response = await wllama.createCompletion({
        prompt, max_tokens: tokens, temperature: 0, ignore_eos: true,
      });
      const t = response.timings;
      theirs.push({ tokensPerSecond: t.predicted_per_second, tokens: t.predicted_n });
    }
    return {
      info: runahead.info(),
      wllamaThreads: 1,
      ours,
      theirs,
      userAgent: navigator.userAgent,
    };
  }, { url: `/${MODEL}`, wllamaDir: WLLAMA, prompt: PROMPT, tokens: TOKENS, runs: RUNS });

  const ours = median(result.ours.map((r) => r.tokensPerSecond));
  const theirs = median(result.theirs.map((r) => r.tokensPerSecond));
  console.log(JSON.stringify({
    model: MODEL,
    prompt: PROMPT,
    tokens: TOKENS,
    runs: RUNS,
    runahead: { adapter: result.info.adapter, backend: result.info.backend, runs: result.ours },
    wllama: { threads: 1, runs: result.theirs },
    median_tokens_per_second: { runahead: ours, wllama: theirs },
    ratio: ours / theirs,
    browser: result.userAgent,
    root: join(root),
  }, null, 2));
} finally {
  await browser.close();
  server.kill();
}
