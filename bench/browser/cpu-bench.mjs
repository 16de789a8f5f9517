// Decode speed of runahead's CPU engine (the package with backend 'cpu': WebAssembly SIMD)
// against wllama (llama.cpp in WebAssembly, no WebGPU) on the same GGUF, in one headless
// Chromium session without WebGPU, runs alternating. One thread each by default; with
// BENCH_THREADS=N (N > 1) the page is cross-origin isolated (COOP/COEP) and both engines also
// run on N threads (runahead's threaded wasm, wllama's pthreads), every configuration loaded
// once and the runs alternating over all of them. Run it through scripts/browser-cpu-bench.sh
// (which checks what it needs); prints one JSON object.
//
// Environment: BENCH_MODEL (default models/SmolLM2-135M-Instruct.Q4_1.gguf), BENCH_TOKENS
// (decoded tokens per run, default 64), BENCH_RUNS (runs per engine, default 3), BENCH_THREADS
// (default 1), BENCH_PROMPT_REPEAT (the prompt's sentence this many times, default 1: 60
// repeats decode behind about 800 tokens, where attention weighs), BENCH_WASM (`plain`: the
// builds without relaxed SIMD, by their URLs; default: what the package picks), CHROMIUM.

import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { chromiumFlagsWithoutWebGpu, root, serve } from '../../tests/e2e/serve.mjs';

const MODEL = process.env.BENCH_MODEL ?? 'models/SmolLM2-135M-Instruct.Q4_1.gguf';
const TOKENS = Number(process.env.BENCH_TOKENS ?? 64);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const THREADS = Number(process.env.BENCH_THREADS ?? 1);
const THREAD_COUNTS = THREADS > 1 ? [1, THREADS] : [1];
const REPEAT = Number(process.env.BENCH_PROMPT_REPEAT ?? 1);
const PROMPT = Array(REPEAT).fill('Once upon a time, in a small village by the sea,').join(' ');
// Room for the prompt (at most ~14 tokens a repeat) and the decoded tokens.
const CONTEXT = Math.max(512, 64 * Math.ceil((16 * REPEAT + TOKENS + 64) / 64));
const WLLAMA = '/bench/browser/node_modules/@wllama/wllama/esm';
const WASM_URLS = process.env.BENCH_WASM === 'plain'
  ? { wasmUrl: '/pkg/wasm/runahead_bg.wasm', wasmThreadsUrl: '/pkg/wasm-threads/runahead_bg.wasm' }
  : {};

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const isolation = {
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-embedder-policy': 'require-corp',
};
const { base, server } = await serve(root, { headers: THREADS > 1 ? isolation : {} });
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: await chromiumFlagsWithoutWebGpu(),
  headless: true,
});
try {
  const page = await browser.newPage();
  await page.addInitScript(() => {
    Object.defineProperty(Navigator.prototype, 'gpu', { value: undefined, configurable: true });
  });
  page.on('pageerror', (e) => console.error(`pageerror: ${e.message}`));
  await page.goto(`${base}/pkg/README.md`);
  const result = await page.evaluate(async ({ url, wllamaDir, prompt, tokens, runs, threadCounts, context, wasmUrls }) => {
    const pkg = await import('/pkg/index.js');
    const { Wllama } = await import(`${wllamaDir}/index.js`);
    const blob = await (await fetch(url)).blob();

    const engines = [];
    for (const threads of threadCounts) {
      const runahead = await pkg.Runahead.load(blob, { backend: 'cpu', context, threads, ...wasmUrls });
      const wllama = new Wllama(
        { default: `${wllamaDir}/wasm/wllama.wasm` },
        { suppressNativeLog: true },
      );
      await wllama.loadModel([blob], { n_threads: threads, n_gpu_layers: 0, n_ctx: context, seed: 1 });
      engines.push({ threads, runahead, wllama, ours: [], theirs: [] });
    }

    for (let i = 0; i < runs; i++) {
      for (const e of engines) {
        const generation = e.runahead.generate(prompt, { maxTokens: tokens, draft: 'none' });
        const stats = await generation.stats;
        e.ours.push({ tokensPerSecond: stats.tokens_per_second, tokens: stats.generated_tokens });
        const response = await e.wllama.createCompletion({
          prompt, max_tokens: tokens, temperature: 0, ignore_eos: true,
        });
        const t = response.timings;
        e.theirs.push({ tokensPerSecond: t.predicted_per_second, tokens: t.predicted_n });
      }
    }
    const out = [];
    for (const e of engines) {
      out.push({
        threads: e.threads,
        info: e.runahead.info(),
        pool: await e.runahead.cpuPool(),
        wllamaMultiThread: e.wllama.isMultithread(),
        wllamaThreads: e.wllama.getNumThreads(),
        ours: e.ours,
        theirs: e.theirs,
      });
    }
    return { engines: out, isolated: crossOriginIsolated, userAgent: navigator.userAgent };
  }, { url: `/${MODEL}`, wllamaDir: WLLAMA, prompt: PROMPT, tokens: TOKENS, runs: RUNS, threadCounts: THREAD_COUNTS, context: CONTEXT, wasmUrls: WASM_URLS });

  const configs = result.engines.map((e) => {
    const ours = median(e.ours.map((r) => r.tokensPerSecond));
    const theirs = median(e.theirs.map((r) => r.tokensPerSecond));
    return {
      threads: e.threads,
      runahead: { adapter: e.info.adapter, backend: e.info.backend, threadsReason: e.info.threadsReason, pool: e.pool, runs: e.ours },
      wllama: { threads: e.wllamaThreads, multiThread: e.wllamaMultiThread, runs: e.theirs },
      median_tokens_per_second: { runahead: ours, wllama: theirs },
      ratio: ours / theirs,
    };
  });
  const one = configs[0].median_tokens_per_second;
  const last = configs[configs.length - 1].median_tokens_per_second;
  console.log(JSON.stringify({
    model: MODEL,
    prompt: REPEAT > 1 ? `${REPEAT} x ${PROMPT.slice(0, 49)}` : PROMPT,
    context: CONTEXT,
    tokens: TOKENS,
    runs: RUNS,
    cross_origin_isolated: result.isolated,
    configs,
    // The single-thread figures keep their old names.
    median_tokens_per_second: configs[0].median_tokens_per_second,
    ratio: configs[0].ratio,
    thread_speedup: { runahead: last.runahead / one.runahead, wllama: last.wllama / one.wllama },
    browser: result.userAgent,
    root: join(root),
  }, null, 2));
} finally {
  await browser.close();
  server.kill();
}
